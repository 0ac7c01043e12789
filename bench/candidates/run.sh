#!/usr/bin/env bash
# run.sh: per-job Postgres CPU, WAL and row versions of each candidate data model (docs/design/append-only-events.md).
#
#   bench/candidates/run.sh [candidate…]    candidates: A B C Cgin D DC E (default: all)
#   JOBS=100000 ROUNDS=3                     jobs per run (claimed and completed in batches of 100)
#
# Each candidate gets a fresh database (jq_cand) migrated as jq migrates it, then its own schema change
# (<candidate>.setup.sql), JOBS+10,000 PENDING jobs, VACUUM ANALYZE and a CHECKPOINT. pgbench then runs
# <candidate>.sql JOBS/100 times with one client: each run claims 100 jobs, completes them (the short-job
# report: RUNNING and DONE at once) and relays the events written. Measured over the pgbench run: CPU of
# every postgres process (/proc/<pid>/stat, utime+stime), WAL bytes (pg_current_wal_lsn), row versions
# and heap-only updates (pg_stat_user_tables), wall time.
set -euo pipefail
cd "$(dirname "$0")"
readonly PG=${PG:-postgres://postgres@127.0.0.1:5432}
readonly DB=jq_cand
readonly JOBS=${JOBS:-100000}
readonly ROUNDS=${ROUNDS:-3}
readonly HZ=$(getconf CLK_TCK)

pgcpu() { # total CPU ticks of every postgres process, living or exited
	local t=0
	for p in $(pgrep -x postgres); do
		[ -r /proc/$p/stat ] || continue
		set -- $(sed 's/^.*) //' /proc/$p/stat 2>/dev/null) || continue
		t=$((t + ${12} + ${13} + ${14} + ${15})) # utime, stime, cutime, cstime (fields 14-17): exited backends count in the postmaster's
	done
	echo $t
}
q() { psql -qAtX "$PG/$DB" -c "$1"; }

setup() {
	local c=$1
	psql -qX "$PG/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" >/dev/null
	for f in ../../migrations/postgres/*.up.sql; do psql -qX -v ON_ERROR_STOP=1 "$PG/$DB" -f "$f" >/dev/null; done
	q "INSERT INTO queues (name) VALUES ('default')"
	case $c in
	A) ;;
	B | E) psql -qX -v ON_ERROR_STOP=1 "$PG/$DB" -f B.setup.sql >/dev/null ;;
	C) psql -qX -v ON_ERROR_STOP=1 "$PG/$DB" -f C.setup.sql >/dev/null ;;
	Cgin) psql -qX -v ON_ERROR_STOP=1 "$PG/$DB" -f C.setup.sql -f Cgin.setup.sql >/dev/null ;;
	D) psql -qX -v ON_ERROR_STOP=1 "$PG/$DB" -f B.setup.sql -f D.setup.sql >/dev/null ;;
	DC) psql -qX -v ON_ERROR_STOP=1 "$PG/$DB" -f C.setup.sql -f D.setup.sql >/dev/null ;;
	esac
	q "INSERT INTO jobs (id, queue, type, payload, priority, max_retries, spec_hash, created_at)
	   SELECT gen_random_uuid(), 'default', 'noop', '\\x00112233445566778899aabbccddeeff', 0, 3, '\\x00', now() - (g || ' ms')::interval
	   FROM generate_series(1, $JOBS + 10000) g"
	case $c in D | DC) q "INSERT INTO job_ready SELECT id, queue, priority, created_at, not_before FROM jobs" ;; esac
	case $c in A | B | E | D) q "INSERT INTO job_events (job_id, seq, queue, type, to_state) SELECT id, 1, queue, type, 'PENDING' FROM jobs" ;; esac
	case $c in B | E | D) q "UPDATE outbox_cursor SET xid = (SELECT max(xid) FROM job_events), id = (SELECT max(id) FROM job_events)" ;; esac
	case $c in A) q "UPDATE job_events SET published_at = now()" ;; esac
	psql -qX "$PG/$DB" -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null
}

stats() { q "SELECT coalesce(sum(n_tup_ins),0) || ' ' || coalesce(sum(n_tup_upd),0) || ' ' || coalesce(sum(n_tup_hot_upd),0) || ' ' || coalesce(sum(n_tup_del),0) FROM pg_stat_user_tables"; }

measure() {
	local c=$1 n=$((JOBS / 100))
	setup "$c"
	sleep 1 # let the stats collector settle
	local s0 w0 c0 t0
	s0=$(stats); w0=$(q "SELECT pg_current_wal_lsn()"); c0=$(pgcpu); t0=$(date +%s%N)
	pgbench -n -r -M simple -c 1 -t "$n" -f "$c.sql" "$PG/$DB" >/tmp/jq-cand-$c.log 2>&1 || { cat /tmp/jq-cand-$c.log; exit 1; }
	local t1 c1 w1 s1 done
	t1=$(date +%s%N); c1=$(pgcpu); w1=$(q "SELECT pg_current_wal_lsn()")
	sleep 1
	s1=$(stats)
	done=$(q "SELECT count(*) FROM jobs WHERE state = 'DONE'")
	local wal
	wal=$(q "SELECT pg_wal_lsn_diff('$w1', '$w0')")
	[ -z "${WALSTATS:-}" ] || /usr/lib/postgresql/15/bin/pg_waldump -z -p /var/lib/postgresql/15/main/pg_wal -s "$w0" -e "$w1" >"/tmp/jq-cand-$c.wal" 2>&1 || true
	read -r i0 u0 h0 d0 <<<"$s0"; read -r i1 u1 h1 d1 <<<"$s1"
	awk -v c="$c" -v done="$done" -v cpu=$((c1 - c0)) -v hz="$HZ" -v wal="$wal" -v ns=$((t1 - t0)) \
		-v ins=$((i1 - i0)) -v upd=$((u1 - u0)) -v hot=$((h1 - h0)) -v del=$((d1 - d0)) \
		'BEGIN { printf "| %s | %d | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |\n", c, done, cpu / hz * 1e6 / done, wal / done, ns / 1e3 / done, ins / done, upd / done, hot / done, del / done }'
}

cands=("$@")
[ ${#cands[@]} -gt 0 ] || cands=(A B E C Cgin D DC)
echo "| candidate | jobs | Postgres CPU µs/job | WAL bytes/job | wall µs/job | rows inserted/job | updates/job | heap-only/job | deletes/job |"
echo "|---|---|---|---|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
	for c in "${cands[@]}"; do measure "$c"; done
done
