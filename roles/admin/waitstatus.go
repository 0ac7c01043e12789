package admin

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jq-dev/jq/internal/term"
	"github.com/jq-dev/jq/queue"
)

// waitStatus is the live one-line status of a wait on a terminal (state, attempt, elapsed),
// redrawn at every change and every second; elsewhere it writes nothing, so scripts see only the
// result.
type waitStatus struct {
	re    *runEnv
	id    string
	start time.Time
	live  bool

	mu   sync.Mutex
	job  *queue.Job
	done chan struct{}
	wg   sync.WaitGroup
}

// noWorkerAfter is how long a job may stay PENDING before the status line suggests that no worker
// serves its queue.
const noWorkerAfter = 5 * time.Second

func newWaitStatus(re *runEnv, id string) *waitStatus {
	s := &waitStatus{re: re, id: id, start: re.now(), live: term.IsTerminal(re.Stderr), done: make(chan struct{})}
	if s.live {
		s.wg.Go(func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-s.done:
					return
				case <-t.C:
					s.draw()
				}
			}
		})
	}
	return s
}

// update is client.Watch's callback: a new state or attempt.
func (s *waitStatus) update(j *queue.Job) {
	s.mu.Lock()
	s.job = j
	s.mu.Unlock()
	s.draw()
}

func (s *waitStatus) draw() {
	if !s.live {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.re.Stderr, "\r\x1b[K%s", s.line())
}

// line is the status text; callers hold mu.
func (s *waitStatus) line() string {
	elapsed := s.re.now().Sub(s.start).Truncate(time.Second)
	if s.job == nil {
		return fmt.Sprintf("job %s: waiting, %s", s.id, elapsed)
	}
	l := fmt.Sprintf("job %s: %s, attempt %d, %s", s.id, s.job.State, s.job.Attempt, elapsed)
	if hint := s.hintLocked(); hint != "" {
		l += " —" + hint
	}
	return l
}

// hint explains a wait that does not move: a PENDING job nobody took.
func (s *waitStatus) hint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.hintLocked(); h != "" {
		return ";" + h
	}
	return ""
}

func (s *waitStatus) hintLocked() string {
	if s.job != nil && s.job.State == queue.StatePending && s.job.Attempt == 0 &&
		s.re.now().Sub(s.start) >= noWorkerAfter && !s.job.NotBefore.After(s.re.now()) {
		return fmt.Sprintf(" no worker has taken it yet: is one serving queue %q? (jq worker list)", s.job.Queue)
	}
	return ""
}

// stop ends the redraws and clears the line, so the result prints on a clean line.
func (s *waitStatus) stop() {
	close(s.done)
	s.wg.Wait()
	if s.live {
		fmt.Fprint(s.re.Stderr, "\r\x1b[K")
	}
}

// liveLine redraws text() on stderr every interval while a long command runs on a terminal, and
// clears it at stop; elsewhere it writes nothing.
type liveLine struct {
	w    io.Writer
	done chan struct{}
	wg   sync.WaitGroup
}

func startLiveLine(re *runEnv, interval time.Duration, text func() string) *liveLine {
	l := &liveLine{w: re.Stderr, done: make(chan struct{})}
	if !term.IsTerminal(re.Stderr) {
		l.w = nil
		return l
	}
	l.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			fmt.Fprintf(l.w, "\r\x1b[K%s", text())
			select {
			case <-l.done:
				return
			case <-t.C:
			}
		}
	})
	return l
}

func (l *liveLine) stop() {
	close(l.done)
	l.wg.Wait()
	if l.w != nil {
		fmt.Fprint(l.w, "\r\x1b[K")
	}
}
