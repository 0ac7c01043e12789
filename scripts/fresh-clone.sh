#!/usr/bin/env bash
# fresh-clone.sh: time what a new user does first — clone, build (go tool … task build), start
# `jq --role=all` against the services scripts/services.sh provides, and wait for the first job to be
# DONE — and print one line per step with its wall time.
#
#   scripts/fresh-clone.sh [REPO (default: this checkout)] [--cold]
#
# --cold uses an empty Go build cache (the module cache stays: downloads depend on the network, not
# on jq), as on a machine that never built jq.
#
# jq gets ports and a Redis key prefix of its own, unless the caller sets them (JQ_GRPC_PORT,
# JQ_HEALTH_PORT, JQ_METRICS_PORT, JQ_WORKER_HEALTH_PORT, JQ_WORKER_METRICS_PORT, JQ_UI_PORT,
# JQ_REDIS_KEY_PREFIX; internal/deploytest's TestFreshClone does), and the database
# JQ_TEST_DATABASE_URL (default: jq_fresh_clone, created when missing).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cold=0
for a in "$@"; do
	case $a in
	--cold) cold=1 ;;
	*) repo=$a ;;
	esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/jq-fresh.XXXXXX")
jq_pid=''
cleanup() {
	if [[ -n $jq_pid ]]; then
		kill -TERM "$jq_pid" 2>/dev/null || true
		wait "$jq_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
if ((cold)); then
	export GOCACHE=$work/gocache
fi
step_start=0
step() { step_start=$(date +%s.%N); echo "fresh-clone: $1" >&2; }
done_step() { printf 'fresh-clone: %-28s %6.1f s\n' "$1" "$(echo "$(date +%s.%N) - $step_start" | bc)"; }

t0=$(date +%s.%N)
step "git clone $repo"
git clone -q "$repo" "$work/jq"
done_step clone
cd "$work/jq"

step "go tool -modfile=tools/go.mod task build"
NO_COLOR=1 go tool -modfile=tools/go.mod task build >/dev/null
done_step build

port=$((20000 + RANDOM % 20000))
export JQ_GRPC_PORT=${JQ_GRPC_PORT:-$port} JQ_HEALTH_PORT=${JQ_HEALTH_PORT:-$((port + 1))} \
	JQ_WORKER_HEALTH_PORT=${JQ_WORKER_HEALTH_PORT:-$((port + 2))} JQ_WORKER_METRICS_PORT=${JQ_WORKER_METRICS_PORT:-$((port + 3))} \
	JQ_METRICS_PORT=${JQ_METRICS_PORT:-$((port + 4))} JQ_UI_PORT=${JQ_UI_PORT:-$((port + 5))} \
	JQ_REDIS_KEY_PREFIX=${JQ_REDIS_KEY_PREFIX:-fresh$port}
port=$JQ_GRPC_PORT
# A database of its own (services.sh creates it), so the run never shares the suite's.
export JQ_TEST_DATABASE_URL=${JQ_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/jq_fresh_clone?sslmode=disable}
step "jq --role=all on 127.0.0.1:$port, then job submit --wait"
# What `go tool -modfile=tools/go.mod task run` runs once bin/jq is built: the run command's services
# (the ones that answer, else private ones), then jq --role=all with the example configuration.
scripts/services.sh run -- bin/jq --role=all --config examples/config.yaml >"$work/jq.log" 2>&1 &
jq_pid=$!
bin/jq job submit --server-addr "127.0.0.1:$port" --wait --wait-timeout 2m --timeout 1s >/dev/null 2>"$work/submit.err" ||
	{
		# The server may still be starting: the first submit cannot reach it. Retry for a minute.
		deadline=$((SECONDS + 60))
		until bin/jq job submit --server-addr "127.0.0.1:$port" --wait --wait-timeout 2m >/dev/null 2>"$work/submit.err"; do
			if ((SECONDS >= deadline)); then
				cat "$work/submit.err" "$work/jq.log" >&2
				exit 1
			fi
			sleep 0.2
		done
	}
done_step "start + first DONE"
printf 'fresh-clone: %-28s %6.1f s\n' "total (clone -> first DONE)" "$(echo "$(date +%s.%N) - $t0" | bc)"
