#!/usr/bin/env bash
# services.sh: make PostgreSQL and Redis available to jq's tests and to `jq` itself.
#
#   scripts/services.sh run [--test-tools] -- <command…>
#
# Uses the configured services when they answer (creating the configured database when the server
# runs but the database does not exist); otherwise starts private, throwaway ones (installing the
# Debian packages if the binaries are missing), runs the command with the variables below
# exported, stops only what it started, and exits with the command's code.
# --test-tools also installs kcat (Debian) when missing: the outbox end-to-end test uses it as an
# independent Kafka client. Only the test tasks ask for it; `task run` installs nothing for tests.
#
# Inputs (the test variable, else jq's own, else the default):
#   JQ_TEST_DATABASE_URL, JQ_DB_URL     default postgres://postgres@127.0.0.1:5432/test?sslmode=disable
#   JQ_TEST_REDIS_ADDR,   JQ_REDIS_ADDR default 127.0.0.1:6379
# Exported to the command:
#   JQ_TEST_DATABASE_URL, JQ_DB_URL       the PostgreSQL DSN actually in use
#   JQ_TEST_REDIS_ADDR,   JQ_REDIS_ADDR   the Redis host:port actually in use
# A private service listens on 127.0.0.1, on the configured port when that is free and the
# configured host is local, else on the first free port from 55432 (Postgres) / 56379 (Redis).
set -euo pipefail

readonly DEFAULT_DATABASE_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
readonly DEFAULT_REDIS_ADDR='127.0.0.1:6379'
readonly READY_TIMEOUT=30
readonly POLICY_RC_D=/usr/sbin/policy-rc.d

die() {
	echo "services: $*" >&2
	exit 1
}

usage() {
	echo "usage: $0 run [--test-tools] -- <command…>" >&2
	exit 2
}

# --- small helpers ---------------------------------------------------------------------------

