package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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

// constraintBatchRounds and the candidates per round bound a constrained claim's reading: each
// round reads up to Limit×2+16 due jobs it has not seen, past the keys blocked so far.
const (
	ConstraintClaimRounds = 6
)

// ConstraintCandidates is how many due jobs a constrained claim that still wants limit jobs reads
// in a round: as many, since every job read is locked (a write) and a constraint that does not
// bind admits them all; the jobs a round passes over are made up by the next rounds, which read
// past the entries blocked meanwhile.
func ConstraintCandidates(limit int) int { return limit }

// ClaimCandidate is one due job a constrained claim read.
type ClaimCandidate struct {
	ID string
	// Entries are the job's entries when Keyed (stored at the current generation); otherwise the
	// claim computes them from Job (queue, type, labels and, when a key reads it, payload).
	Entries []string
	Keyed   bool
	Job     *queue.Job
	// Ref is the store's own handle on the row read (Postgres: the ctid of the version locked).
	Ref any
	// Computed: the claim computed Entries (the job was not keyed at the current generation), so
	// they are to be stored.
	Computed bool
}

// ConstrainedSteps runs a constrained claim's decisions, the part both stores share: for each step
// of the claim (p.WeightedSteps; a plain claim is one ClaimRest step of p.Limit), up to
// ConstraintClaimRounds rounds of fetch — the step's due jobs in its order, past the blocked
// entries and the ids already seen, at most n — each candidate keyed (l.Entries) unless it is, and
// admitted or not by l, until the step has its jobs or no candidate is left. It returns the admitted
// candidates in the order taken, with their entries, and the candidates it keyed and did not admit
// (their entries to store, so later claims pass over them while their keys are blocked).
//
// The limiter may have been given only the rate buckets that can be out of tokens (written within
// their rate's TokenTime): before a round is decided, load reads the stored buckets of the
// round's entries the limiter has not read (Limiter.Unread; a missing one is full), so a claim
// reads the buckets of its candidates' keys, not those of every key that took a token lately.
func ConstrainedSteps(p JobClaimParams, l *queue.Limiter, fetch func(st ClaimStep, blocked, seen []string, n int) ([]ClaimCandidate, error),
	load func(entries []string) (map[string]queue.Bucket, error)) (taken, keyed []ClaimCandidate, err error) {
	var seen []string
	step := func(st ClaimStep) (int, error) {
		got := 0
		for round := 0; round < ConstraintClaimRounds && got < st.Limit; round++ {
			n := ConstraintCandidates(st.Limit - got)
			cands, err := fetch(st, l.Blocked(), seen, n)
			if err != nil {
				return got, err
			}
			var unread []string
			asked := map[string]bool{}
			for i := range cands {
				if !cands[i].Keyed {
					cands[i].Entries = l.Entries(cands[i].Job)
				}
				for _, e := range l.Unread(cands[i].Entries) {
					if !asked[e] {
						asked[e] = true
						unread = append(unread, e)
					}
				}
			}
			if len(unread) > 0 {
				bs, err := load(unread)
				if err != nil {
					return got, err
				}
				l.Load(unread, bs)
			}
			for _, c := range cands {
				if got == st.Limit {
					break // the rest stay as they are, unseen
				}
				seen = append(seen, c.ID)
				fresh := !c.Keyed
				if fresh {
					c.Keyed, c.Computed = true, true
				}
				c.Job = nil
				if l.Admit(c.Entries) {
					taken = append(taken, c)
					got++
				} else if fresh {
					keyed = append(keyed, c)
				}
			}
			if len(cands) < n {
				break // the step has no more due jobs
			}
		}
		return got, nil
	}
	if p.Weighted() {
		err = p.WeightedSteps(step)
	} else {
		_, err = step(ClaimStep{Kind: ClaimRest, Limit: p.Limit})
	}
	return taken, keyed, err
}

// UsageKeys are the keys ConstraintUsage reports, from the jobs running per key and the rate
// buckets in use (touched within the rate's refill time): p.Keys first, then the busiest others,
// most running first, then the keys with the fewest tokens left (key order on ties), p.Top of them
// at most. Without the buckets a rate-only constraint, whose jobs hold nothing once started, would
// show no key while its jobs wait for tokens.
func UsageKeys(p ConstraintUsageParams, running map[string]int, active map[string]queue.Bucket) []string {
	keys := slices.Clone(p.Keys)
	asked := map[string]bool{}
	for _, k := range p.Keys {
		asked[k] = true
	}
	var busy, rated []string
	for k := range running {
		if !asked[k] {
			busy = append(busy, k)
		}
	}
	for k := range active {
		if _, ok := running[k]; !ok && !asked[k] {
			rated = append(rated, k)
		}
	}
	slices.SortFunc(busy, func(a, b string) int {
		return cmp.Or(cmp.Compare(running[b], running[a]), cmp.Compare(a, b))
	})
	slices.SortFunc(rated, func(a, b string) int {
		return cmp.Or(cmp.Compare(active[a].Tokens, active[b].Tokens), cmp.Compare(a, b))
	})
	return append(keys, append(busy, rated...)[:min(len(busy)+len(rated), p.Top)]...)
}

// Usage assembles a constraint's usage from the jobs running per key, the rate buckets in use (see
// UsageKeys), the keys to report and their stored buckets, at now.
func Usage(c *queue.Constraint, running map[string]int, active map[string]queue.Bucket, keys []string, buckets map[string]queue.Bucket, now time.Time) *queue.ConstraintUsage {
	u := &queue.ConstraintUsage{Keys: len(running)}
	for k := range active {
		if _, ok := running[k]; !ok {
			u.Keys++
		}
	}
	for _, n := range running {
		u.Running += n
	}
	for _, k := range keys {
		ku := queue.ConstraintKeyUsage{Key: k, Running: running[k]}
		if !c.Rate.IsZero() {
			ku.Tokens = queue.TokensNow(c.Rate, buckets[k], now)
		}
		u.Top = append(u.Top, ku)
	}
	return u
}
