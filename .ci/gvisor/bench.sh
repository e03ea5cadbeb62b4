#!/usr/bin/env bash
# make bench-gvisor: the bench's runtimes scenario (cold sandbox, pooled
# call, session call) under the daemon's default runtime and under runsc,
# in one run, against the private daemon of up.sh (torn down afterwards).
# Extra arguments go to the bench, e.g. -n 20 -json.
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
export G=${G:-/tmp/pdm-gvisor-$$}
trap '.ci/gvisor/down.sh' EXIT
host=$(.ci/gvisor/up.sh | tail -1)
export DOCKER_HOST=${host#DOCKER_HOST=}
$GO run ./cmd/python-docker-mcp --set docker.runtimes=runsc bench -scenarios runtimes -runtimes runsc "$@"
