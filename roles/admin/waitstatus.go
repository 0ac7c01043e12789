package admin

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jq-dev/jq/internal/term"
	"github.com/jq-dev/jq/queue"
)

// waitStatus is the live one-line status of a wait on a terminal (state, attempt, elapsed, the
// running attempt's progress), redrawn at every change and every second; elsewhere it writes only
// a plain line per progress update (and why a stuck job waits) on stderr, so scripts see only the
// result on stdout.
type waitStatus struct {
	re    *runEnv
	id    string
	start time.Time
	live  bool

	mu  sync.Mutex
	job *queue.Job
	// waiting is the server's reason why the job is not taken (GetJob's waiting), asked once the
	// job has stayed PENDING for noWorkerAfter; told is set once it has been said off a terminal.
	waiting, asked, told bool
	reason               string
	done                 chan struct{}
	wg                   sync.WaitGroup
}

// noWorkerAfter is how long a job may stay PENDING before the status line suggests that no worker
// serves its queue.
const noWorkerAfter = 5 * time.Second

func newWaitStatus(re *runEnv, id string) *waitStatus {
	s := &waitStatus{re: re, id: id, start: re.now(), live: term.IsTerminal(re.Stderr), done: make(chan struct{})}
	s.wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.askWhy()
				s.draw()
				s.tell()
			}
		}
	})
	return s
}

// stuck reports whether the job has stayed PENDING, never taken, for noWorkerAfter since it was due;
// callers hold mu.
func (s *waitStatus) stuck() bool {
	return s.job != nil && s.job.State == queue.StatePending && s.job.Attempt == 0 &&
		s.re.now().Sub(s.start) >= noWorkerAfter && !s.job.NotBefore.After(s.re.now())
}

// askWhy fetches, once, the server's reason for a stuck job (which no worker serves its queue or
// handles its type, or a constraint it waits on): the watch stream does not carry it.
func (s *waitStatus) askWhy() {
	s.mu.Lock()
	ask := s.stuck() && !s.asked
	s.asked = s.asked || ask
	s.mu.Unlock()
	if !ask {
		return
	}
	cl, err := s.re.Client()
	if err != nil {
		return
	}
	ctx, cancel := s.re.callCtx()
	defer cancel()
	j, err := cl.Get(ctx, s.id)
	if err != nil || j.State != queue.StatePending {
		return
	}
	s.mu.Lock()
	s.reason, s.waiting = j.Waiting, j.Waiting != ""
	s.mu.Unlock()
}

// tell says once on stderr, off a terminal (no status line there), why a stuck job waits: a script
// or CI log would otherwise show a wait with no end and no clue.
func (s *waitStatus) tell() {
	if s.live {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.told || !s.stuck() || !s.asked {
		return
	}
	s.told = true
	fmt.Fprintf(s.re.Stderr, "jq: job %s is still PENDING after %s:%s; waiting on (Ctrl-C stops, --wait-timeout bounds the wait)\n",
		s.id, noWorkerAfter, s.hintLocked())
}

// update is client.Watch's callback: a new state, attempt or progress. Off a terminal each new
// progress is one plain line on stderr (a CI log shows how far a long job got); the result still
// goes alone to stdout.
func (s *waitStatus) update(j *queue.Job) {
	s.mu.Lock()
	prev := s.job
	s.job = j
	s.mu.Unlock()
	if !s.live && j.Progress != nil && (prev == nil || prev.Progress == nil ||
		*prev.Progress != *j.Progress) {
		fmt.Fprintf(s.re.Stderr, "jq: job %s: %s, %s\n", s.id, j.State, progressText(j.Progress))
	}
	s.draw()
}

// progressText is a progress report as the status line shows it: "40% step 4 of 10".
func progressText(p *queue.JobProgress) string {
	if p.Message == "" {
		return fmt.Sprintf("%d%%", p.Percent)
	}
	return fmt.Sprintf("%d%% %s", p.Percent, p.Message)
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
	if p := s.job.Progress; p != nil {
		l += ", " + progressText(p)
	}
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
	switch {
	case !s.stuck():
		return ""
	case s.waiting:
		return fmt.Sprintf(" waiting: %s (jq worker list shows the workers, their queues and types)", s.reason)
	default:
		return fmt.Sprintf(" no worker has taken it yet: is one serving queue %q? (jq worker list)", s.job.Queue)
	}
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
