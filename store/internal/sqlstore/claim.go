package sqlstore

import (
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// ClaimStepKind is what one step of a weighted claim takes.
type ClaimStepKind int

// The steps of a weighted claim, in the order WeightedSteps runs them.
const (
	ClaimAged  ClaimStepKind = iota // the due jobs that have waited at least MaxWait, oldest due time first
	ClaimLevel                      // the due jobs of one priority level, FIFO
	ClaimRest                       // what is left of the batch, in dispatch order
)

// ClaimStep is one step of a weighted claim: at most Limit (> 0) jobs of its kind.
type ClaimStep struct {
	Kind     ClaimStepKind
	Priority int // ClaimLevel: the level
	Limit    int
}

// WeightedSteps runs a weighted claim's steps in the contract's order, each step seeing the jobs
// the steps before it assigned as taken: the aged jobs (with MaxWait), then each level's quota in
// the order of Levels — a level short of its quota leaves the rest to the following levels — then
// the rest of the batch in dispatch order. take claims one step's jobs and returns how many it
// took; a step with nothing left to take is not run. Both stores run their statements through it,
// so the order and the quotas' arithmetic are written once.
func WeightedSteps(p store.JobClaimParams, take func(ClaimStep) (int, error)) error {
	taken := 0
	run := func(s ClaimStep) error {
		if s.Limit <= 0 {
			return nil
		}
		n, err := take(s)
		taken += n
		return err
	}
	if p.MaxWait > 0 {
		if err := run(ClaimStep{Kind: ClaimAged, Limit: p.Limit}); err != nil {
			return err
		}
	}
	budget := 0 // the quotas so far, less what their levels took
	for _, l := range p.Levels {
		budget += l.Max
		before := taken
		if err := run(ClaimStep{Kind: ClaimLevel, Priority: l.Priority, Limit: min(budget, p.Limit-taken)}); err != nil {
			return err
		}
		budget -= taken - before
	}
	return run(ClaimStep{Kind: ClaimRest, Limit: p.Limit - taken})
}

// ConstraintClaimRounds and the candidates per round (ConstraintCandidates) bound a constrained claim's reading: each
// round reads up to Limit×2+16 due jobs it has not seen, past the keys blocked so far.
const ConstraintClaimRounds = 6

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
func ConstrainedSteps(p store.JobClaimParams, l *queue.Limiter, fetch func(st ClaimStep, blocked, seen []string, n int) ([]ClaimCandidate, error),
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
		err = WeightedSteps(p, step)
	} else {
		_, err = step(ClaimStep{Kind: ClaimRest, Limit: p.Limit})
	}
	return taken, keyed, err
}
