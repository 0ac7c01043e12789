package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// BenchDispatchPath measures the core loop's store writes: each iteration inserts 1,000 jobs (not
// timed), then takes them all PENDING→ASSIGNED→RUNNING→DONE with JobDue, JobAssignMany, JobAckMany
// and JobReportMany in batches of batchSize (128-byte payloads, 64-byte results). It reports jobs/s
// through the whole path.
func BenchDispatchPath[S interface {
	store.Store
	store.DispatchStore
}](b *testing.B, s S, batchSize int) {
	const jobs = 1000
	ctx := context.Background()
	q, err := s.QueueCreate(ctx, store.QueueCreateParams{Name: uniqueName("bench")})
	require.NoError(b, err)
	payload, result := make([]byte, 128), make([]byte, 64)
	ps := make([]store.JobInsertParams, jobs)
	for i := range ps {
		ps[i] = store.JobInsertParams{Queue: q.Name, Type: "bench", Payload: payload, Priority: i % 10}
	}
	worker := uniqueName("w")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		_, err := s.JobInsertMany(ctx, ps)
		require.NoError(b, err)
		b.StartTimer()
		for done := 0; done < jobs; {
			due, err := s.JobDue(ctx, store.JobDueParams{Queue: q.Name, Limit: batchSize})
			if err != nil {
				b.Fatal(err)
			}
			if len(due) == 0 {
				b.Fatalf("no due jobs after %d of %d", done, jobs)
			}
			ids := make([]string, len(due))
			for i, d := range due {
				ids[i] = d.ID
			}
			assigned, err := s.JobAssignMany(ctx, store.JobAssignParams{WorkerID: worker, IDs: ids})
			if err != nil {
				b.Fatal(err)
			}
			leases := make([]store.JobLease, len(assigned))
			reports := make([]store.JobReportParams, len(assigned))
			for i, j := range assigned {
				leases[i] = store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: j.WorkerID}
				reports[i] = store.JobReportParams{JobLease: leases[i], Success: true, Result: result}
			}
			if err := requireAllApplied(s.JobAckMany(ctx, leases)); err != nil {
				b.Fatal(err)
			}
			if err := requireAllApplied(s.JobReportMany(ctx, reports)); err != nil {
				b.Fatal(err)
			}
			done += len(assigned)
		}
	}
	b.ReportMetric(float64(b.N*jobs)/b.Elapsed().Seconds(), "jobs/s")
}

func requireAllApplied(out []store.LeaseOutcome, err error) error {
	if err != nil {
		return err
	}
	for _, o := range out {
		if o.Err != nil {
			return o.Err
		}
	}
	return nil
}

// BenchStatements times each hot statement alone on batches of batchSize jobs (what one worker
// session or one group commit sends): JobClaim (dispatch's statement; also by a worker that
// registered its types, every job of one of them), JobDue, JobAssignMany,
// JobAckMany, JobReportMany after an ack, and JobReportMany straight from ASSIGNED (a short job:
// the report implies the ack). The jobs each statement needs are made outside the timer. Reported
// as ns/job. The jobs go to a queue of their own, or to queueName when it is set (a queue holding
// a backlog: the claims then take the backlog's oldest jobs, as dispatch does).
func BenchStatements[S interface {
	store.Store
	store.DispatchStore
}](b *testing.B, s S, batchSize int, queueName ...string) {
	ctx := context.Background()
	var q *queue.Queue
	var err error
	if len(queueName) > 0 {
		q, err = s.QueueGet(ctx, queueName[0])
	} else {
		q, err = s.QueueCreate(ctx, store.QueueCreateParams{Name: uniqueName("stmt")})
	}
	require.NoError(b, err)
	worker := uniqueName("w")
	ps := make([]store.JobInsertParams, batchSize)
	for i := range ps {
		ps[i] = store.JobInsertParams{Queue: q.Name, Type: "bench", Payload: make([]byte, 16)}
	}
	// Each stage returns the jobs it moved; a benchmark times one stage after the earlier ones.
	insert := func() []string {
		res, err := s.JobInsertMany(ctx, ps)
		require.NoError(b, err)
		ids := make([]string, len(res))
		for i, r := range res {
			ids[i] = r.Job.ID
		}
		return ids
	}
	assign := func(ids []string) []store.JobLease {
		jobs, err := s.JobAssignMany(ctx, store.JobAssignParams{WorkerID: worker, IDs: ids})
		require.NoError(b, err)
		ls := make([]store.JobLease, len(jobs))
		for i, j := range jobs {
			ls[i] = store.JobLease{ID: j.ID, Attempt: j.Attempt, WorkerID: worker}
		}
		return ls
	}
	reports := func(ls []store.JobLease) []store.JobReportParams {
		rs := make([]store.JobReportParams, len(ls))
		for i, l := range ls {
			rs[i] = store.JobReportParams{JobLease: l, Success: true}
		}
		return rs
	}
	run := func(name string, setup func() func() error) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				step := setup()
				b.StartTimer()
				if err := step(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/job")
		})
	}
	claim := func(types []string) func() func() error {
		return func() func() error {
			insert() // at least a batch due, whatever a backlog holds
			return func() error {
				jobs, err := s.JobClaim(ctx, store.JobClaimParams{Queue: q.Name, WorkerID: worker, Limit: batchSize, Types: types})
				if err == nil && len(jobs) != batchSize {
					err = fmt.Errorf("claimed %d jobs, want %d", len(jobs), batchSize)
				}
				return err
			}
		}
	}
	run("claim", claim(nil))
	run("claim_typed", claim([]string{"other", "bench"})) // a worker that registered its types
	var due []string                                      // the previous round's jobs, still PENDING: assigned before the next round
	runDue := run
	if len(queueName) > 0 {
		runDue = func(string, func() func() error) {} // JobDue's rounds assume no other job is due
	}
	runDue("due", func() func() error {
		if due != nil {
			assign(due)
		}
		due = insert()
		return func() error {
			_, err := s.JobDue(ctx, store.JobDueParams{Queue: q.Name, Limit: batchSize})
			return err
		}
	})
	if due != nil {
		assign(due) // nothing of this queue stays due for the other statements
	}
	run("assign", func() func() error {
		ids := insert()
		return func() error {
			_, err := s.JobAssignMany(ctx, store.JobAssignParams{WorkerID: worker, IDs: ids})
			return err
		}
	})
	run("ack", func() func() error {
		ls := assign(insert())
		return func() error { return requireAllApplied(s.JobAckMany(ctx, ls)) }
	})
	run("report", func() func() error {
		ls := assign(insert())
		require.NoError(b, requireAllApplied(s.JobAckMany(ctx, ls)))
		return func() error { return requireAllApplied(s.JobReportMany(ctx, reports(ls))) }
	})
	run("report_implicit_ack", func() func() error {
		ls := assign(insert())
		return func() error { return requireAllApplied(s.JobReportMany(ctx, reports(ls))) }
	})
}
