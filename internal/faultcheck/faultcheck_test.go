package faultcheck_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/jq-dev/jq/internal/faultcheck"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/migrations"
	"github.com/jq-dev/jq/queue"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// step is one hand-written event: from → to at an attempt. seq is its index+1 unless set.
type step struct {
	from, to queue.State
	reason   string
	attempt  int
	seq      int
}

// row is a hand-written job: its final columns and its events.
type row struct {
	state    queue.State
	attempt  int
	reason   string // failure_reason
	eventSeq int    // 0: the last step's seq
	steps    []step
}

func openDB(t *testing.T) *sql.DB {
	t.Helper()
	dsn := testenv.NewDatabase(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, migrations.Up(ctx, dsn))
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.ExecContext(ctx, `INSERT INTO queues (name) VALUES ('default')`)
	require.NoError(t, err)
	return db
}

func insert(t *testing.T, db *sql.DB, n int, r row) string {
	t.Helper()
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
	seq := r.eventSeq
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, s := range r.steps {
		if s.seq == 0 {
			s.seq = i + 1
		}
		if r.eventSeq == 0 {
			seq = s.seq
		}
		var from any
		if s.from != "" {
			from = string(s.from)
		}
		_, err := db.ExecContext(t.Context(), `
INSERT INTO job_events (job_id, seq, queue, type, from_state, to_state, reason, attempt, created_at)
VALUES ($1, $2, 'default', 'noop', $3, $4, $5, $6, $7)`,
			id, s.seq, from, string(s.to), s.reason, s.attempt, at.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	_, err := db.ExecContext(t.Context(), `
INSERT INTO jobs (id, queue, type, state, max_retries, attempt, failure_reason, event_seq, spec_hash)
VALUES ($1, 'default', 'noop', $2, 3, $3, $4, $5, '\x00')`,
		id, string(r.state), r.attempt, r.reason, seq)
	require.NoError(t, err)
	return id
}

const (
	P = queue.StatePending
	A = queue.StateAssigned
	R = queue.StateRunning
	D = queue.StateDone
	F = queue.StateFailed
	X = queue.StateDeadLettered
)

func submitted() step { return step{to: P, reason: "submitted"} }

// run is one attempt that reached RUNNING: PENDING→ASSIGNED→RUNNING.
func run(attempt int, ack string) []step {
	return []step{{from: P, to: A, reason: "assigned", attempt: attempt}, {from: A, to: R, reason: ack, attempt: attempt}}
}

func path(parts ...any) []step {
	var out []step
	for _, p := range parts {
		switch p := p.(type) {
		case step:
			out = append(out, p)
		case []step:
			out = append(out, p...)
		}
	}
	return out
}

func TestCheck(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ids := map[string]string{}
	add := func(name string, r row) {
		ids[name] = insert(t, db, len(ids)+1, r)
	}
	add("done", row{state: D, attempt: 1, steps: path(submitted(), run(1, "acked"), step{from: R, to: D, reason: "succeeded", attempt: 1})})
	add("retried", row{state: D, attempt: 2, steps: path(submitted(), run(1, "acked"),
		step{from: R, to: F, reason: "worker_lost", attempt: 1}, step{from: F, to: P, reason: "retry", attempt: 1},
		run(2, "implicit_ack"), step{from: R, to: D, reason: "succeeded", attempt: 2})})
	add("dead", row{state: X, attempt: 1, reason: "max_retries_exceeded", steps: path(submitted(), run(1, "acked"),
		step{from: R, to: F, reason: "error", attempt: 1}, step{from: F, to: X, reason: "max_retries_exceeded", attempt: 1})})
	add("assignment timeout", row{state: X, attempt: 1, reason: "max_retries_exceeded", steps: path(submitted(),
		step{from: P, to: A, reason: "assigned", attempt: 1}, step{from: A, to: F, reason: "assignment_timeout", attempt: 1},
		step{from: F, to: X, reason: "max_retries_exceeded", attempt: 1})})
	add("dead without reason", row{state: X, steps: path(submitted(), step{from: P, to: X, attempt: 0})})
	add("stuck", row{state: R, attempt: 1, steps: path(submitted(), run(1, "acked"))})
	add("illegal", row{state: D, attempt: 1, steps: path(submitted(), step{from: P, to: R, attempt: 1}, step{from: R, to: D, reason: "succeeded", attempt: 1})})
	add("gap", row{state: D, attempt: 1, steps: path(submitted(), run(1, "acked"), step{from: R, to: D, reason: "succeeded", attempt: 1, seq: 5})})
	add("broken chain", row{state: D, attempt: 1, steps: path(submitted(), step{from: P, to: A, attempt: 1}, step{from: R, to: D, attempt: 1})})
	add("bad start", row{state: D, attempt: 1, steps: path(step{from: P, to: A, attempt: 1}, step{from: A, to: R, attempt: 1}, step{from: R, to: D, attempt: 1})})
	add("ends elsewhere", row{state: D, attempt: 1, steps: path(submitted(), run(1, "acked"))})
	add("no events", row{state: P})
	add("stale done", row{state: D, attempt: 2, steps: path(submitted(), run(1, "acked"),
		step{from: R, to: F, reason: "timeout", attempt: 1}, step{from: F, to: P, reason: "retry", attempt: 1},
		run(2, "acked"), step{from: R, to: D, reason: "succeeded", attempt: 1})})
	add("done twice", row{state: D, attempt: 1, steps: path(submitted(), run(1, "acked"),
		step{from: R, to: D, reason: "succeeded", attempt: 1}, step{from: R, to: D, reason: "succeeded", attempt: 1})})
	missing := "00000000-0000-4000-8000-999999999999"

	all := []string{missing, missing}
	for _, id := range ids {
		all = append(all, id)
	}
	rep, err := faultcheck.Check(t.Context(), db, all)
	require.NoError(t, err)
	t.Log(rep)
	require.Equal(t, len(ids)+1, rep.Jobs)
	require.Equal(t, 9, rep.Done)
	require.Equal(t, 3, rep.DeadLettered)

	byJob := func(vs []faultcheck.Violation) map[string][]string {
		out := map[string][]string{}
		for _, v := range vs {
			out[v.JobID] = append(out[v.JobID], v.String())
		}
		return out
	}
	lost := byJob(rep.Lost)
	require.Len(t, lost, 4, "%v", rep.Lost)
	for _, name := range []string{"dead without reason", "stuck", "no events"} {
		require.Contains(t, lost, ids[name], name)
	}
	require.Contains(t, lost[missing][0], "does not exist")

	illegal := byJob(rep.IllegalPaths)
	wantIllegal := map[string]string{
		"illegal":        "illegal job state transition PENDING -> RUNNING",
		"gap":            "seq 5 where 4 was due",
		"broken chain":   "RUNNING→DONE follows an event that ended in ASSIGNED",
		"bad start":      "not with the submission",
		"ends elsewhere": "history ends in RUNNING but the job is DONE",
		"no events":      "no events",
		"done twice":     "RUNNING→DONE follows an event that ended in DONE",
	}
	require.Len(t, illegal, len(wantIllegal), "%v", rep.IllegalPaths)
	for name, want := range wantIllegal {
		require.NotEmpty(t, illegal[ids[name]], name)
		require.Contains(t, fmt.Sprint(illegal[ids[name]]), want, name)
	}

	stale := byJob(rep.StaleAccepted)
	require.Len(t, stale, 2, "%v", rep.StaleAccepted)
	require.Contains(t, fmt.Sprint(stale[ids["stale done"]]), "latest assignment is attempt 2")
	require.Contains(t, fmt.Sprint(stale[ids["done twice"]]), "DONE for the 2. time")

	require.Equal(t, 1, rep.Executions[ids["done"]])
	require.Equal(t, 2, rep.Executions[ids["retried"]])
	require.Equal(t, 1, rep.Executions[ids["assignment timeout"]], "assigned once (its worker may have started it)")
	require.Equal(t, 0, rep.Executions[missing])
	require.Equal(t, map[string]int{ids["retried"]: 2, ids["stale done"]: 2}, rep.Duplicates())
	require.Error(t, rep.Err())

	h := rep.Histories[ids["retried"]]
	require.Equal(t, 2, h.Job.Attempt)
	require.Len(t, h.Events, 8)
	require.Equal(t, "implicit_ack", h.Events[6].Reason)
	require.Equal(t, time.Second, h.Events[1].At.Sub(h.Events[0].At))
}

func TestCheckClean(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	a := insert(t, db, 1, row{state: D, attempt: 1, steps: path(submitted(), run(1, "acked"), step{from: R, to: D, reason: "succeeded", attempt: 1})})
	b := insert(t, db, 2, row{state: X, attempt: 1, reason: "permanent_failure", steps: path(submitted(), run(1, "acked"),
		step{from: R, to: F, reason: "error", attempt: 1}, step{from: F, to: X, reason: "permanent_failure", attempt: 1})})
	rep, err := faultcheck.Check(t.Context(), db, []string{a, b})
	require.NoError(t, err)
	require.NoError(t, rep.Err())
	require.Equal(t, "jobs=2 done=1 dead_lettered=1 lost=0 illegal_paths=0 stale_accepted=0 executions=2 duplicated_jobs=0", rep.String())

	_, err = faultcheck.Check(t.Context(), db, []string{"not-a-uuid"})
	require.Error(t, err)
}

func TestMarker(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	a := insert(t, db, 1, row{state: D, attempt: 2, steps: path(submitted(), run(1, "acked"),
		step{from: R, to: F, reason: "worker_lost", attempt: 1}, step{from: F, to: P, reason: "retry", attempt: 1},
		run(2, "acked"), step{from: R, to: D, reason: "succeeded", attempt: 2})})
	rep, err := faultcheck.Check(t.Context(), db, []string{a})
	require.NoError(t, err)

	dir := t.TempDir()
	m, err := faultcheck.ReadMarker(filepath.Join(dir, "absent"))
	require.NoError(t, err)
	require.Zero(t, m.Total())

	file := filepath.Join(dir, "marker")
	require.NoError(t, os.WriteFile(file, []byte(a+" 1\n"+a+" 2\nother-job 1\n"), 0o644))
	m, err = faultcheck.ReadMarker(file)
	require.NoError(t, err)
	require.Equal(t, 3, m.Total())
	require.Equal(t, 2, m.Executions(a))
	require.Empty(t, rep.Unleased(m))

	require.NoError(t, os.WriteFile(file, []byte(a+" 2\n"+a+" 2\n"+a+" 3\n"), 0o644))
	m, err = faultcheck.ReadMarker(file)
	require.NoError(t, err)
	un := rep.Unleased(m)
	require.Len(t, un, 2)
	require.Contains(t, un[0].Problem, "attempt 2 started twice")
	require.Contains(t, un[1].Problem, "attempt 3 started without")

	require.NoError(t, os.WriteFile(file, []byte("garbage\n"), 0o644))
	_, err = faultcheck.ReadMarker(file)
	require.ErrorContains(t, err, "marker:1")
}
