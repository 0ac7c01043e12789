package storetest

import (
	"context"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// NewStoreFunc returns the store under test. It may return the same store to every test (the suite
// isolates its data by unique queue names and worker ids, never by emptying tables) and is
// responsible for closing it.
type NewStoreFunc func(t *testing.T) store.Store

// as returns the store under test as the interface C of package store. Exercise runs a suite only
// on a store implementing the interfaces the suite needs, so a failure here is a bug of the suite
// (an interface it uses and does not list), reported as such.
func as[C any](t testing.TB, s store.Store) C {
	t.Helper()
	c, ok := s.(C)
	if !ok {
		t.Fatalf("storetest: %T does not implement %s", s, reflect.TypeFor[C]())
	}
	return c
}

// The contract of store.Store itself, one suite per concern.

func pingSuite(t *testing.T, f Factory) {
	b := newBundle(t, sharedStore(f))
	require.NoError(t, b.s.Ping(b.ctx))
}

func queueSuite(t *testing.T, f Factory)         { runQueueTests(t, sharedStore(f)) }
func jobInsertSuite(t *testing.T, f Factory)     { runJobInsertTests(t, sharedStore(f)) }
func idempotencySuite(t *testing.T, f Factory)   { runIdempotencyTests(t, sharedStore(f)) }
func jobQuerySuite(t *testing.T, f Factory)      { runJobQueryTests(t, sharedStore(f)) }
func jobIDPrefixSuite(t *testing.T, f Factory)   { runJobIDPrefixTests(t, sharedStore(f)) }
func jobPagesSuite(t *testing.T, f Factory)      { runPageTests(t, sharedStore(f)) }
func jobTransitionSuite(t *testing.T, f Factory) { runTransitionTests(t, sharedStore(f)) }
func workerSuite(t *testing.T, f Factory)        { runWorkerTests(t, sharedStore(f)) }

// bundle is what a test works with: the store, a context bounded by a timeout and a queue of its own.
type bundle struct {
	t     *testing.T
	s     store.Store
	ctx   context.Context
	queue string
}

const testTimeout = 60 * time.Second

// setup marks the test parallel and returns a fresh bundle with a new queue (default settings).
func setup(t *testing.T, newStore NewStoreFunc) *bundle {
	t.Helper()
	t.Parallel()
	return newBundle(t, newStore)
}

// newBundle is setup for a test Exercise has already marked parallel: a suite's own top level.
func newBundle(t *testing.T, newStore NewStoreFunc) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	b := &bundle{t: t, s: newStore(t), ctx: ctx}
	b.queue = b.newQueue(store.QueueCreateParams{}).Name
	return b
}

// uniqueName returns a fresh valid queue name / worker id, so parallel tests never share data.
func uniqueName(prefix string) string {
	var raw [8]byte
	for i := range raw {
		raw[i] = byte(rand.IntN(256)) //nolint:gosec // < 256
	}
	return prefix + "-" + hex.EncodeToString(raw[:])
}

// newQueue creates a queue with a unique name; p.Name is ignored.
func (b *bundle) newQueue(p store.QueueCreateParams) *queue.Queue {
	b.t.Helper()
	p.Name = uniqueName("st")
	q, err := b.s.QueueCreate(b.ctx, p)
	require.NoError(b.t, err)
	return q
}

// job returns insert params for the bundle's queue.
func (b *bundle) job(typ string) store.JobInsertParams {
	return store.JobInsertParams{Queue: b.queue, Type: typ, Payload: []byte(`{"n":1}`)}
}

func (b *bundle) insert(ps ...store.JobInsertParams) []store.JobInsertResult {
	b.t.Helper()
	res, err := b.s.JobInsertMany(b.ctx, ps)
	require.NoError(b.t, err)
	require.Len(b.t, res, len(ps))
	return res
}

func (b *bundle) insertOne(p store.JobInsertParams) *queue.Job {
	b.t.Helper()
	res := b.insert(p)
	require.False(b.t, res[0].Existing)
	return res[0].Job
}

// move performs one transition that must succeed, checking the attempt.
func (b *bundle) move(j *queue.Job, to queue.State, p store.JobTransitionParams) *queue.Job {
	b.t.Helper()
	p.ID, p.From, p.To = j.ID, j.State, to
	if p.Attempt == 0 {
		p.Attempt = j.Attempt
	}
	if to == queue.StateAssigned && p.WorkerID == "" {
		p.WorkerID = "worker-" + b.queue
	}
	got, err := b.s.JobTransition(b.ctx, p)
	require.NoError(b.t, err, "%s -> %s", j.State, to)
	require.Equal(b.t, to, got.State)
	return got
}

func (b *bundle) get(id string) *queue.Job {
	b.t.Helper()
	j, err := b.s.JobGet(b.ctx, id)
	require.NoError(b.t, err)
	return j
}

func (b *bundle) events(id string) []queue.Event {
	b.t.Helper()
	evs, err := b.s.JobEvents(b.ctx, id)
	require.NoError(b.t, err)
	return evs
}

// listAll walks every page of a listing.
func (b *bundle) listAll(p store.JobListParams) []*queue.Job {
	b.t.Helper()
	var all []*queue.Job
	for pages := 0; ; pages++ {
		require.Less(b.t, pages, 10_000, "pagination does not end")
		res, err := b.s.JobList(b.ctx, p)
		require.NoError(b.t, err)
		all = append(all, res.Jobs...)
		if res.NextCursor == "" {
			return all
		}
		p.Cursor = res.NextCursor
	}
}

func ptr[T any](v T) *T { return &v }

func ids(jobs []*queue.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// advance moves a job through the given states with default parameters.
func (b *bundle) advance(j *queue.Job, states ...queue.State) *queue.Job {
	b.t.Helper()
	for _, to := range states {
		j = b.move(j, to, store.JobTransitionParams{Reason: "test"})
	}
	return j
}

func isStale(err error) bool { return errors.Is(err, queue.ErrStaleAttempt) }

// with returns a copy of the bundle for a subtest, so that its assertions fail the subtest.
func (b *bundle) with(t *testing.T) *bundle {
	c := *b
	c.t = t
	return &c
}

// jobsOf returns the jobs of insert results, in order.
func jobsOf(res []store.JobInsertResult) []*queue.Job {
	out := make([]*queue.Job, len(res))
	for i, r := range res {
		out[i] = r.Job
	}
	return out
}
