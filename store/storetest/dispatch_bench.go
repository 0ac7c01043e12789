package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store"
)

// BenchDispatchPath measures the core loop's store writes: each iteration inserts 1,000 jobs (not
// timed), then takes them all PENDING→ASSIGNED→RUNNING→DONE with JobDue, JobAssignMany, JobAckMany
// and JobReportMany in batches of batchSize (128-byte payloads, 64-byte results). It reports jobs/s
// through the whole path.
func BenchDispatchPath(b *testing.B, s DispatchStore, batchSize int) {
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
