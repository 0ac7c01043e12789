package storewrap_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
	"github.com/jq-dev/jq/store/postgres"
	"github.com/jq-dev/jq/store/sqlite"
	"github.com/jq-dev/jq/store/storewrap"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Both server backends implement everything the wrapper wraps.
var (
	_ storewrap.Backend = (*postgres.Store)(nil)
	_ storewrap.Backend = (*sqlite.Store)(nil)
)

// backend is a real embedded store of the test's own.
func backend(t *testing.T) *sqlite.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sqlite.New(ctx, sqlite.Config{Path: filepath.Join(t.TempDir(), "jq.db")})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// calls records the methods a fault hook saw.
type calls struct {
	mu    sync.Mutex
	names []string
}

func (c *calls) hook(err error) func(context.Context, string) error {
	return func(_ context.Context, method string) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.names = append(c.names, method)
		return err
	}
}

func (c *calls) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

var errFault = errors.New("injected fault")

// Every method of Backend goes through the wrapper under its own name: called with zero arguments
// and a hook that fails everything, each returns the hook's error, and the hook saw exactly that
// method's name. Close alone has no context and no error to inject.
func TestEveryMethodIsWrapped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var c calls
	w := storewrap.Wrap(backend(t), storewrap.Options{Fault: c.hook(errFault)})
	ctxType := reflect.TypeFor[context.Context]()
	bt := reflect.TypeFor[storewrap.Backend]()
	require.Greater(t, bt.NumMethod(), 70, "the union of the store interfaces")
	for i := range bt.NumMethod() {
		m := bt.Method(i)
		if m.Name == "Close" {
			continue
		}
		fn := reflect.ValueOf(w).MethodByName(m.Name)
		args := make([]reflect.Value, m.Type.NumIn())
		for j := range args {
			if in := m.Type.In(j); in == ctxType {
				args[j] = reflect.ValueOf(ctx)
			} else {
				args[j] = reflect.Zero(in)
			}
		}
		out := fn.Call(args)
		err, _ := out[len(out)-1].Interface().(error)
		require.ErrorIs(t, err, errFault, m.Name)
		require.Equal(t, []string{m.Name}, c.seen(), "the hook names the method called")
		c.names = nil
	}
}

// Invalid arguments are refused by the wrapper: the backend — here a second wrapper whose fault hook
// records every call that reaches it — never sees the call.
func TestInvalidArgumentsNeverReachTheBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var reached calls
	inner := storewrap.Wrap(backend(t), storewrap.Options{Fault: reached.hook(nil)})
	var outcomes []string
	w := storewrap.Wrap(inner, storewrap.Options{Observe: func(_ string, _ time.Duration, outcome string) {
		outcomes = append(outcomes, outcome)
	}})
	const bad = "not-a-uuid"
	cases := map[string]func() error{
		"QueueCreate": func() error { _, err := w.QueueCreate(ctx, store.QueueCreateParams{Name: "Bad Name"}); return err },
		"QueueEnsure": func() error { _, _, err := w.QueueEnsure(ctx, store.QueueCreateParams{}); return err },
		"JobInsertMany": func() error {
			_, err := w.JobInsertMany(ctx, []store.JobInsertParams{{Queue: "q", Type: ""}})
			return err
		},
		"JobGet":        func() error { _, err := w.JobGet(ctx, bad); return err },
		"JobPrefixList": func() error { _, err := w.JobPrefixList(ctx, "zz", 1); return err },
		"JobList":       func() error { _, err := w.JobList(ctx, store.JobListParams{Limit: -1}); return err },
		"JobTransition": func() error {
			_, err := w.JobTransition(ctx, store.JobTransitionParams{ID: bad, From: queue.StatePending, To: queue.StateAssigned})
			return err
		},
		"JobEvents":       func() error { _, err := w.JobEvents(ctx, bad); return err },
		"WorkerRegister":  func() error { _, err := w.WorkerRegister(ctx, store.WorkerRegisterParams{}); return err },
		"WorkerHeartbeat": func() error { _, err := w.WorkerHeartbeat(ctx, store.WorkerHeartbeatParams{}); return err },
		"WorkerSetStatus": func() error { _, err := w.WorkerSetStatus(ctx, store.WorkerSetStatusParams{ID: "w"}); return err },
		"JobDue":          func() error { _, err := w.JobDue(ctx, store.JobDueParams{Queue: "q"}); return err },
		"JobAssignMany":   func() error { _, err := w.JobAssignMany(ctx, store.JobAssignParams{}); return err },
		"JobClaim":        func() error { _, err := w.JobClaim(ctx, store.JobClaimParams{Queue: "q", WorkerID: "w"}); return err },
		"JobRequestCancel": func() error {
			_, err := w.JobRequestCancel(ctx, store.JobLease{ID: bad, Attempt: 1})
			return err
		},
		"JobConsumeResult":    func() error { _, _, err := w.JobConsumeResult(ctx, bad); return err },
		"JobProgressSet":      func() error { _, err := w.JobProgressSet(ctx, store.JobProgressSetParams{}); return err },
		"JobProgressGet":      func() error { _, err := w.JobProgressGet(ctx, bad); return err },
		"ConstraintCreate":    func() error { _, err := w.ConstraintCreate(ctx, store.ConstraintCreateParams{}); return err },
		"ConstraintUsage":     func() error { _, err := w.ConstraintUsage(ctx, store.ConstraintUsageParams{Top: -1}); return err },
		"JobClaimConstrained": func() error { _, err := w.JobClaimConstrained(ctx, store.JobClaimParams{}); return err },
		"ConstraintBucketsPrune": func() error {
			_, err := w.ConstraintBucketsPrune(ctx, store.ConstraintBucketsPruneParams{})
			return err
		},
		"JobPeek": func() error { _, err := w.JobPeek(ctx, store.JobPeekParams{Queue: "q", Limit: -1}); return err },
		"JobPurgeDeadLetters": func() error {
			_, err := w.JobPurgeDeadLetters(ctx, store.JobPurgeDeadLettersParams{Queue: "Bad Name"})
			return err
		},
		"JobDelete": func() error {
			return w.JobDelete(ctx, store.JobDeleteParams{ID: bad, State: queue.StateDone})
		},
		"EventsClaim":    func() error { _, err := w.EventsClaim(ctx, store.EventsClaimParams{}); return err },
		"EventsPrune":    func() error { _, err := w.EventsPrune(ctx, store.EventsPruneParams{}); return err },
		"EventsRead":     func() error { _, err := w.EventsRead(ctx, store.EventsReadParams{}); return err },
		"ScheduleCreate": func() error { _, err := w.ScheduleCreate(ctx, store.ScheduleParams{}); return err },
		"ScheduleUpdate": func() error { _, err := w.ScheduleUpdate(ctx, store.ScheduleParams{}); return err },
		"ScheduleReconcile": func() error {
			_, err := w.ScheduleReconcile(ctx, store.ScheduleReconcileParams{Schedules: []store.ScheduleParams{{}}})
			return err
		},
		"ScheduleAdvance": func() error {
			_, err := w.ScheduleAdvance(ctx, store.ScheduleAdvanceParams{LastJobID: bad})
			return err
		},
		"ScheduleFire": func() error { _, err := w.ScheduleFire(ctx, []store.ScheduleFireParams{{}}); return err },
	}
	for name, call := range cases {
		outcomes = outcomes[:0]
		require.ErrorIs(t, call(), queue.ErrInvalidArgument, name)
		require.Equal(t, []string{storewrap.OutcomeInvalid}, outcomes, name)
	}
	// The transition table comes first, as the contract says: ErrIllegalTransition before any I/O.
	_, err := w.JobTransition(ctx, store.JobTransitionParams{ID: bad, From: queue.StateDone, To: queue.StatePending})
	require.ErrorIs(t, err, queue.ErrIllegalTransition)
	require.ErrorIs(t, w.JobDelete(ctx, store.JobDeleteParams{ID: bad, State: queue.StatePending}), queue.ErrIllegalTransition)

	require.Empty(t, reached.seen(), "no invalid call reached the backend")
}

