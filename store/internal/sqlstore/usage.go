package sqlstore

import (
	"cmp"
	"slices"
	"time"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// UsageKeys are the keys ConstraintUsage reports, from the jobs running per key and the rate
// buckets in use (touched within the rate's refill time): p.Keys first, then the busiest others,
// most running first, then the keys with the fewest tokens left (key order on ties), p.Top of them
// at most. Without the buckets a rate-only constraint, whose jobs hold nothing once started, would
// show no key while its jobs wait for tokens.
func UsageKeys(p store.ConstraintUsageParams, running map[string]int, active map[string]queue.Bucket) []string {
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
