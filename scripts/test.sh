#!/usr/bin/env bash
# test.sh: the whole suite, exactly as CI runs it (.ci/run, `task test`), with only Go installed
# beside the SDKs' runtimes. A shell script rather than a task so that CI compiles no task runner
# first (go-task's own build was 429 s of a cold run at load 11).
#
#   scripts/test.sh [-- go test flags]       every step, in the order below
#   scripts/test.sh STEP… [-- go test flags] some of them: lint generate-check go bench fuzz sdks
#
# Each step prints its wall time and the load average when it ends. With every step asked for, sdks
# runs beside bench and fuzz (see below).
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."

steps=()
while [[ $# -gt 0 && $1 != -- ]]; do
	steps+=("$1")
	shift
done
[[ ${1:-} == -- ]] && shift
gotest_args=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(lint generate-check go bench fuzz sdks)

tool() { go tool -modfile=tools/go.mod "$@"; }

lint() {
	local unformatted
	unformatted=$(find . -name '*.go' -not -path './.git/*' -not -path './.task/*' -print0 | xargs -0 gofmt -l)
	if [[ -n $unformatted ]]; then
		echo "gofmt would change:" >&2
		echo "$unformatted" >&2
		return 1
	fi
	if ! go mod tidy -diff; then
		echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit the result" >&2
		return 1
	fi
	# No separate go vet ./...: golangci-lint's govet runs the same analyzers, and go vet first
	# compiled every package and test dependency once more without -race (on an empty build
	# cache the longest step of the suite before the tests).
	tool golangci-lint run ./...
	tool buf lint
	tool buf format -d --exit-code
}

generate_check() {
	local tmp
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT # each step runs in a subshell of its own
	tool buf generate --output "$tmp"
	if ! diff -r "$tmp/api/gen" api/gen; then
		echo "api/gen is stale: run 'go tool -modfile=tools/go.mod task generate' and commit the result" >&2
		return 1
	fi
}

# The tests of every package in one go test run: packages in parallel, the two longest first, the
# binary-level tests of test/e2e and test/faults (each starts as soon as it is built, beside the
# other). -vet=off: lint has just run golangci-lint's govet, go test's own vet is a subset of its
# analyzers. -timeout 20m: a hung test still fails, but a loaded machine does not (the binary-level
# tests, then in one package, ran 515 s at load 27, past the 8 min they had).
go_tests() {
	scripts/services.sh run --test-tools -- go test -race -count=1 -timeout 20m -vet=off ./test/e2e/ ./test/faults/ ./... "${gotest_args[@]}"
}

# Every benchmark once (so they keep compiling and working), in a go test of its own: with -bench,
# go test starts the first package only after every build and then runs the packages one after
# the other (cmd/go serialises benchmark runs), which the tests do not need.
bench() {
	# shellcheck disable=SC2046 # one package a word
	scripts/services.sh run -- go test -race -count=1 -timeout 20m -vet=off -run='^$' -bench=. -benchtime=1x $(scripts/bench-packages.sh) "${gotest_args[@]}"
}

# The decoder at the trust boundary, fuzzed briefly with its allocation cap (a length bomb). A count,
# not a duration: a duration -fuzztime races the fuzzing coordinator's own deadline on a busy
# machine and fails with a bare "context deadline exceeded" and no input (golang/go#75804; seen
# here once on a clean clone). 30,000 executions are ~5 s on 2 cores. Each input that finds new
# coverage is minimized before it joins the corpus, by default for up to 60 s each: on a fresh cache
# three of them held a run at 0 executions/s for 2.5 minutes. 1,000 executions bound that to moments.
fuzz() {
	go test -run='^$' -fuzz='^FuzzMsgPackDecode$' -fuzztime=30000x -fuzzminimizetime=1000x ./api/codec
}

sdks() {
	scripts/test-sdks.sh
}

run_step() {
	local name=$1 fn start=$SECONDS rc=0
	case $name in
	lint | bench | fuzz | sdks) fn=$name ;;
	generate-check) fn=generate_check ;;
	go) fn=go_tests ;;
	*)
		echo "test.sh: unknown step $name (lint generate-check go bench fuzz sdks)" >&2
		return 2
		;;
	esac
	echo "test.sh: $name" >&2
	# In a subshell of its own, waited for: a function called as `f || rc=$?` would run with set -e
	# off, and a failing command inside it would not end it.
	"$fn" &
	wait $! || rc=$?
	echo "test.sh: $name $( ((rc)) && echo "FAILED ($rc)" || echo ok) in $((SECONDS - start)) s (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	return "$rc"
}

# The SDK step runs beside the benchmarks and the fuzz run when all three are asked for: it
# mostly waits on its servers, on backoffs and heartbeat timeouts, and they run one package at a
# time. Its output is kept and printed when it ends; the go tests run alone, as their timing
# bounds were set for.
together() {
	[[ " ${steps[*]} " == *" sdks "* && " ${steps[*]} " == *" bench "* ]]
}
sdk_pid=''
sdk_out=$(mktemp)
# A failing step ends the run: the SDK step beside it too (a session of its own, so its servers and
# test runners go with it).
trap '[[ -n $sdk_pid ]] && kill -- "-$sdk_pid" 2>/dev/null; rm -f "$sdk_out"' EXIT
for s in "${steps[@]}"; do
	if [[ $s == bench ]] && together; then
		setsid -w "$self" sdks >"$sdk_out" 2>&1 &
		sdk_pid=$!
	fi
	if [[ $s == sdks && -n $sdk_pid ]]; then
		rc=0
		wait "$sdk_pid" || rc=$?
		sdk_pid=''
		echo "test.sh: --- the sdks step, which ran beside bench and fuzz:" >&2
		cat "$sdk_out"
		((rc == 0)) || exit "$rc"
		continue
	fi
	run_step "$s"
done
