#!/bin/bash
# Builds the binaries of a single-node Kubernetes test cluster from Go modules:
# kubelet, kube-apiserver, kubectl, kube-scheduler and kube-controller-manager
# (k8s.io/kubernetes), etcd, and a tiny pause binary. They are cached under $PDM_K8S_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/python-docker-mcp/k8s/<version>), so only the first
# run pays for the build (~12 min on 2 cores with a cold Go cache). Builds run under
# `nice -n 15` so they do not starve other work on the machine.
# Usage: .ci/k8s/build.sh          (prints the bin directory on its last line)
set -euo pipefail
KV=${KV:-v1.34.4}; SV=${SV:-v0.34.4}; EV=${EV:-v3.6.16}
CACHE=${PDM_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/python-docker-mcp/k8s}
B=$CACHE/$KV
BIN=$B/bin
NICE=${NICE:-nice -n 15}
mkdir -p "$BIN" "$B/build" "$B/etcdbuild" "$B/pause"
T0=$(date +%s); ts() { echo "[k8s build $(( $(date +%s)-T0 ))s] $*" >&2; }
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off
GO=${GO:-go}

K8SBIN="kubelet kube-apiserver kubectl kube-scheduler kube-controller-manager"
missing=; for b in $K8SBIN; do [ -x "$BIN/$b" ] || missing=1; done
if [ -n "$missing" ]; then
  ts "building $K8SBIN $KV"
  $GO mod download -json "k8s.io/kubernetes@$KV" > "$B/build/download.json"
  KD=$($GO env GOMODCACHE)/k8s.io/kubernetes@$KV
  cd "$B/build"
  # The module proxy's zip of k8s.io/kubernetes has no staging/ tree: point every
  # staging module at its published version instead.
  { printf 'module pdmk8s/build\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$KV"
    sed -n '/^replace/,/^)/p' "$KD/go.mod" | awk -v v="$SV" '/=>/{printf "\t%s => %s %s\n", $1, $1, v}'
    echo ')'; } > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kubectl"\n\t_ "k8s.io/kubernetes/cmd/kubelet"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"\n)\n' > tools.go
  $GO mod tidy
  LDF="-s -w -X k8s.io/component-base/version.gitVersion=$KV -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$KV" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"
  $NICE $GO build -trimpath -ldflags "$LDF" -o "$BIN/" $(for b in $K8SBIN; do echo k8s.io/kubernetes/cmd/$b; done)
fi
if [ ! -x "$BIN/etcd" ]; then
  ts "building etcd $EV"
  cd "$B/etcdbuild"
  printf 'module pdmk8s/etcdbuild\n\ngo 1.24.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$EV" > go.mod
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
  $GO mod tidy
  $NICE $GO build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
fi
if [ ! -x "$BIN/pause" ]; then
  ts "building pause"
  cd "$B/pause"
  cat > main.go <<'EOG'
// pause is the pod sandbox's init process: it reaps children and exits on INT/TERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 8)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range c {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
	}
}
EOG
  printf 'module pdmk8s/pause\n\ngo 1.24.0\n' > go.mod
  $NICE $GO build -trimpath -ldflags "-s -w" -o "$BIN/pause" .
fi
ts "binaries ready in $BIN"
echo "$BIN"
