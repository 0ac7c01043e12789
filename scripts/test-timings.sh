#!/usr/bin/env bash
# test-timings.sh: wall time of each test package of a run, slowest first, read from `go test -json`
# (the package-level pass/fail events carry Elapsed). Arguments go to `go test`, e.g.
#   scripts/services.sh run --test-tools -- scripts/test-timings.sh -race -count=1 ./...
# Set JQ_TEST_JSON=FILE to keep the whole event stream.
set -euo pipefail
rc=0
go test -json "$@" | tee "${JQ_TEST_JSON:-/dev/null}" | awk '
	/"Action":"(pass|fail|skip)"/ && !/"Test":/ {
		pkg = $0; sub(/.*"Package":"/, "", pkg); sub(/".*/, "", pkg)
		el = $0; sub(/.*"Elapsed":/, "", el); sub(/[,}].*/, "", el)
		act = $0; sub(/.*"Action":"/, "", act); sub(/".*/, "", act)
		printf "%8.1f s  %-4s %s\n", el, act, pkg
		total += el
	}
	END { printf "%8.1f s  sum of package times (packages run in parallel: wall time is less)\n", total }
' | sort -rn || rc=$?
exit "$rc"
