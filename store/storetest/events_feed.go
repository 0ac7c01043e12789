package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// eventFeedSuite checks store.EventFeed: a reader that starts now sees every later event of its
// queue (and only those, or only its principal's) in the order they were recorded, each once,
// across reads cut by the limit. Subtests run in parallel, each on a queue of its own: other
// tests' events pass through the same ids and are filtered out.
func eventFeedSuite(t *testing.T, f Factory) {
	newStore := sharedStore(f)
	feed := func(b *bundle) store.EventFeed { return as[store.EventFeed](b.t, b.s) }
	// start is a reader's first read.
	start := func(b *bundle, p store.EventsReadParams) store.EventsReadParams {
		b.t.Helper()
		p.FromNow = true
		r, err := feed(b).EventsRead(b.ctx, p)
		require.NoError(b.t, err)
		require.Empty(b.t, r.Events)
		return r.Next(p)
	}
	// read reads until n events came (a horizon may wait on other tests' transactions), and once
	// more to show that nothing else comes.
	read := func(b *bundle, p *store.EventsReadParams, n int) []queue.Event {
		b.t.Helper()
		var got []queue.Event
		require.Eventually(b.t, func() bool {
			r, err := feed(b).EventsRead(b.ctx, *p)
			require.NoError(b.t, err)
			require.LessOrEqual(b.t, len(r.Events), p.Limit+1, "a read carries at most its limit (a row's two transitions together)")
			got = append(got, r.Events...)
			*p = r.Next(*p)
			return len(got) >= n
		}, 10*time.Second, 5*time.Millisecond, "events read: %v", got)
		r, err := feed(b).EventsRead(b.ctx, *p)
		require.NoError(b.t, err)
		require.Empty(b.t, r.Events, "an event read twice, or one not asked for")
		*p = r.Next(*p)
		return got
	}
	type jobSeq struct {
		job string
		seq int64
		to  queue.State
	}
	keys := func(evs []queue.Event) []jobSeq {
		out := make([]jobSeq, len(evs))
		for i, e := range evs {
			out[i] = jobSeq{e.JobID, e.Seq, e.To}
		}
		return out
	}

	t.Run("FromNowInOrderOnce", func(t *testing.T) {
		b := setup(t, newStore)
		before := b.insertOne(b.job("feed"))
		p := start(b, store.EventsReadParams{Queue: b.queue, Limit: 100})
		other := b.job("feed") // another queue's events are not this reader's
		other.Queue = b.newQueue(store.QueueCreateParams{}).Name
		b.insert(other)

		j1 := b.insertOne(b.job("feed"))
		j2 := b.insertOne(b.job("feed"))
		b.move(before, queue.StateAssigned, store.JobTransitionParams{Reason: queue.ReasonAssigned, WorkerID: "w-feed"})
		got := read(b, &p, 3)
		require.Equal(t, []jobSeq{{j1.ID, 1, queue.StatePending}, {j2.ID, 1, queue.StatePending},
			{before.ID, 2, queue.StateAssigned}}, keys(got), "the events after the start, in order")
		require.Equal(t, b.events(before.ID)[1], got[2], "every field as JobEvents has it")
		require.Equal(t, "w-feed", got[2].WorkerID)
	})

	t.Run("LimitCutsTheRange", func(t *testing.T) {
		b := setup(t, newStore)
		p := start(b, store.EventsReadParams{Queue: b.queue, Limit: 2})
		var want []jobSeq
		for range 5 {
			want = append(want, jobSeq{b.insertOne(b.job("feed")).ID, 1, queue.StatePending})
		}
		require.Equal(t, want, keys(read(b, &p, 5)))
	})

	t.Run("Principal", func(t *testing.T) {
		b := setup(t, newStore)
		p := start(b, store.EventsReadParams{Queue: b.queue, Principal: "alice", Limit: 100})
		mine := b.job("feed")
		mine.Principal = "alice"
		theirs := b.job("feed")
		theirs.Principal = "bob"
		b.insert(theirs)
		j := b.insertOne(mine)
		b.insert(b.job("feed")) // no principal (authentication off)
		require.Equal(t, []jobSeq{{j.ID, 1, queue.StatePending}}, keys(read(b, &p, 1)))
	})

	t.Run("EveryQueue", func(t *testing.T) {
		b := setup(t, newStore)
		p := start(b, store.EventsReadParams{Limit: store.MaxEventsRead})
		j := b.insertOne(b.job("feed"))
		require.Eventually(t, func() bool {
			r, err := feed(b).EventsRead(b.ctx, p)
			require.NoError(t, err)
			p = r.Next(p)
			for _, e := range r.Events {
				if e.JobID == j.ID {
					return true
				}
			}
			return false
		}, 10*time.Second, 5*time.Millisecond, "an empty queue filter reads every queue")
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		b := setup(t, newStore)
		for _, p := range []store.EventsReadParams{{Limit: 0}, {Limit: store.MaxEventsRead + 1}, {Limit: 1, Queue: "Bad Name!"}} {
			_, err := feed(b).EventsRead(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, "%+v", p)
		}
	})
}
