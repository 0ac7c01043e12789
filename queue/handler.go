package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Handler executes jobs of one type. It returns the result bytes (JSON by
// convention, may be empty) or an error; wrap an error with [Permanent] when
// another attempt cannot succeed.
//
// Delivery is at least once (NFR-006): a job may run more than once, so a
// handler must be idempotent. [JobInfoFromContext] gives it the job id and the
// attempt number to deduplicate with. The context ends when the job's timeout
// passes, when the job is cancelled, or when the worker shuts down
// (context.Cause is then [ErrShutdown]); a handler should return promptly
// once it is done.
type Handler interface {
	Handle(ctx context.Context, job *Job) ([]byte, error)
}

// HandlerFunc adapts a function to a [Handler].
type HandlerFunc func(ctx context.Context, job *Job) ([]byte, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, job *Job) ([]byte, error) { return f(ctx, job) }

// Errors of job execution.
var (
	// ErrUnknownJobType: no handler is registered for the job's type. The Mux
	// returns it as a permanent failure, since retrying the same worker
	// fleet cannot help.
	ErrUnknownJobType = errors.New("unknown job type")
	// ErrOutputTooLarge: the result exceeded the result size limit; the
	// failure is reported with reason "output_too_large".
	ErrOutputTooLarge = errors.New("output too large")
)

// Mux routes a job to the handler registered for its type. It is itself a
// Handler; the zero value is an empty Mux ready to use. Registration usually
// happens before the worker starts, but a Mux is safe for concurrent use.
//
// The registration methods are Register and RegisterFunc rather than
// net/http's Handle and HandleFunc because Handle is the [Handler] method a
// Mux implements.
type Mux struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{} }

// Register adds the handler for a job type. It panics when typ is empty, h is
// nil or typ is already registered: all three are programming errors found at
// start-up.
func (m *Mux) Register(typ string, h Handler) {
	if typ == "" {
		panic("queue: Mux.Register with an empty job type")
	}
	if h == nil {
		panic(fmt.Sprintf("queue: Mux.Register(%q) with a nil handler", typ))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.handlers[typ]; dup {
		panic(fmt.Sprintf("queue: Mux.Register: job type %q registered twice", typ))
	}
	if m.handlers == nil {
		m.handlers = map[string]Handler{}
	}
	m.handlers[typ] = h
}

// RegisterFunc adds a function as the handler for a job type; see Register.
func (m *Mux) RegisterFunc(typ string, f func(ctx context.Context, job *Job) ([]byte, error)) {
	if f == nil {
		panic(fmt.Sprintf("queue: Mux.RegisterFunc(%q) with a nil function", typ))
	}
	m.Register(typ, HandlerFunc(f))
}

// Lookup returns the handler registered for typ.
func (m *Mux) Lookup(typ string) (Handler, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.handlers[typ]
	return h, ok
}

// Types returns the registered job types, sorted.
func (m *Mux) Types() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.handlers))
	for t := range m.handlers {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Handle runs the handler registered for job.Type. An unregistered type is a
// permanent error wrapping [ErrUnknownJobType] that names the type.
func (m *Mux) Handle(ctx context.Context, job *Job) ([]byte, error) {
	h, ok := m.Lookup(job.Type)
	if !ok {
		return nil, Permanent(fmt.Errorf("%w %q (this worker handles: %s)",
			ErrUnknownJobType, job.Type, strings.Join(m.Types(), ", ")))
	}
	return h.Handle(ctx, job)
}

// Permanent marks err as not retryable (seed 001's should_retry = false): the
// job is dead-lettered at once instead of using its remaining retries.
// Permanent(nil) is nil. errors.Is and errors.As see through the mark.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether any error in err's chain was marked with
// [Permanent].
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// JobInfo identifies the attempt a handler is executing. Handlers use ID and
// Attempt to make their side effects idempotent (NFR-006).
type JobInfo struct {
	ID      string
	Attempt int
	Queue   string
	Type    string
}

type jobInfoKey struct{}

// WithJobInfo returns a context carrying info; the worker runtime calls it
// for every attempt.
func WithJobInfo(ctx context.Context, info JobInfo) context.Context {
	return context.WithValue(ctx, jobInfoKey{}, info)
}

// JobInfoFromContext returns the JobInfo stored by [WithJobInfo] or [WithJobInfoReporter].
func JobInfoFromContext(ctx context.Context) (JobInfo, bool) {
	switch v := ctx.Value(jobInfoKey{}).(type) {
	case JobInfo:
		return v, true
	case jobContext:
		return v.info, true
	}
	return JobInfo{}, false
}
