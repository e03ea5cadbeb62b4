#!/bin/bash
# The Kubernetes backend's tests against a real local node: brings the node up
# (.ci/k8s/up.sh; the first run builds Kubernetes, about 6 min on a fresh machine), checks the example
# manifests with a server-side dry run, runs the backend's cluster tests and the
# two-replica server test (cmd/python-docker-mcp TestClusterReplicas), and
# takes the node down again (KEEP=1 leaves it running). Extra arguments go to
# `go test`, e.g. `.ci/k8s/test.sh -k8s.latency` for the latency figures.
# RUNSC=1 (make test-kubernetes-gvisor) brings the node up with gVisor
# registered (up.sh) and runs every sandbox Pod under the RuntimeClass
# gvisor (PDM_K8S_RUNTIME_CLASS), which TestClusterRuntimeClass checks.
set -euo pipefail
cd "$(dirname "$0")/../.."
KC=$(.ci/k8s/up.sh | tail -1)
[ "${KEEP:-}" = 1 ] || trap '.ci/k8s/down.sh' EXIT
BIN=$(.ci/k8s/build.sh | tail -1)
export KUBECONFIG=$KC
"$BIN/kubectl" apply -f examples/kubernetes/namespace.yaml
"$BIN/kubectl" apply --dry-run=server -f examples/kubernetes/
export PDM_KUBECONFIG=$KC PDM_K8S_NODE_NAME=localhost PDM_K8S_POD_PIDS=${POD_PIDS:-256}
SKIP=()
if [ "${RUNSC:-}" = 1 ]; then
  export PDM_K8S_RUNTIME_CLASS=${PDM_K8S_RUNTIME_CLASS:-gvisor}
  # The shared suite's Hardening and OOM checks differ under gVisor (no
  # seccomp profile inside, emptyDirs not tmpfs, OOM exit code 128);
  # TestClusterRuntimeClass checks there what holds.
  SKIP=(-skip 'TestClusterSuite/(Hardening|OOM)$')
fi
${GO:-go} test ./executor/kubernetes -count=1 -v -timeout 20m "${SKIP[@]}" "$@"
# Two server processes on the cluster behind a round-robin proxy (skipped
# when the arguments pick other tests with -run).
case " $* " in
  *" -run "*) ;;
  *) ${GO:-go} test ./cmd/python-docker-mcp -count=1 -v -timeout 20m -run 'TestClusterReplicas$' ;;
esac
