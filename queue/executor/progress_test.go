package executor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/executor/executortest"
)

// steps is a handler that reports progress when told to and returns when released.
type steps struct {
	report  chan int      // report this percent
	done    chan struct{} // the report was handed to queue.Progress
	release chan struct{}
}

func newSteps() *steps {
	return &steps{report: make(chan int), done: make(chan struct{}), release: make(chan struct{})}
}

func (s *steps) Handle(ctx context.Context, _ *queue.Job) ([]byte, error) {
	for {
		select {
		case pct := <-s.report:
			if err := queue.Progress(ctx, pct, fmt.Sprintf("at %d", pct)); err != nil {
				return nil, err
			}
			s.done <- struct{}{}
		case <-s.release:
			return []byte("ok"), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

func (s *steps) step(pct int) {
	s.report <- pct
	<-s.done
}

// A burst of reports reaches the server as one or two updates, the last value included; a later
// report follows; the job ends as usual.
func TestProgressReachesTheServerCoalesced(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	h := newSteps()
	b.mux.Register("steps", h)
	b.start(t)
	j := newJob("steps", "")
	b.srv.Submit(j)

	for pct := range 50 {
		h.step(pct)
	}
	last := func() executor.ProgressUpdate {
		us, _ := b.srv.ProgressUpdates()
		if len(us) == 0 {
			return executor.ProgressUpdate{}
		}
		return us[len(us)-1]
	}
	eventually(t, 10*time.Second, func() bool { return last().Percent == 49 }, "the burst's last value arrives")
	us, ok := b.srv.ProgressUpdates()
	require.LessOrEqual(t, len(us), 2, "50 reports at once are coalesced: %v", us)
	require.NotContains(t, ok, false, "every update of the live lease applied")
	require.Equal(t, executor.Lease{JobID: j.ID, Attempt: 1}, last().Lease)
	require.Equal(t, "at 49", last().Message)

	h.step(99)
	eventually(t, 10*time.Second, func() bool { return last().Percent == 99 })
	close(h.release)
	require.Equal(t, executor.OutcomeSucceeded, b.waitDone(t).Outcome)
	eventually(t, 10*time.Second, func() bool { return successes(b.srv.Reports()) == 1 })
	us, _ = b.srv.ProgressUpdates()
	require.EqualValues(t, len(us), b.exec.Stats().ProgressSent)
}

// A stale verdict and a failed call are only progress lost: the job keeps running, its stream
// stays open, and its report is accepted.
func TestStaleProgressNeverStopsTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	h := newSteps()
	b.mux.Register("steps", h)
	b.srv.OnProgress(func(executor.ProgressUpdate) bool { return false })
	b.srv.Fail(executortest.MethodProgress, fmt.Errorf("down: %w", executor.ErrUnreachable))
	b.start(t)
	b.srv.Submit(newJob("steps", ""))

	h.step(10) // fails on the way: retried with the latest value a second later
	h.step(20)
	eventually(t, 10*time.Second, func() bool {
		us, _ := b.srv.ProgressUpdates()
		return len(us) >= 1
	})
	h.step(30)
	eventually(t, 10*time.Second, func() bool {
		us, _ := b.srv.ProgressUpdates()
		return len(us) >= 2 && us[len(us)-1].Percent == 30
	}, "updates keep flowing after stale verdicts")
	_, ok := b.srv.ProgressUpdates()
	require.NotContains(t, ok, true)

	close(h.release)
	require.Equal(t, executor.OutcomeSucceeded, b.waitDone(t).Outcome)
	eventually(t, 10*time.Second, func() bool { return successes(b.srv.Reports()) == 1 })
	st := b.exec.Stats()
	require.Zero(t, st.Abandoned)
	require.Zero(t, st.AcksRejected)
	require.Zero(t, st.ReportsRejected)
	require.Len(t, b.srv.StreamCapacities(), 1, "the stream was never reopened")
}
