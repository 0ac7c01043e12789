package conformance_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// TestDrainFigures measures each language's worker at concurrency 50 draining no-op jobs from a
// jq --role=server (embedded store): throughput, CPU per job of the worker and of the server, lost
// and duplicated jobs; then, in a second run, kill -9 of the worker mid-drain and a second worker
// finishing the queue after the reaper recovered the first one's jobs. Figures, not assertions of
// speed: run it on purpose (docs/sdks.md), JQ_SDK_BENCH=1, JQ_SDK_BENCH_JOBS (default 20000),
// JQ_SDK_BENCH_STORE=postgres for a server on Postgres and Redis.
func TestDrainFigures(t *testing.T) {
	if os.Getenv("JQ_SDK_BENCH") == "" {
		t.Skip("figures for docs/sdks.md: JQ_SDK_BENCH=1 (with the SDKs' runtimes and the TypeScript build)")
	}
	n := 20000
	if v := os.Getenv("JQ_SDK_BENCH_JOBS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	var rows []string
	rounds := 1
	if v := os.Getenv("JQ_SDK_BENCH_ROUNDS"); v != "" {
		rounds, _ = strconv.Atoi(v)
	}
	for range rounds {
		rows = append(rows, drainAll(t, n)...)
	}
	t.Log("\n| worker | run | jobs/s | worker CPU µs/job | server CPU µs/job | lost | duplicates | run again after the kill (reaper) |\n|---|---|---|---|---|---|---|---|\n" +
		strings.Join(rows, "\n"))
}

// drainAll runs one fault-free drain and one with kill -9 per language, one language after the other.
func drainAll(t *testing.T, n int) []string {
	var rows []string
	for _, l := range langs {
		if sel := os.Getenv("JQ_CONFORMANCE_LANGS"); sel != "" && !strings.Contains(sel, l.name) {
			continue
		}
		if why := missing(l); why != "" {
			t.Logf("SKIP %s: %s", l.name, why)
			continue
		}
		rows = append(rows, drain(t, l, n, false), drain(t, l, n, true))
	}
	return rows
}

func drain(t *testing.T, l lang, n int, kill bool) string {
	s := startServer(t, os.Getenv("JQ_SDK_BENCH_STORE") == "postgres")
	q := newQueue(t, s, l)
	ctx := context.Background()
	for i := 0; i < n; i += 1000 {
		specs := make([]*jqv1.JobSpec, min(1000, n-i))
		for k := range specs {
			specs[k] = &jqv1.JobSpec{Queue: q, Type: "noop"}
		}
		_, err := s.cl.Jobs.SubmitJobs(ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs}))
		require.NoError(t, err)
	}
	stats := func() *jqv1.QueueStats {
		res, err := s.cl.Queues.GetQueueStats(ctx, connect.NewRequest(&jqv1.GetQueueStatsRequest{Name: q}))
		require.NoError(t, err)
		return res.Msg.GetStats()
	}
	srvCPU0 := cpuOf(t, s.cmd.Process.Pid)
	start := time.Now()
	w := l.start(t, s, q, workerID(t, l, "drain"), "--concurrency", "50", "--prefetch", "50")
	var workerCPU time.Duration
	var executions int64
	if kill {
		eventually(t, 5*time.Minute, "a quarter drained", func() error {
			if d := stats().GetDone(); d < int64(n/4) {
				return fmt.Errorf("done %d", d)
			}
			return nil
		})
		workerCPU += cpuOf(t, w.cmd.Process.Pid)
		w.signal(syscall.SIGKILL)
		<-w.done
		w = l.start(t, s, q, workerID(t, l, "drain2"), "--concurrency", "50", "--prefetch", "50")
	}
	// Nothing left to run. (GetQueueStats' DONE is an estimate past 10,000 on Postgres: the jobs are
	// counted one by one below.)
	eventually(t, 10*time.Minute, "drained", func() error {
		st := stats()
		if left := st.GetPending() + st.GetAssigned() + st.GetRunning() + st.GetFailed(); left > 0 || st.GetDone() == 0 {
			return fmt.Errorf("done %d of %d (pending %d, assigned %d, running %d, failed %d)", st.GetDone(), n,
				st.GetPending(), st.GetAssigned(), st.GetRunning(), st.GetFailed())
		}
		return nil
	})
	elapsed := time.Since(start)
	srvCPU := cpuOf(t, s.cmd.Process.Pid) - srvCPU0
	workerCPU += cpuOf(t, w.cmd.Process.Pid)
	st := w.stop()
	executions += st["succeeded"]
	// Every job DONE (lost 0); an attempt above 1 is a job run again after the kill (at least once).
	again, doneJobs := 0, int64(0)
	token := ""
	for {
		res, err := s.cl.Jobs.ListJobs(ctx, connect.NewRequest(&jqv1.ListJobsRequest{Queue: q, PageSize: 1000, PageToken: token}))
		require.NoError(t, err)
		for _, j := range res.Msg.GetJobs() {
			if j.GetAttempt() > 1 {
				again++
			}
			if j.GetState() == done {
				doneJobs++
			}
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			break
		}
	}
	lost := int64(n) - doneJobs
	require.Zero(t, lost, "lost jobs")
	run, dup, recovered := "fault-free", strconv.FormatInt(executions-int64(n), 10), "-"
	if kill {
		// The killed worker's count of executions died with it: duplicates are not known exactly; the
		// jobs it held (running or prefetched) ran again after the reaper recovered them.
		run, dup, recovered = "kill -9 at 25 %", "-", strconv.Itoa(again)
	} else {
		require.Zero(t, again, "no job runs twice in a fault-free drain")
		require.EqualValues(t, n, executions, "one execution per job")
	}
	return fmt.Sprintf("| %s | %s | %.0f | %.0f | %.0f | %d | %s | %s |", l.name, run, float64(n)/elapsed.Seconds(),
		float64(workerCPU.Microseconds())/float64(n), float64(srvCPU.Microseconds())/float64(n), lost, dup, recovered)
}

// cpuOf is the user+system CPU a process has used so far (/proc/PID/stat, clock ticks of 10 ms).
func cpuOf(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
