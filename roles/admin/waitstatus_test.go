package admin

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

// syncBuilder is a strings.Builder safe for the status line's redraw goroutine.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A wait shows the running attempt's progress: on a terminal in its live line, elsewhere as one
// plain line on stderr per new progress (a state change alone prints nothing there).
func TestWaitStatusShowsProgress(t *testing.T) {
	t.Parallel()
	var stderr syncBuilder
	re := &runEnv{Env: Env{Stderr: &stderr}, now: time.Now, globals: &Globals{}}
	s := newWaitStatus(re, "j1")
	defer s.stop()
	job := func(state queue.State, p *queue.JobProgress) *queue.Job {
		return &queue.Job{ID: "j1", Queue: "default", State: state, Attempt: 1, Progress: p}
	}
	at := time.Now()
	s.update(job(queue.StatePending, nil))
	s.update(job(queue.StateRunning, nil))
	s.update(job(queue.StateRunning, &queue.JobProgress{Percent: 40, Message: "step 4 of 10", UpdatedAt: at}))
	s.update(job(queue.StateRunning, &queue.JobProgress{Percent: 40, Message: "step 4 of 10", UpdatedAt: at}))
	s.update(job(queue.StateRunning, &queue.JobProgress{Percent: 70, UpdatedAt: at.Add(time.Second)}))
	require.Equal(t, "jq: job j1: RUNNING, 40% step 4 of 10\njq: job j1: RUNNING, 70%\n", stderr.String())

	s.mu.Lock()
	s.job = job(queue.StateRunning, &queue.JobProgress{Percent: 40, Message: "step 4 of 10"})
	line := s.line()
	s.mu.Unlock()
	require.Regexp(t, `^job j1: RUNNING, attempt 1, \d+s, 40% step 4 of 10$`, line)
}
