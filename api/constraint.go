package api

import (
	"math"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/queue"
)

// Conversions of a constraint (docs/flow-control.md) between the domain and the wire,
// shared by the server and the admin CLI.

// ConstraintProto is the API's record of a constraint.
func ConstraintProto(c *queue.Constraint) *jqv1.Constraint {
	p := &jqv1.Constraint{
		Name:        c.Name,
		Match:       &jqv1.JobMatcher{Queue: c.Match.Queue, Type: c.Match.Type, Labels: c.Match.Labels},
		Key:         c.Key,
		Concurrency: clampInt32(c.Concurrency),
		CreatedAt:   Timestamp(c.CreatedAt),
		UpdatedAt:   Timestamp(c.UpdatedAt),
	}
	if !c.Rate.IsZero() {
		p.Rate = RateProto(c.Rate)
	}
	return p
}

// RateProto is a rate limit on the wire; nil for none.
func RateProto(r queue.RateLimit) *jqv1.RateLimit {
	if r.IsZero() {
		return nil
	}
	return &jqv1.RateLimit{Limit: clampInt32(r.Limit), Interval: Duration(r.Interval), Burst: clampInt32(r.Burst)}
}

// ConstraintFromProto reads a constraint as a request describes it. A malformed interval is
// INVALID_ARGUMENT; every other rule is queue.Constraint.Validate's, which the caller applies.
func ConstraintFromProto(name string, m *jqv1.JobMatcher, key string, concurrency int32, rate *jqv1.RateLimit) (queue.Constraint, error) {
	c := queue.Constraint{
		Name:        name,
		Match:       queue.JobMatcher{Queue: m.GetQueue(), Type: m.GetType(), Labels: m.GetLabels()},
		Key:         key,
		Concurrency: int(concurrency),
	}
	if len(c.Match.Labels) == 0 {
		c.Match.Labels = nil
	}
	if rate != nil {
		c.Rate = queue.RateLimit{Limit: int(rate.GetLimit()), Burst: int(rate.GetBurst())}
		if d := rate.GetInterval(); d != nil {
			if err := d.CheckValid(); err != nil {
				return c, invalid("rate interval: not a valid duration")
			}
			c.Rate.Interval = d.AsDuration()
		}
	}
	return c, nil
}

// ConstraintFromRecord reads a constraint as the API returns it (the CLI's view).
func ConstraintFromRecord(p *jqv1.Constraint) *queue.Constraint {
	c := &queue.Constraint{
		Name:        p.GetName(),
		Match:       queue.JobMatcher{Queue: p.GetMatch().GetQueue(), Type: p.GetMatch().GetType(), Labels: p.GetMatch().GetLabels()},
		Key:         p.GetKey(),
		Concurrency: int(p.GetConcurrency()),
		CreatedAt:   timeOf(p.GetCreatedAt()),
		UpdatedAt:   timeOf(p.GetUpdatedAt()),
	}
	if r := p.GetRate(); r != nil {
		c.Rate = queue.RateLimit{Limit: int(r.GetLimit()), Interval: durationOf(r.GetInterval()), Burst: int(r.GetBurst())}
	}
	return c
}

// ConstraintUsageProto is a constraint's use on the wire. Tokens are reported for a rate limit
// only.
func ConstraintUsageProto(c *queue.Constraint, u *queue.ConstraintUsage) *jqv1.ConstraintUsage {
	p := &jqv1.ConstraintUsage{Running: clampInt32(u.Running), Keys: clampInt32(u.Keys)}
	for _, k := range u.Top {
		ku := &jqv1.ConstraintKeyUsage{Key: k.Key, Running: clampInt32(k.Running)}
		if !c.Rate.IsZero() {
			ku.Tokens = k.Tokens
		}
		p.Top = append(p.Top, ku)
	}
	return p
}

// clampInt32 narrows a count that the domain bounds far below 2^31 (queue.MaxConstraintLimit, a
// job count) without a silent wrap.
func clampInt32(n int) int32 {
	return int32(max(min(n, math.MaxInt32), math.MinInt32))
}