# tcp_open HOST PORT: true when something accepts TCP connections there.
tcp_open() {
	(exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

is_local_host() {
	[[ $1 == 127.0.0.1 || $1 == localhost ]]
}

# free_port PREFERRED_HOST PREFERRED_PORT FALLBACK_START: the preferred port when the host is
# local and nothing listens on it, else the first closed port from FALLBACK_START upward.
free_port() {
	local host=$1 port=$2 p
	if is_local_host "$host" && ! tcp_open 127.0.0.1 "$port"; then
		echo "$port"
		return
	fi
	for ((p = $3; p < $3 + 1000; p++)); do
		if ! tcp_open 127.0.0.1 "$p"; then
			echo "$p"
			return
		fi
	done
	die "no free TCP port in $3..$(($3 + 999))"
}

# pid_running PID: true while PID exists and is not a zombie (a daemonized redis-server is
# reparented to init, which may reap it only later).
# shellcheck disable=SC2317 # used from the EXIT trap only
pid_running() {
	local stat
	if [[ -r /proc/$1/stat ]] && stat=$(<"/proc/$1/stat") 2>/dev/null; then
		stat=${stat##*) }
		[[ ${stat%% *} != [ZX] ]]
	else
		kill -0 "$1" 2>/dev/null
	fi
}

log_tail() {
	if [[ -f $1 ]]; then
		echo "services: last lines of $1:" >&2
		tail -n 20 "$1" >&2 || true
	fi
}

as_root() {
	if ((EUID == 0)); then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		die "need root (or passwordless sudo) to run: $*"
	fi
}

# as_postgres CMD…: PostgreSQL refuses to run as root, so drop to the postgres OS user.
as_postgres() {
	if ((EUID != 0)); then
		"$@"
	elif command -v runuser >/dev/null 2>&1; then
		runuser -u postgres -- "$@"
	else
		# shellcheck disable=SC2016 # expanded by the postgres user's shell, not here
		su -s /bin/sh -c 'exec "$0" "$@"' postgres "$@"
	fi
}

pg_bindir() {
	local d dirs=()
	# Debian layout, highest installed major version first.
	mapfile -t dirs < <(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -t/ -k5,5nr)
	for d in "${dirs[@]}"; do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			echo "$d"
			return
		fi
	done
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
	fi
}

install_packages() {
	echo "services: installing $* (apt-get)" >&2
	# Keep the packages' init scripts from starting system-wide daemons during the install:
	# this script only wants the binaries.
	if [[ ! -e $POLICY_RC_D ]]; then
		added_policy=1 # set first: cleanup removes it even if we are interrupted
		as_root sh -c "printf '#!/bin/sh\nexit 101\n' >$POLICY_RC_D && chmod 755 $POLICY_RC_D"
	fi
	local rc=0
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 &&
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2 || rc=$?
	remove_policy
	((rc == 0)) || die "apt-get install $* failed (exit $rc)"
}

remove_policy() {
	if ((added_policy)); then
		as_root rm -f "$POLICY_RC_D" || true
		added_policy=0
	fi
}

# --- state and cleanup -------------------------------------------------------------------------

workdir=''
added_policy=0
pg_started=0
pg_bin=''
pg_data=''
redis_started=0
redis_pidfile=''
child=''

# shellcheck disable=SC2317 # invoked by trap
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	remove_policy
	if [[ -n $child ]] && kill -0 "$child" 2>/dev/null; then
		kill -TERM "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	if ((pg_started)); then
		as_postgres "$pg_bin/pg_ctl" -D "$pg_data" -m immediate -w -t "$READY_TIMEOUT" stop >/dev/null 2>&1 ||
			echo "services: warning: could not stop private postgres (data dir $pg_data)" >&2
	fi
	if ((redis_started)) && [[ -f $redis_pidfile ]]; then
		local pid deadline=$((SECONDS + READY_TIMEOUT))
		pid=$(<"$redis_pidfile")
		kill -TERM "$pid" 2>/dev/null || true
		while pid_running "$pid" && ((SECONDS < deadline)); do
			sleep 0.05
		done
		if pid_running "$pid"; then
			echo "services: warning: private redis-server (pid $pid) did not stop; killing it" >&2
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	if [[ -n $workdir ]]; then
		rm -rf "$workdir"
	fi
	exit "$rc"
}

ensure_workdir() {
	if [[ -z $workdir ]]; then
		workdir=$(mktemp -d "${TMPDIR:-/tmp}/jq-services.XXXXXX")
		chmod 755 "$workdir" # the postgres user must reach its subdirectory
	fi
}

# --- PostgreSQL ---------------------------------------------------------------------------------

postgres_up() {
	local host=$1 port=$2 user=$3
	if command -v pg_isready >/dev/null 2>&1; then
		pg_isready -q -t 2 -h "$host" -p "$port" -U "$user" >/dev/null 2>&1
	else
		tcp_open "$host" "$port"
	fi
}

start_postgres() {
	local user=$1 db=$2 port=$3
	pg_bin=$(pg_bindir)
	if [[ -z $pg_bin ]]; then
		install_packages postgresql
		pg_bin=$(pg_bindir)
		[[ -n $pg_bin ]] || die "postgresql installed but initdb/pg_ctl not found"
	fi
	if ((EUID == 0)) && ! id postgres >/dev/null 2>&1; then
		useradd --system --user-group --no-create-home --shell /usr/sbin/nologin postgres ||
			die "cannot create the postgres OS user"
	fi
	ensure_workdir
	local dir=$workdir/postgres
	mkdir -m 700 "$dir"
	if ((EUID == 0)); then
		chown postgres: "$dir"
	fi
	pg_data=$dir/data
	local log=$dir/postgres.log
	as_postgres "$pg_bin/initdb" -D "$pg_data" -U "$user" -A trust -E UTF8 --locale=C --no-sync \
		>"$workdir/initdb.log" 2>&1 || {
		log_tail "$workdir/initdb.log"
		die "initdb failed"
	}
	pg_started=1 # from here on, cleanup stops it (pg_ctl stop is harmless if it never came up)
	if ! as_postgres "$pg_bin/pg_ctl" -D "$pg_data" -l "$log" -w -t "$READY_TIMEOUT" \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
		start >/dev/null 2>&1; then
		log_tail "$log"
		die "private postgres did not become ready on 127.0.0.1:$port within ${READY_TIMEOUT}s"
	fi
	local deadline=$((SECONDS + READY_TIMEOUT))
	until postgres_up 127.0.0.1 "$port" "$user"; do
		if ((SECONDS >= deadline)); then
			log_tail "$log"
			die "private postgres on 127.0.0.1:$port not accepting connections within ${READY_TIMEOUT}s"
		fi
		sleep 0.1
	done
	if [[ $db != postgres && $db != template1 ]]; then
		"$pg_bin/createdb" -h 127.0.0.1 -p "$port" -U "$user" "$db" ||
			die "cannot create database $db in private postgres"
	fi
}

# pg_client NAME: a PostgreSQL client program (psql, createdb) from PATH or the server's bin dir.
pg_client() {
	if command -v "$1" >/dev/null 2>&1; then
		command -v "$1"
		return
	fi
	local d
	d=$(pg_bindir)
	if [[ -n $d && -x $d/$1 ]]; then
		echo "$d/$1"
	fi
}

# libpq_query QUERY: QUERY ("?a=b&c=d" or "") without the parameters that only pgx (jq's driver)
# knows: psql refuses a URL with pool_max_conns and the like.
libpq_query() {
	local kv out='' params=()
	IFS='&' read -ra params <<<"${1#\?}"
	for kv in "${params[@]}"; do
		case ${kv%%=*} in
		'' | pool_* | statement_cache_capacity | description_cache_capacity | default_query_exec_mode) ;;
		*) out+=${out:+&}$kv ;;
		esac
	done
	if [[ -n $out ]]; then
		printf '?%s' "$out"
	fi
}

