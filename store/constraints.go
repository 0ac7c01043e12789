package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
)

// ConstraintStore holds the constraints (docs/flow-control.md) and runs the constrained
// claim. The store computes no rule: which jobs a constraint selects, their keys and whether a
// start is allowed are decided by queue.Limiter; the store gathers what it reads (the constraints,
// the jobs running per entry, the rate buckets) under a lock that makes the decision and its writes
// one step for every replica, and writes what it decided. Every implementation passes
// storetest.RunConstraintStore.
//
// Jobs keep the entries (queue.LimitEntry) they count against with the constraint set's generation
// they were computed at; the claim computes them again for a job whose generation is not the
// current one (a job submitted before a constraint changed). A job counts against its entries'
// concurrency from its assignment until it leaves ASSIGNED and RUNNING, whoever moves it: a report,
// the reaper, a cancel.
type ConstraintStore interface {
	// ConstraintCreate creates a constraint (validated with queue.Constraint.Validate), or with
	// p.Replace replaces the one of that name (its buckets are kept when its rate is unchanged).
	// It starts a new generation. Errors: ErrInvalidArgument, ErrConstraintExists,
	// ErrLimitReached (queue.MaxConstraints).
	ConstraintCreate(ctx context.Context, p ConstraintCreateParams) (*queue.Constraint, error)
	// ConstraintGet returns one constraint. Errors: ErrConstraintNotFound.
	ConstraintGet(ctx context.Context, name string) (*queue.Constraint, error)
	// ConstraintSet returns the constraints in force with their generation.
	ConstraintSet(ctx context.Context) (*queue.ConstraintSet, error)
	// ConstraintDelete deletes a constraint and its rate buckets; it starts a new generation. Jobs
	// running under it stop counting at once. Errors: ErrConstraintNotFound.
	ConstraintDelete(ctx context.Context, name string) error
	// ConstraintUsage reports a constraint's current use: its running jobs, and for the keys in
	// p.Keys and then the p.Top busiest keys (at most MaxUsageTop) their running jobs and rate
	// tokens. Errors: ErrConstraintNotFound.
	ConstraintUsage(ctx context.Context, p ConstraintUsageParams) (*queue.ConstraintUsage, error)
	// JobClaimConstrained is JobClaim with the constraints in force: it takes the due jobs of
	// p.Queue in JobClaim's order (with p.Levels and p.MaxWait, the weighted claim's steps) that
	// queue.Limiter admits, and passes over the others, which stay PENDING untouched (no attempt,
	// no event): a job held by one key's limit never holds back the jobs of other keys behind it.
	// Claims that share a constraint are serialized across replicas; claims of queues no
	// constraint applies to are not, and run as JobClaim does. Errors: ErrInvalidArgument.
	JobClaimConstrained(ctx context.Context, p JobClaimParams) (*ConstrainedClaim, error)
	// ConstraintBucketsPrune deletes up to p.Limit rate buckets that have refilled to full: of each
	// constraint in p.Refill, those last written at least its refill time ago by the store's clock.
	// A full bucket and no row are the same to the limiter, so this changes no decision; without it
	// a bucket row would stay for every key ever seen. It returns how many it deleted. Errors:
	// ErrInvalidArgument (p.Limit out of 1..MaxBucketsPrune).
	ConstraintBucketsPrune(ctx context.Context, p ConstraintBucketsPruneParams) (int64, error)
}

// MaxBucketsPrune bounds one ConstraintBucketsPrune.
const MaxBucketsPrune = 10_000

// ConstraintBucketsPruneParams selects the buckets ConstraintBucketsPrune deletes.
type ConstraintBucketsPruneParams struct {
	// Refill is, by constraint name, the time after which a bucket last written is full again.
	Refill map[string]time.Duration
	Limit  int
}

// BucketsPruneParams returns the prune of the rate buckets of the constraints of set, up to limit:
// each bucket once its rate's refill time (queue.RateLimit.Refill) and a millisecond passed, as
// the claim reads them.
func BucketsPruneParams(set *queue.ConstraintSet, limit int) ConstraintBucketsPruneParams {
	p := ConstraintBucketsPruneParams{Refill: map[string]time.Duration{}, Limit: limit}
	for _, c := range set.Constraints {
		if !c.Rate.IsZero() {
			p.Refill[c.Name] = c.Rate.Refill() + time.Millisecond
		}
	}
	return p
}

// Validate checks p.
func (p ConstraintBucketsPruneParams) Validate() error {
	if p.Limit < 1 || p.Limit > MaxBucketsPrune {
		return invalid("buckets prune limit must be 1..%d, got %d", MaxBucketsPrune, p.Limit)
	}
	return nil
}

// ConstraintCreateParams creates or replaces a constraint.
type ConstraintCreateParams struct {
	Constraint queue.Constraint
	Replace    bool
}

// MaxUsageTop bounds ConstraintUsageParams.Top and Keys.
const MaxUsageTop = 100

// ConstraintUsageParams asks for a constraint's use.
type ConstraintUsageParams struct {
	Name string
	Keys []string // keys to report whatever their use (a job's own, for its status)
	Top  int      // then up to this many of the busiest keys; 0..MaxUsageTop
}

// Validate checks the bounds of Top and Keys. Errors: ErrInvalidArgument.
func (p ConstraintUsageParams) Validate() error {
	if p.Top < 0 || p.Top > MaxUsageTop || len(p.Keys) > MaxUsageTop {
		return fmt.Errorf("%w: usage: %d keys and top %d: each within 0..%d", queue.ErrInvalidArgument, len(p.Keys), p.Top, MaxUsageTop)
	}
	return nil
}

// ConstrainedClaim is the outcome of JobClaimConstrained.
type ConstrainedClaim struct {
	Jobs []*queue.Job // assigned, as JobClaim returns them
	// Throttled counts, per constraint, the due jobs it held back in this claim.
	Throttled map[string]int
	// RetryAt is when a rate limit that held a job back has a token again (zero: none did): the
	// session claims again then rather than at its next poll.
	RetryAt time.Time
	// Gen is the constraint set's generation the claim ran with.
	Gen int64
}
