package apiserver

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/engine"
	"github.com/jq-dev/jq/store"
)

// defaultUsageTop is how many busiest keys GetConstraint shows when the request does not say.
const defaultUsageTop = 10

// constraintService serves jq.v1.ConstraintService (docs/flow-control.md): reads from
// the store, changes through the engine's constraint commands.
type constraintService struct {
	store  Reader
	engine *engine.Engine
}

func (s *constraintService) CreateConstraint(ctx context.Context, req *connect.Request[jqv1.CreateConstraintRequest]) (*connect.Response[jqv1.CreateConstraintResponse], error) {
	m := req.Msg
	c, err := api.ConstraintFromProto(m.GetName(), m.GetMatch(), m.GetKey(), m.GetConcurrency(), m.GetRate())
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	out, err := s.engine.ConstraintCreate(ctx, store.ConstraintCreateParams{Constraint: c, Replace: m.GetReplace()})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.CreateConstraintResponse{Constraint: api.ConstraintProto(out)}), nil
}

func (s *constraintService) ListConstraints(ctx context.Context, _ *connect.Request[jqv1.ListConstraintsRequest]) (*connect.Response[jqv1.ListConstraintsResponse], error) {
	set, err := s.store.ConstraintSet(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*jqv1.ConstraintSummary, 0, len(set.Constraints))
	for _, c := range set.Constraints {
		u, err := s.store.ConstraintUsage(ctx, store.ConstraintUsageParams{Name: c.Name})
		if errors.Is(err, queue.ErrConstraintNotFound) {
			continue // deleted since the set was read
		}
		if err != nil {
			return nil, err
		}
		out = append(out, &jqv1.ConstraintSummary{Constraint: api.ConstraintProto(c), Usage: api.ConstraintUsageProto(c, u)})
	}
	return connect.NewResponse(&jqv1.ListConstraintsResponse{Constraints: out}), nil
}

func (s *constraintService) GetConstraint(ctx context.Context, req *connect.Request[jqv1.GetConstraintRequest]) (*connect.Response[jqv1.GetConstraintResponse], error) {
	if err := validConstraintName(req.Msg.GetName()); err != nil {
		return nil, err
	}
	top := defaultUsageTop
	if req.Msg.Top != nil {
		top = int(req.Msg.GetTop())
		if top < 0 || top > store.MaxUsageTop {
			return nil, invalid("top " + strconv.Itoa(top) + " must be within 0.." + strconv.Itoa(store.MaxUsageTop))
		}
	}
	c, err := s.store.ConstraintGet(ctx, req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	u, err := s.store.ConstraintUsage(ctx, store.ConstraintUsageParams{Name: c.Name, Top: top})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.GetConstraintResponse{Constraint: api.ConstraintProto(c), Usage: api.ConstraintUsageProto(c, u)}), nil
}

func (s *constraintService) DeleteConstraint(ctx context.Context, req *connect.Request[jqv1.DeleteConstraintRequest]) (*connect.Response[jqv1.DeleteConstraintResponse], error) {
	if err := validConstraintName(req.Msg.GetName()); err != nil {
		return nil, err
	}
	if err := s.engine.ConstraintDelete(ctx, req.Msg.GetName()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&jqv1.DeleteConstraintResponse{}), nil
}

// validConstraintName checks a name alone by queue.Constraint.Validate's rule, the one place it
// is written (the limit only makes the rest of the constraint valid).
func validConstraintName(name string) error {
	c := queue.Constraint{Name: name, Concurrency: 1}
	return c.Validate()
}

// constraintWaiting says how a constraint holds back a due PENDING job: the first constraint by
// name that matches the job and whose key for it is at its limit now, described by
// queue.Constraint.Describe; "" when none does.
func constraintWaiting(ctx context.Context, r Reader, j *queue.Job, now time.Time) (string, error) {
	set, err := r.ConstraintSet(ctx)
	if err != nil {
		return "", err
	}
	keys := map[string]string{} // constraint → the job's key, for the constraints that match it
	keyer := queue.NewKeyer(set.Constraints)
	for _, e := range keyer.Entries(j) {
		name, key := queue.SplitLimitEntry(e)
		keys[name] = key
	}
	for _, c := range set.Constraints { // by name
		key, ok := keys[c.Name]
		if !ok {
			continue
		}
		u, err := r.ConstraintUsage(ctx, store.ConstraintUsageParams{Name: c.Name, Keys: []string{key}})
		if errors.Is(err, queue.ErrConstraintNotFound) {
			continue // deleted since the set was read
		}
		if err != nil {
			return "", err
		}
		// A key the store does not report has nothing running and a full bucket.
		ku := queue.ConstraintKeyUsage{Key: key, Tokens: float64(c.Rate.BucketSize())}
		for _, k := range u.Top {
			if k.Key == key {
				ku = k
				break
			}
		}
		ahead := 0
		if !c.Rate.IsZero() && (c.Concurrency == 0 || ku.Running < c.Concurrency) {
			if ahead, err = keyJobsAhead(ctx, r, keyer, j, queue.LimitEntry(c.Name, key), now); err != nil {
				return "", err
			}
		}
		if d := c.Describe(key, ku, ahead); d != "" {
			return d, nil
		}
	}
	return "", nil
}

// aheadScan bounds the PENDING jobs of a queue keyJobsAhead reads: past it, the count (and the
// estimate) is a lower bound.
const aheadScan = store.MaxListLimit

// keyJobsAhead counts the due PENDING jobs of j's queue under the same constraint entry that start
// before j (queue.StartsBefore): under a rate limit each takes a token before j does, so every
// waiting job of a key gets its own estimate rather than the key's next start.
func keyJobsAhead(ctx context.Context, r Reader, keyer *queue.Keyer, j *queue.Job, entry string, now time.Time) (int, error) {
	res, err := r.JobList(ctx, store.JobListParams{Queue: j.Queue, States: []queue.State{queue.StatePending}, Ascending: true,
		Limit: aheadScan})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range res.Jobs {
		if o.ID == j.ID || o.NotBefore.After(now) || !queue.StartsBefore(o, j) || !slices.Contains(keyer.Entries(o), entry) {
			continue
		}
		n++
	}
	return n, nil
}
