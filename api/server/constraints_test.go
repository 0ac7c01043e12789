package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/internal/testenv/stores"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// setupConstraints serves the API over a database of the test's own: constraints are global to a
// database (they match jobs of every queue, and a server holds at most queue.MaxConstraints).
func setupConstraints(t *testing.T) *bundle {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := stores.Postgres(ctx, t, 4)
	b := newBundle(t, st)
	opts := withEngine(t, apiserver.Options{Store: st, Log: zaptest.NewLogger(t)})
	b.eng = opts.Engine
	b.cl = serve(t, opts)
	return b
}

func (b *bundle) createConstraint(req *jqv1.CreateConstraintRequest) (*jqv1.Constraint, error) {
	res, err := b.cl.Constraints.CreateConstraint(b.ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return res.Msg.GetConstraint(), nil
}

func (b *bundle) getConstraint(name string, top *int32) (*jqv1.GetConstraintResponse, error) {
	res, err := b.cl.Constraints.GetConstraint(b.ctx, connect.NewRequest(&jqv1.GetConstraintRequest{Name: name, Top: top}))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// TestConstraintLifecycle: create, get, list, replace and delete through the API, each field as
// given, and the codes of a duplicate and a missing constraint.
func TestConstraintLifecycle(t *testing.T) {
	b := setupConstraints(t)
	req := &jqv1.CreateConstraintRequest{
		Name:        "email-per-tenant",
		Match:       &jqv1.JobMatcher{Queue: b.queue, Type: "email.*", Labels: map[string]string{"tier": "free"}},
		Key:         "{{.labels.tenant}}",
		Concurrency: 5,
		Rate:        &jqv1.RateLimit{Limit: 100, Interval: durationpb.New(time.Minute), Burst: 20},
	}
	c, err := b.createConstraint(req)
	require.NoError(t, err)
	require.Equal(t, "email-per-tenant", c.GetName())
	require.Equal(t, b.queue, c.GetMatch().GetQueue())
	require.Equal(t, "email.*", c.GetMatch().GetType())
	require.Equal(t, map[string]string{"tier": "free"}, c.GetMatch().GetLabels())
	require.Equal(t, "{{.labels.tenant}}", c.GetKey())
	require.EqualValues(t, 5, c.GetConcurrency())
	require.EqualValues(t, 100, c.GetRate().GetLimit())
	require.Equal(t, time.Minute, c.GetRate().GetInterval().AsDuration())
	require.EqualValues(t, 20, c.GetRate().GetBurst())
	require.False(t, c.GetCreatedAt().AsTime().IsZero())

	_, err = b.createConstraint(req)
	requireCode(t, connect.CodeAlreadyExists, err)

	// A second one, concurrency only, every job of the queue.
	_, err = b.createConstraint(&jqv1.CreateConstraintRequest{Name: "all-of-queue", Match: &jqv1.JobMatcher{Queue: b.queue}, Concurrency: 1})
	require.NoError(t, err)

	got, err := b.getConstraint("email-per-tenant", nil)
	require.NoError(t, err)
	require.True(t, proto.Equal(c, got.GetConstraint()), "got %v, want %v", got.GetConstraint(), c)
	require.Zero(t, got.GetUsage().GetRunning())
	require.Zero(t, got.GetUsage().GetKeys())
	require.Empty(t, got.GetUsage().GetTop())

	list, err := b.cl.Constraints.ListConstraints(b.ctx, connect.NewRequest(&jqv1.ListConstraintsRequest{}))
	require.NoError(t, err)
	var names []string
	for _, s := range list.Msg.GetConstraints() {
		names = append(names, s.GetConstraint().GetName())
		require.NotNil(t, s.GetUsage())
	}
	require.Equal(t, []string{"all-of-queue", "email-per-tenant"}, names, "ordered by name")

	// Replace: the rate goes, the concurrency changes.
	req.Replace, req.Rate, req.Concurrency = true, nil, 2
	c2, err := b.createConstraint(req)
	require.NoError(t, err)
	require.EqualValues(t, 2, c2.GetConcurrency())
	require.Nil(t, c2.GetRate())

	_, err = b.cl.Constraints.DeleteConstraint(b.ctx, connect.NewRequest(&jqv1.DeleteConstraintRequest{Name: "email-per-tenant"}))
	require.NoError(t, err)
	_, err = b.cl.Constraints.DeleteConstraint(b.ctx, connect.NewRequest(&jqv1.DeleteConstraintRequest{Name: "email-per-tenant"}))
	requireCode(t, connect.CodeNotFound, err)
	_, err = b.getConstraint("email-per-tenant", nil)
	requireCode(t, connect.CodeNotFound, err)
}

// TestConstraintInvalid: every malformed request is INVALID_ARGUMENT with a one-line message that
// names the problem, and stores nothing.
func TestConstraintInvalid(t *testing.T) {
	b := setupConstraints(t)
	minute := durationpb.New(time.Minute)
	for name, tc := range map[string]struct {
		req  *jqv1.CreateConstraintRequest
		want string
	}{
		"name":          {&jqv1.CreateConstraintRequest{Name: "Bad Name", Concurrency: 1}, "constraint name"},
		"empty name":    {&jqv1.CreateConstraintRequest{Concurrency: 1}, "constraint name"},
		"no limit":      {&jqv1.CreateConstraintRequest{Name: "c"}, "no limit set"},
		"concurrency":   {&jqv1.CreateConstraintRequest{Name: "c", Concurrency: -1}, "concurrency -1"},
		"queue":         {&jqv1.CreateConstraintRequest{Name: "c", Concurrency: 1, Match: &jqv1.JobMatcher{Queue: "Q!"}}, "queue"},
		"type glob":     {&jqv1.CreateConstraintRequest{Name: "c", Concurrency: 1, Match: &jqv1.JobMatcher{Type: "a["}}, "type pattern"},
		"key template":  {&jqv1.CreateConstraintRequest{Name: "c", Concurrency: 1, Key: "{{.tenant}}"}, "key template"},
		"key unclosed":  {&jqv1.CreateConstraintRequest{Name: "c", Concurrency: 1, Key: "{{.labels.t"}, "unclosed"},
		"rate interval": {&jqv1.CreateConstraintRequest{Name: "c", Rate: &jqv1.RateLimit{Limit: 5}}, "rate interval"},
		"rate limit":    {&jqv1.CreateConstraintRequest{Name: "c", Rate: &jqv1.RateLimit{Limit: 0, Interval: minute}}, "rate limit"},
		"rate burst":    {&jqv1.CreateConstraintRequest{Name: "c", Rate: &jqv1.RateLimit{Limit: 1, Interval: minute, Burst: -1}}, "burst"},
		"bad duration":  {&jqv1.CreateConstraintRequest{Name: "c", Rate: &jqv1.RateLimit{Limit: 1, Interval: &durationpb.Duration{Seconds: 1, Nanos: -1}}}, "rate interval"},
	} {
		_, err := b.createConstraint(tc.req)
		requireCode(t, connect.CodeInvalidArgument, err, name)
		require.Contains(t, err.Error(), tc.want, name)
		require.NotContains(t, err.Error(), "\n", name)
	}
	_, err := b.getConstraint("Bad Name", nil)
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = b.cl.Constraints.DeleteConstraint(b.ctx, connect.NewRequest(&jqv1.DeleteConstraintRequest{Name: ""}))
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = b.getConstraint("missing", nil)
	requireCode(t, connect.CodeNotFound, err)
	for _, top := range []int32{-1, 101} {
		_, err = b.getConstraint("missing", proto.Int32(top))
		requireCode(t, connect.CodeInvalidArgument, err, "top %d", top)
		require.Contains(t, err.Error(), "top")
	}

	list, err := b.cl.Constraints.ListConstraints(b.ctx, connect.NewRequest(&jqv1.ListConstraintsRequest{}))
	require.NoError(t, err)
	require.Empty(t, list.Msg.GetConstraints())
}

// TestConstraintLimitReached: a server holds at most queue.MaxConstraints constraints; one more is
// RESOURCE_EXHAUSTED, a replace of one of them is not.
func TestConstraintLimitReached(t *testing.T) {
	b := setupConstraints(t)
	for i := range queue.MaxConstraints {
		_, err := b.createConstraint(&jqv1.CreateConstraintRequest{Name: fmt.Sprintf("c%03d", i), Concurrency: 1})
		require.NoError(t, err)
	}
	_, err := b.createConstraint(&jqv1.CreateConstraintRequest{Name: "one-more", Concurrency: 1})
	requireCode(t, connect.CodeResourceExhausted, err)
	_, err = b.createConstraint(&jqv1.CreateConstraintRequest{Name: "c000", Concurrency: 2, Replace: true})
	require.NoError(t, err)
}

// TestConstraintUsageAndWaiting: jobs claimed under a per-tenant concurrency limit show in
// GetConstraint's usage (top keys) and ListConstraints' summary, and GetJob of a due job the limit
// holds back says so; a job of a key with room, or one not yet due, keeps the worker-based reason.
func TestConstraintUsageAndWaiting(t *testing.T) {
	b := setupConstraints(t)
	_, err := b.createConstraint(&jqv1.CreateConstraintRequest{Name: "per-tenant", Match: &jqv1.JobMatcher{Queue: b.queue},
		Key: "{{.labels.tenant}}", Concurrency: 2})
	require.NoError(t, err)
	_, err = b.createConstraint(&jqv1.CreateConstraintRequest{Name: "z-rate", Match: &jqv1.JobMatcher{Queue: b.queue, Type: "rated"},
		Rate: &jqv1.RateLimit{Limit: 1, Interval: durationpb.New(time.Hour)}})
	require.NoError(t, err)

	for range 3 {
		b.insert(store.JobInsertParams{Labels: map[string]string{"tenant": "acme"}})
	}
	b.insert(store.JobInsertParams{Labels: map[string]string{"tenant": "umbrella"}})
	_, err = b.store.WorkerRegister(b.ctx, store.WorkerRegisterParams{ID: "w-" + b.queue, Queues: []string{b.queue}, Concurrency: 10})
	require.NoError(t, err)
	claim, err := b.store.JobClaimConstrained(b.ctx, store.JobClaimParams{Queue: b.queue, WorkerID: "w-" + b.queue, Limit: 10})
	require.NoError(t, err)
	require.Len(t, claim.Jobs, 3, "acme's two and umbrella's one")

	got, err := b.getConstraint("per-tenant", nil)
	require.NoError(t, err)
	u := got.GetUsage()
	require.EqualValues(t, 3, u.GetRunning())
	require.EqualValues(t, 2, u.GetKeys())
	require.Len(t, u.GetTop(), 2)
	require.Equal(t, "acme", u.GetTop()[0].GetKey())
	require.EqualValues(t, 2, u.GetTop()[0].GetRunning())
	require.Zero(t, u.GetTop()[0].GetTokens(), "no rate limit, no tokens")
	require.Equal(t, "umbrella", u.GetTop()[1].GetKey())

	got, err = b.getConstraint("per-tenant", proto.Int32(1))
	require.NoError(t, err)
	require.Len(t, got.GetUsage().GetTop(), 1)
	got, err = b.getConstraint("per-tenant", proto.Int32(0))
	require.NoError(t, err)
	require.Empty(t, got.GetUsage().GetTop())
	require.EqualValues(t, 3, got.GetUsage().GetRunning())

	list, err := b.cl.Constraints.ListConstraints(b.ctx, connect.NewRequest(&jqv1.ListConstraintsRequest{}))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetConstraints(), 2)
	require.EqualValues(t, 3, list.Msg.GetConstraints()[0].GetUsage().GetRunning())
	require.EqualValues(t, 2, list.Msg.GetConstraints()[0].GetUsage().GetKeys())
	require.Empty(t, list.Msg.GetConstraints()[0].GetUsage().GetTop())

	waiting := func(j *queue.Job) string {
		t.Helper()
		res, err := b.cl.Jobs.GetJob(b.ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: j.ID}))
		require.NoError(t, err)
		return res.Msg.GetJob().GetWaiting()
	}
	held := b.insert(store.JobInsertParams{Labels: map[string]string{"tenant": "acme"}})
	require.Equal(t, "limited by constraint per-tenant, key acme: 2/2 running", waiting(held))
	free := b.insert(store.JobInsertParams{Labels: map[string]string{"tenant": "umbrella"}})
	require.Empty(t, waiting(free), "umbrella has room, and a worker serves the queue")
	later := b.insert(store.JobInsertParams{Labels: map[string]string{"tenant": "acme"}, RunAt: time.Now().Add(time.Hour)})
	require.Empty(t, waiting(later), "not due: no constraint holds it yet")

	// A rate limit: the one start of the hour taken, the next job waits for a token.
	rated := []*queue.Job{b.insert(store.JobInsertParams{Type: "rated", Labels: map[string]string{"tenant": "initech"}})}
	claim, err = b.store.JobClaimConstrained(b.ctx, store.JobClaimParams{Queue: b.queue, WorkerID: "w-" + b.queue, Limit: 10})
	require.NoError(t, err)
	require.Len(t, claim.Jobs, 2, "umbrella's second job and initech's rated one")
	rated = append(rated, b.insert(store.JobInsertParams{Type: "rated"}))
	why := waiting(rated[1])
	require.True(t, strings.HasPrefix(why, "limited by constraint z-rate, key (all): rate 1/h, next start in "), why)
	// Each waiting job of the key gets its own estimate: the second waits for the token after the
	// first's.
	rated = append(rated, b.insert(store.JobInsertParams{Type: "rated"}))
	second := waiting(rated[2])
	require.NotEqual(t, why, second, "not the key's next start for every job")
	require.True(t, strings.HasSuffix(second, ", 1 job of the key before it"), second)
	require.NotContains(t, waiting(rated[1]), "before it", "the first is not behind the second")

	// Deleted: nothing holds the job back.
	_, err = b.cl.Constraints.DeleteConstraint(b.ctx, connect.NewRequest(&jqv1.DeleteConstraintRequest{Name: "per-tenant"}))
	require.NoError(t, err)
	require.Empty(t, waiting(held))
}
