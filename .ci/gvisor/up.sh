#!/usr/bin/env bash
# Starts a private Docker daemon with gVisor's runsc registered as the runtime
# "runsc", beside (never instead of) the machine's own daemon: its own data
# root, exec root, socket, pid file and cgroup parent under $G. Copies the
# sandbox image into it from the machine's daemon (docker save | load; it is
# never rebuilt here). Prints the DOCKER_HOST to use as its last line.
#   G=/tmp/pdm-gvisor-ci                      state directory
#   IMAGE=python-docker-mcp-sandbox:latest    image copied from the machine's daemon
# Needs root, dockerd, fuse-overlayfs; installs Debian's runsc with apt-get
# when missing (see executor/README.md, "gVisor").
set -euo pipefail
G=${G:-/tmp/pdm-gvisor-ci}; IMAGE=${IMAGE:-python-docker-mcp-sandbox:latest}
command -v runsc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null; }
command -v fuse-overlayfs >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse-overlayfs >/dev/null; }
mkdir -p "$G/root" "$G/exec"
cgroup=$(basename "$G")
# Debian's runsc (0.0~20221219): the ptrace platform works on this machine
# kind (KVM hung); --network=none because this runsc refuses Docker's "none"
# network namespace ("cannot run with network enabled in root network
# namespace"); a sandbox has no network either way.
cat > "$G/daemon.json" <<JSON
{"runtimes": {"runsc": {"path": "$(command -v runsc)", "runtimeArgs": ["--platform=ptrace", "--network=none"]}},
 "bridge": "none", "iptables": false, "ip-masq": false, "storage-driver": "fuse-overlayfs", "cgroup-parent": "$cgroup"}
JSON
export DOCKER_HOST=unix://$G/docker.sock
if [ -S "$G/docker.sock" ] && docker info >/dev/null 2>&1; then
	echo "gvisor: the private daemon at $G is up already" >&2
else
	nohup dockerd --config-file "$G/daemon.json" --data-root "$G/root" --exec-root "$G/exec" \
		-H "$DOCKER_HOST" --pidfile "$G/docker.pid" >"$G/dockerd.log" 2>&1 &
	for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
fi
docker info --format '{{json .Runtimes}}' | grep -q runsc || { echo "gvisor: runsc is not registered; see $G/dockerd.log" >&2; tail -20 "$G/dockerd.log" >&2; exit 1; }
if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
	DOCKER_HOST= docker image inspect "$IMAGE" >/dev/null 2>&1 || { echo "gvisor: $IMAGE is missing on the machine's daemon: run make image first" >&2; exit 1; }
	DOCKER_HOST= docker save "$IMAGE" | docker load >/dev/null
fi
echo "DOCKER_HOST=$DOCKER_HOST"
