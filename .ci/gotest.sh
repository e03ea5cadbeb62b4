#!/usr/bin/env bash
# `make gotest`: go vet and every Go package's tests. The whole output is
# kept in $GOTEST_LOG; when a package fails, its failures are printed again
# at the end, so that the last lines of a long run name what failed (a
# timeout's goroutine dump otherwise buries the test that hung).
set -uo pipefail
GO="${GO:-go}"
log="${GOTEST_LOG:-${TMPDIR:-/tmp}/python-docker-mcp-gotest.log}"
"$GO" vet ./... || exit 1
# 45 minutes per package: the longest (cmd) takes about 16 on 2 CPUs, and
# took 27.5 on a machine whose page faults were slow (29 Nov 2026).
"$GO" test -count=1 -timeout 45m "$@" ./... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
	echo
	echo "gotest: failed (exit $rc); what failed, from $log:"
	# A timeout prints the tests that were running under "running tests:";
	# a failed test, its log lines (indented) after "--- FAIL".
	awk '/^panic: test timed out/ {print; run=1; next}
		run && /^(running tests:|\t)/ {print; next}
		{run=0}
		/^ *--- FAIL/ {print; fail=1; next}
		fail && /^    / {print; next}
		{fail=0}
		/^(FAIL|panic:)/ {print}' "$log" | head -200
fi
exit "$rc"
