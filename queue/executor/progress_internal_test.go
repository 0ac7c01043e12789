package executor

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// fakeClock drives a progressSender's interval without sleeping: after records timers, advance
// fires the due ones.
type fakeClock struct {
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func (c *fakeClock) after(d time.Duration, f func()) {
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), f: f})
}

func (c *fakeClock) advance(d time.Duration) {
	c.now = c.now.Add(d)
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	var due []fakeTimer
	keep := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	c.timers = keep
	for _, t := range due {
		t.f()
	}
}

type sentUpdate struct {
	at time.Time
	u  ProgressUpdate
}

type progressRig struct {
	s     *progressSender
	clock *fakeClock
	sent  []sentUpdate
	err   error          // the next calls' error
	dead  map[*task]bool // tasks no longer running
	calls int
}

func newProgressRig(t *testing.T) *progressRig {
	t.Helper()
	r := &progressRig{clock: &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}, dead: map[*task]bool{}}
	r.s = &progressSender{
		log: zap.NewNop(), interval: time.Second, now: func() time.Time { return r.clock.now },
		after: r.clock.after, callTimeout: time.Second, wake: make(chan struct{}, 1),
		live: func(ts []*task) []bool {
			out := make([]bool, len(ts))
			for i, t := range ts {
				out[i] = !r.dead[t]
			}
			return out
		},
		send: func(_ context.Context, p ProgressParams) ([]LeaseResult, error) {
			r.calls++
			require.Equal(t, "w1", p.WorkerID)
			if r.err != nil {
				return nil, r.err
			}
			res := make([]LeaseResult, len(p.Updates))
			for i, u := range p.Updates {
				r.sent = append(r.sent, sentUpdate{at: r.clock.now, u: u})
				res[i] = LeaseResult{JobID: u.JobID, OK: true}
			}
			return res, nil
		},
	}
	return r
}

func (r *progressRig) task(id string) *task {
	return &task{lease: Lease{JobID: id, Attempt: 1}, sender: r.s}
}

// flush sends whatever is ready, as the sender's goroutine would.
func (r *progressRig) flush() {
	for r.s.flush(context.Background(), "w1") {
	}
}

func TestProgressCoalescing(t *testing.T) {
	t.Parallel()
	r := newProgressRig(t)
	a := r.task("a")

	// A burst before the sender runs: one update, the latest value.
	for i := range 10 {
		a.ReportProgress(i*10, fmt.Sprintf("step %d", i))
	}
	r.flush()
	require.Len(t, r.sent, 1)
	require.Equal(t, 90, r.sent[0].u.Percent)
	require.Equal(t, "step 9", r.sent[0].u.Message)
	require.Equal(t, Lease{JobID: "a", Attempt: 1}, r.sent[0].u.Lease)

	// Within the second after a send nothing goes out, whatever is reported; then the latest does.
	r.clock.advance(100 * time.Millisecond)
	a.ReportProgress(91, "x")
	a.ReportProgress(92, "y")
	r.flush()
	require.Len(t, r.sent, 1)
	r.clock.advance(899 * time.Millisecond)
	r.flush()
	require.Len(t, r.sent, 1, "still within the interval")
	r.clock.advance(time.Millisecond)
	r.flush()
	require.Len(t, r.sent, 2)
	require.Equal(t, 92, r.sent[1].u.Percent)
	require.Equal(t, "y", r.sent[1].u.Message)

	// Reports every 10 ms for 10 s: at most one send per second, each the latest value then.
	r.sent = nil
	b := r.task("b")
	for i := range 1000 {
		a.ReportProgress(i%101, "a")
		b.ReportProgress(100-i%101, "b")
		r.flush()
		r.clock.advance(10 * time.Millisecond)
		r.flush()
	}
	perJob := map[string][]time.Time{}
	for _, s := range r.sent {
		perJob[s.u.JobID] = append(perJob[s.u.JobID], s.at)
	}
	for id, ts := range perJob {
		require.GreaterOrEqual(t, len(ts), 9, "job %s: one per second over 10 s", id)
		require.LessOrEqual(t, len(ts), 11, "job %s: at most one per second", id)
		for i := 1; i < len(ts); i++ {
			require.GreaterOrEqual(t, ts[i].Sub(ts[i-1]), time.Second, "job %s: sends %v apart", id, ts[i].Sub(ts[i-1]))
		}
	}

	// Nothing is reported: nothing is sent, however long.
	r.sent = nil
	r.clock.advance(10 * time.Second)
	r.flush()
	require.Empty(t, r.sent)
}

func TestProgressOfAFinishedTaskIsDropped(t *testing.T) {
	t.Parallel()
	r := newProgressRig(t)
	a := r.task("a")
	a.ReportProgress(10, "")
	r.flush()
	a.ReportProgress(50, "") // waits for the interval
	r.dead[a] = true         // the job ended meanwhile: its report says the rest
	r.clock.advance(time.Second)
	r.flush()
	require.Len(t, r.sent, 1)
	require.Equal(t, 10, r.sent[0].u.Percent)
}

func TestProgressRetriesTheLatestAfterAFailure(t *testing.T) {
	t.Parallel()
	r := newProgressRig(t)
	a := r.task("a")
	r.err = fmt.Errorf("progress: %w", ErrUnreachable)
	a.ReportProgress(10, "first")
	r.flush()
	require.Equal(t, 1, r.calls)
	require.Empty(t, r.sent)
	a.ReportProgress(20, "newer") // replaces the undelivered value
	r.err = nil
	r.clock.advance(time.Second)
	r.flush()
	require.Len(t, r.sent, 1)
	require.Equal(t, 20, r.sent[0].u.Percent)
	require.Equal(t, "newer", r.sent[0].u.Message)

	// An older server: progress stops for good, without calls.
	r.err = fmt.Errorf("progress: %w", ErrUnsupported)
	r.clock.advance(time.Second)
	a.ReportProgress(30, "")
	r.flush()
	calls := r.calls
	r.err = nil
	r.clock.advance(time.Second)
	a.ReportProgress(40, "")
	r.flush()
	require.Equal(t, calls, r.calls)
}
