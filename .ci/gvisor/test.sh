#!/usr/bin/env bash
# make test-gvisor: runs a chosen set of the executor's Docker tests with
# every sandbox under gVisor's runsc (docker.runtime: runsc), plus the tests
# of the runtime chosen per call (the executor's TestGVisor*, in
# executor/docker; the server's TestGVisorByPolicy), against a private
# Docker daemon that up.sh starts with runsc registered. The machine's own
# daemon is never touched (only read: the sandbox image is copied from it).
# The private daemon is torn down however the run ends. About 4 minutes on
# 2 CPUs.
#   GO=go   G=/tmp/pdm-gvisor-PID (the private daemon's state; one per run, so runs side by side do not meet)
#   TESTS=regexp   another set of executor tests
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
export G=${G:-/tmp/pdm-gvisor-$$}
# What runs under runsc as it runs under runc. Left out, with the reason in
# executor/README.md ("gVisor", the guarantee table): TestForkBomb,
# TestOOMOfAChildProcess, TestRunnerIsUnreachable, TestSandboxConfinement,
# TestNetworkLease, and TestOOM, which TestGVisorOOM replaces (an OOM kill
# under runsc is now and then reported "killed": the daemon got no mark).
TESTS=${TESTS:-'^(TestGVisor.*|TestTransientPrint|TestTransientState|TestTransientFiguresAndFiles|TestPersistentSession|TestTimeoutTransient|TestTimeoutPersistent|TestCapabilitiesDenied|TestCapabilitiesAllowed|TestModuleRulesJudgeCTwinsAndHelpers|TestForgedFramesCannotAnswer|TestRunnerStreamsCannotBeReopened|TestTreeVolume|TestPoolNeverReuses|TestPoolSession|TestParse|TestInstallIntoSession)$'}
trap '.ci/gvisor/down.sh' EXIT
host=$(.ci/gvisor/up.sh | tail -1)
export DOCKER_HOST=${host#DOCKER_HOST=}
export PYTHON_DOCKER_MCP_DOCKER_RUNTIME=runsc PDM_TEST_GVISOR=1 CI=${CI:-true}
echo "gvisor: running executor tests under runsc at $DOCKER_HOST" >&2
# The executor's tests of the real sandbox are in two packages, the core's
# and the Docker backend's (executor/docker); -p 1 runs one package at a
# time, so their sandboxes under runsc do not compete for the CPUs.
$GO test -count=1 -p 1 -timeout 20m -run "$TESTS" ./executor/ ./executor/docker/
# The policy's choice end to end: the built server, JWT principals, the
# example policy; runc and runsc calls on one server.
$GO test -count=1 -timeout 20m -run '^TestGVisor' ./cmd/python-docker-mcp/
