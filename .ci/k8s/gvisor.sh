#!/bin/bash
# Builds gVisor for the test node's private containerd (up.sh with RUNSC=1):
# runsc and its containerd shim, both from one Go module version
# (gvisor.dev/gvisor@$GV), static (CGO_ENABLED=0), cached under
# $PDM_GVISOR_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/python-docker-mcp/gvisor/$GV);
# a second run only prints the directory. In the bin directory:
#
#   runsc                      the runtime (a dynamically linked runsc, which
#                              `go install` makes when cgo is on, fails at start:
#                              its sandbox and gofer re-execute /proc/self/exe
#                              inside their chroot, which has no ELF interpreter:
#                              "error executing umounter: fork/exec /proc/self/exe:
#                              no such file or directory")
#   gvisor-containerd-shim     the shim, with one change: it tolerates being
#                              refused to lower its own oom_score_adj (-999).
#                              Root here lacks CAP_SYS_RESOURCE, so the shim as
#                              published fails every start with "failed to set
#                              OOM Score on shim: ... permission denied" (runc's
#                              shim lowers nothing, so it is not affected)
#   containerd-shim-runsc-v1   what containerd runs for runtime_type
#                              io.containerd.runsc.v1: a wrapper of the shim for
#                              containerd 1.6 (Debian's), which reads the shim's
#                              `start` output as a bare socket address, while a
#                              shim built on containerd 2's library prints
#                              {"version":2,"address":...,"protocol":"ttrpc"}
#
# The first build takes a few minutes (2 CPUs), under `nice -n 15`.
# Usage: .ci/k8s/gvisor.sh        (prints the bin directory on its last line)
set -euo pipefail
GV=${GV:-v0.0.0-20260905035102-160fafc42237}
CACHE=${PDM_GVISOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/python-docker-mcp/gvisor}
B=$CACHE/$GV
BIN=$B/bin
NICE=${NICE:-nice -n 15}
GO=${GO:-go}
T0=$(date +%s); ts() { echo "[gvisor build $(( $(date +%s)-T0 ))s] $*" >&2; }
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOWORK=off

if [ ! -x "$BIN/runsc" ] || [ ! -x "$BIN/gvisor-containerd-shim" ]; then
  mkdir -p "$BIN"
  ts "downloading gvisor.dev/gvisor@$GV"
  M=$($GO mod download -json "gvisor.dev/gvisor@$GV" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$M" ] || { echo "gvisor.sh: no module directory for gvisor.dev/gvisor@$GV" >&2; exit 1; }
  # A copy of the module, the shim's one change applied, built as the main
  # module (its own go.mod and go.sum pin every dependency).
  rm -rf "$B/src"; cp -r "$M" "$B/src"; chmod -R u+w "$B/src"
  f=$B/src/pkg/shim/v1/manager.go
  old='if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {'
  grep -qF "$old" "$f" || { echo "gvisor.sh: $f no longer has the line to change: $old" >&2; exit 1; }
  sed -i "s|$old|if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil \&\& !os.IsPermission(err) {|" "$f"
  cd "$B/src"
  ts "building runsc and the shim"
  $NICE $GO build -trimpath -ldflags "-s -w" -o "$BIN/gvisor-containerd-shim.new" ./shim
  $NICE $GO build -trimpath -ldflags "-s -w" -o "$BIN/runsc.new" ./runsc
  mv "$BIN/gvisor-containerd-shim.new" "$BIN/gvisor-containerd-shim"; mv "$BIN/runsc.new" "$BIN/runsc"
  cd /; rm -rf "$B/src"
fi
cat > "$BIN/containerd-shim-runsc-v1.new" <<'EOF'
#!/bin/sh
# containerd 1.6 reads a shim's `start` output as its socket address; this
# shim prints containerd 2's bootstrap JSON: pass on only the address.
real=$(dirname "$0")/gvisor-containerd-shim
last=; for a in "$@"; do last=$a; done
[ "$last" = start ] || exec "$real" "$@"
out=$("$real" "$@") || { rc=$?; printf %s "$out"; exit $rc; }
case $out in
'{'*) printf %s "$out" | sed -n 's/.*"address":"\([^"]*\)".*/\1/p' | tr -d '\n' ;;
*) printf %s "$out" ;;
esac
EOF
chmod +x "$BIN/containerd-shim-runsc-v1.new"; mv "$BIN/containerd-shim-runsc-v1.new" "$BIN/containerd-shim-runsc-v1"
ts "runsc and containerd-shim-runsc-v1 ready in $BIN"
echo "$BIN"
