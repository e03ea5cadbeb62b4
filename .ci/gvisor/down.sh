#!/usr/bin/env bash
# Stops the private daemon up.sh started (by its pid file, never by name) and
# removes its state. The machine's own daemon is never touched.
#   G=/tmp/pdm-gvisor-ci   the state directory up.sh used
#   KEEP=1                 keep $G (logs, data root) for a look
set -u
G=${G:-/tmp/pdm-gvisor-ci}
export DOCKER_HOST=unix://$G/docker.sock
if [ -f "$G/docker.pid" ]; then
	pid=$(cat "$G/docker.pid")
	docker ps -aq 2>/dev/null | xargs -r docker rm -f >/dev/null 2>&1
	kill "$pid" 2>/dev/null
	for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
fi
# This daemon's runtime processes only (shims, a runsc gofer or sandbox of a
# failed start): their command lines name $G.
for p in /proc/[0-9]*; do
	{ tr '\0' ' ' <"$p/cmdline" | grep -q -- "$G/"; } 2>/dev/null && kill "${p#/proc/}" 2>/dev/null
done
sleep 1
grep " $G/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
# The cgroup parent and any container cgroups left in it (seen after runs
# that were interrupted), deepest first; rmdir removes only empty ones.
for d in /sys/fs/cgroup/*/"$(basename "$G")" /sys/fs/cgroup/"$(basename "$G")"; do
	[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
done
[ "${KEEP:-}" = 1 ] || rm -rf "$G"
exit 0
