// Package storewrap is the one way a store reaches its callers: Wrap puts a backend behind the
// checks and the instruments every backend would otherwise repeat.
//
// Each call of the wrapped store, in order:
//
//  1. starts its clock, and a span when the caller's context carries a recording one (a span per
//     call of the background loops would make a root trace every few hundred milliseconds);
//  2. calls Options.Fault, when set: a test's way to make any call fail, whatever its arguments;
//  3. validates the arguments — the …Params' Validate, store.ParseJobID for a job id — and refuses
//     invalid ones with queue.ErrInvalidArgument (or ErrIllegalTransition) before the backend sees
//     the call; a job id goes down in canonical form, a defaulted limit resolved;
//  4. calls the backend, and reports the duration and Outcome to Options.Observe.
//
// A backend may therefore take its arguments as valid. Where it needs what validation derives — a
// list's decoded cursor, a queue's settings with the defaults, an id prefix's range — it derives it
// again; per-item checks of a batch whose items get outcomes of their own (acks, reports, fails,
// progress) stay the backend's, since one bad item must not refuse the batch. client/jqpgx inserts
// through store/postgres inside an application's transaction, without this package, and so that path
// validates on its own.
package storewrap

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Backend is every store interface jq's server uses: what Postgres and the embedded store implement,
// and what Store implements over them.
type Backend interface {
	store.Store
	store.DispatchStore
	store.RecoveryStore
	store.OperatorStore
	store.AdminStore
	store.ProgressStore
	store.ConstraintStore
	store.OutboxStore
	store.RetentionStore
	store.EventFeed
	store.ScheduleStore
	store.DepthStore
}

// Options are the wrapper's instruments; each may be nil.
type Options struct {
	// Observe receives every call's method name (JobClaim), duration and Outcome. It must be fast and
	// safe for concurrent use.
	Observe func(method string, d time.Duration, outcome string)
	// Tracer starts a span store.<method> under a recording span of the caller's context.
	Tracer trace.Tracer
	// Fault runs first in every call (Close excepted); an error it returns is the call's, and the
	// backend is not called. For tests: it injects the store failures the callers must survive.
	Fault func(ctx context.Context, method string) error
}

// Store is a Backend behind the checks. It implements Backend.
type Store struct {
	b Backend
	o Options
}

var _ Backend = (*Store)(nil)

// Wrap returns b behind the checks and o's instruments.
func Wrap(b Backend, o Options) *Store { return &Store{b: b, o: o} }

// Outcomes of a call, as Observe and the span report them: a bounded label.
const (
	OutcomeOK       = "ok"
	OutcomeInvalid  = "invalid"  // ErrInvalidArgument: refused by the checks or by the backend
	OutcomeRefused  = "refused"  // another of queue's sentinels: not found, stale, exists, …
	OutcomeCanceled = "canceled" // the caller's context ended
	OutcomeError    = "error"    // anything else: the database, the disk, an injected fault
)

// refusals are the answers a caller expects and handles: the store worked, the request did not
// apply to what is stored.
var refusals = []error{
	queue.ErrJobNotFound, queue.ErrQueueNotFound, queue.ErrQueueExists, queue.ErrQueueNotEmpty,
	queue.ErrWorkerNotFound, queue.ErrIllegalTransition, queue.ErrStaleAttempt, queue.ErrIdempotencyConflict,
	queue.ErrLimitReached, queue.ErrConstraintNotFound, queue.ErrConstraintExists, queue.ErrScheduleNotFound,
	queue.ErrScheduleExists, queue.ErrScheduleOwnedByConfig,
}

// Outcome classifies a call's error.
func Outcome(err error) string {
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, queue.ErrInvalidArgument):
		return OutcomeInvalid
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return OutcomeCanceled
	}
	for _, r := range refusals {
		if errors.Is(err, r) {
			return OutcomeRefused
		}
	}
	return OutcomeError
}

// call runs one call of a method returning (R, error): the fault hook, check (nil: none), then do.
// check may rewrite the variables do reads (a canonical id, a resolved limit).
func call[R any](ctx context.Context, s *Store, method string, check func() error, do func(context.Context) (R, error)) (r R, err error) {
	start := time.Now()
	var span trace.Span
	if s.o.Tracer != nil && trace.SpanFromContext(ctx).IsRecording() {
		ctx, span = s.o.Tracer.Start(ctx, "store."+method, trace.WithSpanKind(trace.SpanKindInternal))
	}
	defer func() { s.finish(method, start, span, err) }()
	if s.o.Fault != nil {
		if err = s.o.Fault(ctx, method); err != nil {
			return r, err
		}
	}
	if check != nil {
		if err = check(); err != nil {
			return r, err
		}
	}
	return do(ctx)
}

// call0 is call for a method returning only an error.
func call0(ctx context.Context, s *Store, method string, check func() error, do func(context.Context) error) error {
	_, err := call(ctx, s, method, check, func(ctx context.Context) (struct{}, error) { return struct{}{}, do(ctx) })
	return err
}

// pair carries a method's two results through call.
type pair[A, B any] struct {
	a A
	b B
}

// call2 is call for a method returning (A, B, error).
func call2[A, B any](ctx context.Context, s *Store, method string, check func() error, do func(context.Context) (A, B, error)) (A, B, error) {
	p, err := call(ctx, s, method, check, func(ctx context.Context) (pair[A, B], error) {
		a, b, err := do(ctx)
		return pair[A, B]{a, b}, err
	})
	return p.a, p.b, err
}

func (s *Store) finish(method string, start time.Time, span trace.Span, err error) {
	outcome := Outcome(err)
	if s.o.Observe != nil {
		s.o.Observe(method, time.Since(start), outcome)
	}
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("jq.store.outcome", outcome))
	if outcome == OutcomeError {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// jobID returns a check that replaces *id with its canonical form.
func jobID(id *string) func() error {
	return func() (err error) {
		*id, err = store.ParseJobID(*id)
		return err
	}
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	return call0(ctx, s, "Ping", nil, s.b.Ping)
}

// Close implements store.Store: it closes the backend.
func (s *Store) Close() { s.b.Close() }
