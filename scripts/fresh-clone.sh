#!/usr/bin/env bash
# fresh-clone.sh: time what a new user does first — the README's run command on a clone: build
# (`go build -buildvcs=auto -o bin/jq .`, no tool compiled first), start `jq --role=all` (the embedded store in
# ./jq-data: no Postgres, no Redis), wait
# for it to be ready and for the first job to be DONE, kill -9 it and start it again to find that
# job still DONE — and print one line per step with its wall time.
#
# Where the machine allows it (unshare -n: root, or unprivileged user namespaces), jq and the admin
# CLI run in a network namespace of their own, where nothing but jq listens: no Postgres or Redis
# can be reached, even by accident (the line "fresh-clone: isolated network yes|no" says which).
#
#   scripts/fresh-clone.sh [REPO (default: this checkout)] [--cold]
#
# --cold uses an empty Go build cache (the module cache stays: downloads depend on the network, not
# on jq), as on a machine that never built jq.
#
# jq gets ports of its own, unless the caller sets them (JQ_GRPC_PORT, JQ_HEALTH_PORT,
# JQ_METRICS_PORT, JQ_WORKER_HEALTH_PORT, JQ_WORKER_METRICS_PORT, JQ_UI_PORT; internal/deploytest's
# TestFreshClone does).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cold=0
for a in "$@"; do
	case $a in
	--cold) cold=1 ;;
	*) repo=$a ;;
	esac
done
# FRESH_CLONE_WORK names the work directory (it must not exist; it is removed at the end): a clone
# at the same path again compiles only what changed, since without -trimpath a package's directory
# is part of its build-cache key (internal/deploytest's TestFreshClone uses one path per checkout).
if [[ -n ${FRESH_CLONE_WORK:-} ]]; then
	work=$FRESH_CLONE_WORK
	mkdir "$work"
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/jq-fresh.XXXXXX")
fi
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

step "go build -buildvcs=auto -o bin/jq ."
go build -buildvcs=auto -o bin/jq .
done_step build
echo "fresh-clone: version $(bin/jq --version)"

port=$((20000 + RANDOM % 20000))
export JQ_GRPC_PORT=${JQ_GRPC_PORT:-$port} JQ_HEALTH_PORT=${JQ_HEALTH_PORT:-$((port + 1))} \
	JQ_WORKER_HEALTH_PORT=${JQ_WORKER_HEALTH_PORT:-$((port + 2))} JQ_WORKER_METRICS_PORT=${JQ_WORKER_METRICS_PORT:-$((port + 3))} \
	JQ_METRICS_PORT=${JQ_METRICS_PORT:-$((port + 4))} JQ_UI_PORT=${JQ_UI_PORT:-$((port + 5))}
# Nothing of the caller's may point jq at a database: a fresh machine has none.
unset JQ_DB_URL JQ_STORE_DRIVER JQ_CONFIG
export FRESH_WORK=$work

# run.sh is what happens after the build, in one shell so that it can run in a network namespace.
cat >"$work/run.sh" <<'RUN'
set -euo pipefail
if [[ ${1:-} == isolated ]]; then
	ip link set lo up
fi
now() { date +%s.%N; }
line() { printf 'fresh-clone: %-28s %6.1f s\n' "$1" "$(echo "$(now) - $2" | bc)"; }
jq_pid=''
trap '[[ -z $jq_pid ]] || kill -KILL "$jq_pid" 2>/dev/null || true' EXIT
start_jq() {
	# The README's run command once bin/jq is built.
	bin/jq --role=all --config examples/config.yaml >>"$FRESH_WORK/jq.log" 2>>"$FRESH_WORK/jq.err" &
	jq_pid=$!
	local t=$(now) deadline=$((SECONDS + 60))
	until bin/jq --role=all healthcheck >/dev/null 2>&1; do
		if ((SECONDS >= deadline)) || ! kill -0 "$jq_pid" 2>/dev/null; then
			cat "$FRESH_WORK/jq.err" "$FRESH_WORK/jq.log" >&2
			exit 1
		fi
		sleep 0.05
	done
	line "$1" "$t"
}
start_jq "start (ready)"
grep -q '^jq is ready: embedded store' "$FRESH_WORK/jq.err" || { echo "fresh-clone: no start banner naming the embedded store" >&2; cat "$FRESH_WORK/jq.err" >&2; exit 1; }
t=$(now)
id=$(bin/jq job submit --server-addr "127.0.0.1:$JQ_GRPC_PORT" --wait --wait-timeout 2m | cut -f1)
line "first DONE" "$t"
# A crash loses nothing accepted: kill -9, start again, the job is still there and DONE.
kill -KILL "$jq_pid"
wait "$jq_pid" 2>/dev/null || true
jq_pid=''
start_jq "restart after kill -9"
state=$(bin/jq job status "$id" --server-addr "127.0.0.1:$JQ_GRPC_PORT" --output json | tr -d ' \n' | grep -o '"state":"[A-Z_]*"' | head -1)
[[ $state == '"state":"JOB_STATE_DONE"' ]] || { echo "fresh-clone: job $id after the restart: $state" >&2; exit 1; }
RUN
if unshare -n true 2>/dev/null && command -v ip >/dev/null; then
	echo "fresh-clone: isolated network yes"
	unshare -n bash "$work/run.sh" isolated
else
	echo "fresh-clone: isolated network no"
	bash "$work/run.sh"
fi
printf 'fresh-clone: %-28s %6.1f s\n' "total (clone -> first DONE)" "$(echo "$(date +%s.%N) - $t0" | bc)"