# ensure_database BASE_URL DB QUERY: create DB on a running server when it does not exist (a fresh
# Postgres has only `postgres`), so the default URL works without a manual createdb.
ensure_database() {
	local base=$1 db=$2 query psql
	query=$(libpq_query "$3")
	[[ $db != postgres && $db != template1 ]] || return 0
	psql=$(pg_client psql)
	if [[ -z $psql ]]; then
		echo "services: warning: psql not found; cannot check that database $db exists" >&2
		return 0
	fi
	local exists
	# On stdin, not -c: psql interpolates :'db' (quoted safely) only in scripts.
	exists=$("$psql" "$base/postgres$query" -XtAq -v ON_ERROR_STOP=1 -v db="$db" 2>&1 \
		<<<"SELECT 1 FROM pg_database WHERE datname = :'db';") ||
		die "cannot list the databases of postgres at $base: $exists"
	if [[ $exists != 1 ]]; then
		local out
		out=$("$psql" "$base/postgres$query" -XtAq -v ON_ERROR_STOP=1 -v db="$db" 2>&1 \
			<<<'CREATE DATABASE :"db";') || die "cannot create database $db: $out"
		echo "services: created database $db" >&2
	fi
}

# --- Redis --------------------------------------------------------------------------------------

redis_up() {
	local host=$1 port=$2 reply=''
	if command -v redis-cli >/dev/null 2>&1; then
		# redis-cli has no reply timeout: a listener that never answers would hang it.
		reply=$(timeout 3 redis-cli -h "$host" -p "$port" ping 2>/dev/null) || return 1
	else
		reply=$(
			exec 3<>"/dev/tcp/$host/$port" || exit 1
			printf 'PING\r\n' >&3
			IFS= read -r -t 2 line <&3 || true
			printf '%s' "${line#+}"
		) 2>/dev/null || return 1
	fi
	[[ ${reply%$'\r'} == PONG ]]
}

start_redis() {
	local port=$1
	if ! command -v redis-server >/dev/null 2>&1; then
		install_packages redis-server
		command -v redis-server >/dev/null 2>&1 || die "redis-server installed but not on PATH"
	fi
	ensure_workdir
	local dir=$workdir/redis
	mkdir -m 700 "$dir"
	redis_pidfile=$dir/redis.pid
	local log=$dir/redis.log
	redis_started=1
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
		--pidfile "$redis_pidfile" --logfile "$log" --dir "$dir" ||
		die "redis-server failed to start (see $log)"
	local deadline=$((SECONDS + READY_TIMEOUT))
	until redis_up 127.0.0.1 "$port"; do
		if ((SECONDS >= deadline)); then
			log_tail "$log"
			die "private redis did not answer PING on 127.0.0.1:$port within ${READY_TIMEOUT}s"
		fi
		sleep 0.05
	done
}

