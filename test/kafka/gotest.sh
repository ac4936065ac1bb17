#!/usr/bin/env bash
# Runs `go test -v ARGS...` with its whole output in LOG, and prints only the
# verdicts and the measurements: each package's result and the lines tests
# log as FIGURES, CHAOS or REBALANCE (see test/README.md), then the slowest
# tests, to see what a line's time goes to. On a failure it prints the
# whole log. Exits with go test's status.
#
#   gotest.sh LOG GO ARGS...
set -uo pipefail

log=$1 go=$2
shift 2
"$go" test -v "$@" >"$log" 2>&1
rc=$?
if ((rc != 0)); then
	cat "$log"
else
	grep -E '^(ok |FAIL|panic)|FIGURES|CHAOS|REBALANCE' "$log"
	sed -nE 's/^ *--- PASS: ([^ ]+) \(([0-9.]+)s\)$/\2 \1/p' "$log" | sort -rn | head -6 |
		awk '{printf "slowest: %s %.0f s\n", $2, $1}'
fi
exit "$rc"