// A job id goes down canonical: the embedded store keeps ids as text, so an id in capitals finds
// its job only because the wrapper rewrote it.
func TestJobIDsGoDownCanonical(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := storewrap.Wrap(backend(t), storewrap.Options{})
	_, err := w.QueueCreate(ctx, store.QueueCreateParams{Name: "canon"})
	require.NoError(t, err)
	res, err := w.JobInsertMany(ctx, []store.JobInsertParams{{Queue: "canon", Type: "t"}})
	require.NoError(t, err)
	upper := strings.ToUpper(res[0].Job.ID)

	j, err := w.JobGet(ctx, upper)
	require.NoError(t, err)
	require.Equal(t, res[0].Job.ID, j.ID)
	evs, err := w.JobEvents(ctx, upper)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	jobs, err := w.JobAssignMany(ctx, store.JobAssignParams{WorkerID: "w1", IDs: []string{"malformed", upper, res[0].Job.ID}})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "the malformed id is dropped; the one id, in two cases, is assigned once")
}

// Observe sees every call with its outcome; a span is made only under a recording one.
func TestObserveAndSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	type obs struct{ method, outcome string }
	var mu sync.Mutex
	var seen []obs
	fail := false
	w := storewrap.Wrap(backend(t), storewrap.Options{
		Tracer: tp.Tracer("test"),
		Observe: func(method string, d time.Duration, outcome string) {
			mu.Lock()
			defer mu.Unlock()
			require.GreaterOrEqual(t, d, time.Duration(0))
			seen = append(seen, obs{method, outcome})
		},
		Fault: func(context.Context, string) error {
			if fail {
				return errFault
			}
			return nil
		},
	})
	_, err := w.QueueList(ctx) // no span: the context carries none
	require.NoError(t, err)
	_, err = w.JobGet(ctx, "1b4e28ba-2fa1-11d2-883f-0016d3cca427")
	require.ErrorIs(t, err, queue.ErrJobNotFound)

	parent, span := tp.Tracer("test").Start(ctx, "request")
	_, err = w.QueueGet(parent, "nope")
	require.ErrorIs(t, err, queue.ErrQueueNotFound)
	fail = true
	_, err = w.QueueList(parent)
	require.ErrorIs(t, err, errFault)
	span.End()

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	fail = false
	_, err = w.WorkerList(cancelled)
	require.Error(t, err)

	require.Equal(t, []obs{
		{"QueueList", storewrap.OutcomeOK}, {"JobGet", storewrap.OutcomeRefused}, {"QueueGet", storewrap.OutcomeRefused},
		{"QueueList", storewrap.OutcomeError}, {"WorkerList", storewrap.OutcomeCanceled},
	}, seen)
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		if s.Name() == "store.QueueList" {
			require.Contains(t, s.Attributes(), attribute.String("jq.store.outcome", storewrap.OutcomeError))
			require.Equal(t, "Error", s.Status().Code.String())
		}
	}
	require.Equal(t, []string{"store.QueueGet", "store.QueueList", "request"}, names)
}