# --- main ---------------------------------------------------------------------------------------

# shellcheck disable=SC2317 # invoked by trap
forward_signal() {
	if [[ -n $child ]]; then
		kill -TERM "$child" 2>/dev/null || true
	fi
}

main() {
	[[ ${1:-} == run ]] || usage
	shift
	local test_tools=0
	if [[ ${1:-} == --test-tools ]]; then
		test_tools=1
		shift
	fi
	[[ ${1:-} == -- && $# -ge 2 ]] || usage
	shift

	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM

	# jq's own variables count too: `JQ_DB_URL=… services.sh run -- bin/jq` must run jq against
	# that database (created when missing), not the tests' default.
	local db_url=${JQ_TEST_DATABASE_URL:-${JQ_DB_URL:-$DEFAULT_DATABASE_URL}}
	local redis_addr=${JQ_TEST_REDIS_ADDR:-${JQ_REDIS_ADDR:-$DEFAULT_REDIS_ADDR}}

	# postgres[ql]://[user[:password]@][host][:port][/dbname][?params]
	local re='^(postgres(ql)?://)(([^@/]*)@)?([^:/?]*)(:([0-9]+))?(/([^?]*))?(\?.*)?$'
	[[ $db_url =~ $re ]] || die "JQ_TEST_DATABASE_URL / JQ_DB_URL is not a postgres:// URL: $db_url"
	local scheme=${BASH_REMATCH[1]} userinfo=${BASH_REMATCH[4]} pg_host=${BASH_REMATCH[5]:-127.0.0.1}
	local pg_port=${BASH_REMATCH[7]:-5432} pg_db=${BASH_REMATCH[9]:-} query=${BASH_REMATCH[10]:-}
	local pg_user=${userinfo%%:*}
	pg_user=${pg_user:-postgres}
	pg_db=${pg_db:-$pg_user}

	local redis_host=${redis_addr%:*} redis_port=${redis_addr##*:}
	[[ $redis_port =~ ^[0-9]+$ && -n $redis_host ]] || die "JQ_TEST_REDIS_ADDR / JQ_REDIS_ADDR is not host:port: $redis_addr"

	if postgres_up "$pg_host" "$pg_port" "$pg_user"; then
		echo "services: postgres $pg_host:$pg_port (already running)" >&2
		ensure_database "${scheme}${userinfo:+$userinfo@}$pg_host:$pg_port" "$pg_db" "$query"
	else
		local port
		port=$(free_port "$pg_host" "$pg_port" 55432)
		start_postgres "$pg_user" "$pg_db" "$port"
		db_url="${scheme}${userinfo:+$userinfo@}127.0.0.1:$port/$pg_db$query"
		echo "services: postgres 127.0.0.1:$port (started, private)" >&2
	fi

	if redis_up "$redis_host" "$redis_port"; then
		echo "services: redis $redis_host:$redis_port (already running)" >&2
	else
		local port
		port=$(free_port "$redis_host" "$redis_port" 56379)
		start_redis "$port"
		redis_addr=127.0.0.1:$port
		echo "services: redis $redis_addr (started, private)" >&2
	fi

	# kcat is the independent Kafka client of the outbox end-to-end test (the broker is in-process).
	if ((test_tools)) && ! command -v kcat >/dev/null 2>&1; then
		install_packages kcat
		command -v kcat >/dev/null 2>&1 || die "kcat installed but not on PATH"
	fi

	export JQ_TEST_DATABASE_URL=$db_url JQ_DB_URL=$db_url
	export JQ_TEST_REDIS_ADDR=$redis_addr JQ_REDIS_ADDR=$redis_addr

	# Run the command in the background so a TERM/INT to this script is handled at once (and
	# forwarded) instead of after the command exits; keep its stdin.
	trap 'forward_signal' INT TERM
	"$@" <&0 &
	child=$!
	local rc
	while :; do
		rc=0
		wait "$child" || rc=$?
		# wait returns early (>128) when a trapped signal arrives; keep waiting for the command.
		if ((rc > 128)) && kill -0 "$child" 2>/dev/null; then
			continue
		fi
		break
	done
	child=''
	exit "$rc"
}

main "$@"
