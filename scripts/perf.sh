#!/usr/bin/env bash
# perf.sh: the load-generator runs recorded in docs/performance.md.
#
#   scripts/perf.sh [workload…]     workloads: batch unary drain rate1000 rate5000 (default: all)
#   PROFILE=1 scripts/perf.sh …     also takes a 5 s CPU profile of the server 1 s into each
#                                   workload ($OUT/<workload>.pprof; `go tool pprof -top bin/jq FILE`),
#                                   and of the worker in drain ($OUT/drain-worker.pprof)
#
# Each workload gets a fresh database (jq_perf), one `jq --role=server`, one `jq --role=worker
# --concurrency 256` and the load generator, all on this machine. Needs bin/jq (`task build`),
# PostgreSQL at $PGURL_BASE (default postgres://postgres@127.0.0.1:5432) and Redis at $REDIS_ADDR.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly PGURL_BASE=${PGURL_BASE:-postgres://postgres@127.0.0.1:5432}
readonly REDIS_ADDR=${REDIS_ADDR:-127.0.0.1:6379}
readonly DB=jq_perf
readonly JQ=${JQ:-bin/jq}
readonly OUT=${OUT:-/tmp/jq-perf}
mkdir -p "$OUT"

export JQ_DB_URL="$PGURL_BASE/$DB?sslmode=disable" JQ_REDIS_ADDR="$REDIS_ADDR" JQ_REDIS_KEY_PREFIX="perf$$:"
export JQ_LOGGING_LEVEL=warn
export JQ_GRPC_HOST=127.0.0.1 # loopback: no credentials needed (docs/security.md)
[ -z "${PROFILE:-}" ] || export JQ_METRICS_PPROF=true # /debug/pprof is off by default

pids=()
cleanup() {
	for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT

fresh_db() {
	psql -q "$PGURL_BASE/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
}
start_server() {
	$JQ --role=server --grpc-port 50061 --health-port 50062 --metrics-port 50063 >"$OUT/server.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do curl -fs localhost:50062/readyz >/dev/null && return; sleep 0.1; done
	echo "server did not become ready" >&2; cat "$OUT/server.log" >&2; exit 1
}
start_worker() {
	JQ_WORKER_PREFETCH=${WORKER_PREFETCH:--1} $JQ --role=worker --server-addr localhost:50061 --concurrency ${WORKER_CONCURRENCY:-100} --metrics-port 50064 --health-port 50065 >"$OUT/worker.log" 2>&1 &
	pids+=($!)
}
stop_all() { cleanup; pids=(); }
bench() { $JQ --role=admin bench --server-addr localhost:50061 "$@"; }
counts() { psql -qAt "$PGURL_BASE/$DB" -c "SELECT state, count(*) FROM jobs GROUP BY state ORDER BY 1"; }

profile() { # profile NAME [PORT]: a CPU profile of the server (or of the process on metrics PORT), in the background
	[ -n "${PROFILE:-}" ] || return 0
	(sleep 1; curl -s "localhost:${2:-50063}/debug/pprof/profile?seconds=5" >"$OUT/$1.pprof") &
}

run() {
	local name=$1
	echo "=== $name"
	fresh_db
	start_server
	[ "$name" = drain ] || profile "$name"
	case $name in
	batch) bench --jobs 100000 --batch 1000 -c 4 --no-wait ;;
	unary) bench --jobs 30000 -c 32 --no-wait ;;
	drain)
		run_id=$(bench --jobs 100000 --batch 1000 -c 4 --no-wait -o json | sed -n 's/.*"run_id": *"\([^"]*\)".*/\1/p')
		start_worker
		profile drain
		profile drain-worker 50064
		bench --collect "$run_id"
		;;
	rate1000) start_worker; bench --rate 1000 --duration 20s -c 32 ;;
	rate5000) start_worker; bench --rate 5000 --duration 10s -c 64 ;;
	*) echo "unknown workload $name" >&2; exit 2 ;;
	esac
	counts
	stop_all
}

workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(batch unary drain rate1000 rate5000)
for w in "${workloads[@]}"; do run "$w"; done
