package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// scheduleSuite checks store.ScheduleStore. Its reconcile test owns every config-owned schedule
// of the store: no other test may create one in the same store.
func scheduleSuite(t *testing.T, f Factory) {
	newS := sharedStore(f)
	sched := func(b *bundle) store.ScheduleStore { return as[store.ScheduleStore](b.t, b.s) }
	params := func(b *bundle, name string, next time.Time) store.ScheduleParams {
		three := 3
		return store.ScheduleParams{
			Name: name, Cron: "0 3 * * *", TimeZone: "Europe/Berlin", Missed: queue.MissedSkip, Owner: queue.OwnerAPI,
			Template: queue.JobTemplate{Queue: b.queue, Type: "report", Payload: []byte(`{"k":1}`), Priority: 7,
				MaxRetries: &three, Timeout: 90 * time.Second, Labels: map[string]string{"team": "ops"}},
			NextFireAt: next,
		}
	}
	next := time.Date(2030, 1, 2, 2, 0, 0, 0, time.UTC)

	t.Run("CreateGetList", func(t *testing.T) {
		b := setup(t, newS)
		ss := sched(b)
		name := uniqueName("sc")
		created, err := ss.ScheduleCreate(b.ctx, params(b, name, next))
		require.NoError(t, err)
		require.Equal(t, name, created.Name)
		require.Equal(t, b.queue, created.Template.Queue)
		require.Equal(t, "report", created.Template.Type)
		require.Equal(t, []byte(`{"k":1}`), created.Template.Payload)
		require.Equal(t, 7, created.Template.Priority)
		require.Equal(t, 3, *created.Template.MaxRetries)
		require.Equal(t, 90*time.Second, created.Template.Timeout)
		require.Equal(t, map[string]string{"team": "ops"}, created.Template.Labels)
		require.Equal(t, "0 3 * * *", created.Cron)
		require.Equal(t, "Europe/Berlin", created.TimeZone)
		require.Equal(t, queue.MissedSkip, created.Missed)
		require.Equal(t, queue.OwnerAPI, created.Owner)
		require.True(t, next.Equal(created.NextFireAt))
		require.True(t, created.LastFireAt.IsZero())
		require.Empty(t, created.LastJobID)
		require.False(t, created.CreatedAt.IsZero())

		got, err := ss.ScheduleGet(b.ctx, name)
		require.NoError(t, err)
		require.Equal(t, created, got)

		_, err = ss.ScheduleCreate(b.ctx, params(b, name, next))
		require.ErrorIs(t, err, queue.ErrScheduleExists)
		_, err = ss.ScheduleGet(b.ctx, uniqueName("none"))
		require.ErrorIs(t, err, queue.ErrScheduleNotFound)

		list, err := ss.ScheduleList(b.ctx)
		require.NoError(t, err)
		found := false
		for i, s := range list {
			if i > 0 {
				require.Less(t, list[i-1].Name, s.Name)
			}
			found = found || s.Name == name
		}
		require.True(t, found)

		p := params(b, uniqueName("sc"), next)
		p.Template.MaxRetries, p.Template.Labels, p.Template.Payload = nil, nil, nil
		p.Missed, p.CatchUpMax = queue.MissedCatchUp, 4
		c, err := ss.ScheduleCreate(b.ctx, p)
		require.NoError(t, err)
		require.Nil(t, c.Template.MaxRetries)
		require.Equal(t, []byte{}, c.Template.Payload)
		require.Equal(t, queue.MissedCatchUp, c.Missed)
		require.Equal(t, 4, c.CatchUpMax)
	})

	t.Run("OverlapTTLKeepResult", func(t *testing.T) {
		b := setup(t, newS)
		ss := sched(b)
		p := params(b, uniqueName("sc"), next)
		c, err := ss.ScheduleCreate(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, queue.DefaultOverlap, c.Overlap, "unset: the default")
		require.Zero(t, c.Template.TTL)
		require.False(t, c.Template.KeepResult)

		p = params(b, uniqueName("sc"), next)
		p.Overlap, p.Template.TTL, p.Template.KeepResult = queue.OverlapBufferOne, 90*time.Minute, true
		c, err = ss.ScheduleCreate(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, queue.OverlapBufferOne, c.Overlap)
		require.Equal(t, 90*time.Minute, c.Template.TTL)
		require.True(t, c.Template.KeepResult)
		got, err := ss.ScheduleGet(b.ctx, p.Name)
		require.NoError(t, err)
		require.Equal(t, c, got)

		p.Overlap = "sometimes"
		p.Name = uniqueName("sc")
		_, err = ss.ScheduleCreate(b.ctx, p)
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	t.Run("Update", func(t *testing.T) {
		b := setup(t, newS)
		ss := sched(b)
		name := uniqueName("sc")
		_, err := ss.ScheduleCreate(b.ctx, params(b, name, next))
		require.NoError(t, err)
		ok, err := ss.ScheduleAdvance(b.ctx, store.ScheduleAdvanceParams{Name: name, From: next, Next: next.Add(24 * time.Hour),
			LastFireAt: next, LastOutcome: queue.FireFailed, LastError: "queue not found"})
		require.NoError(t, err)
		require.True(t, ok)
		fired := next.Add(24 * time.Hour)

		// The template and policies change; the spec does not: the next fire time and the last
		// fire stay.
		p := params(b, name, next.Add(time.Hour))
		p.Template.Type, p.Template.Priority, p.Template.Payload = "digest", 2, []byte(`{"k":2}`)
		p.Template.TTL, p.Template.KeepResult, p.Template.Labels = time.Hour, true, map[string]string{"team": "web"}
		p.Missed, p.CatchUpMax, p.Overlap = queue.MissedCatchUp, 5, queue.OverlapAllowAll
		s, err := ss.ScheduleUpdate(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, "digest", s.Template.Type)
		require.Equal(t, 2, s.Template.Priority)
		require.Equal(t, []byte(`{"k":2}`), s.Template.Payload)
		require.Equal(t, time.Hour, s.Template.TTL)
		require.True(t, s.Template.KeepResult)
		require.Equal(t, map[string]string{"team": "web"}, s.Template.Labels)
		require.Equal(t, queue.MissedCatchUp, s.Missed)
		require.Equal(t, 5, s.CatchUpMax)
		require.Equal(t, queue.OverlapAllowAll, s.Overlap)
		require.True(t, fired.Equal(s.NextFireAt), "same spec: the next fire time stays")
		require.True(t, next.Equal(s.LastFireAt))
		require.Equal(t, queue.FireFailed, s.LastOutcome)
		require.Equal(t, queue.OwnerAPI, s.Owner)
		got, err := ss.ScheduleGet(b.ctx, name)
		require.NoError(t, err)
		require.Equal(t, s, got)

		// A new spec takes the given next fire time.
		p.Cron = "0 4 * * *"
		s, err = ss.ScheduleUpdate(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, "0 4 * * *", s.Cron)
		require.True(t, next.Add(time.Hour).Equal(s.NextFireAt))

		// Pausing keeps the next fire time; resuming takes the given one.
		p.Paused, p.NextFireAt = true, next.Add(2*time.Hour)
		s, err = ss.ScheduleUpdate(b.ctx, p)
		require.NoError(t, err)
		require.True(t, s.Paused)
		require.True(t, next.Add(time.Hour).Equal(s.NextFireAt))
		p.Paused, p.NextFireAt = false, next.Add(3*time.Hour)
		s, err = ss.ScheduleUpdate(b.ctx, p)
		require.NoError(t, err)
		require.False(t, s.Paused)
		require.True(t, next.Add(3*time.Hour).Equal(s.NextFireAt))

		bad := p
		bad.Template.Priority = 10
		_, err = ss.ScheduleUpdate(b.ctx, bad)
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
		missing := p
		missing.Name = uniqueName("none")
		_, err = ss.ScheduleUpdate(b.ctx, missing)
		require.ErrorIs(t, err, queue.ErrScheduleNotFound)
		cfg := p
		cfg.Owner = queue.OwnerConfig
		_, err = ss.ScheduleUpdate(b.ctx, cfg)
		require.ErrorIs(t, err, queue.ErrScheduleOwnedByConfig, "another owner's schedule is not changed")
		got, err = ss.ScheduleGet(b.ctx, name)
		require.NoError(t, err)
		require.Equal(t, queue.OwnerAPI, got.Owner)
	})

	t.Run("CreateRefuses", func(t *testing.T) {
		b := setup(t, newS)
		ss := sched(b)
		for name, mut := range map[string]func(*store.ScheduleParams){
			"name":     func(p *store.ScheduleParams) { p.Name = "Bad Name" },
			"queue":    func(p *store.ScheduleParams) { p.Template.Queue = "" },
			"type":     func(p *store.ScheduleParams) { p.Template.Type = "" },
			"priority": func(p *store.ScheduleParams) { p.Template.Priority = 10 },
			"missed":   func(p *store.ScheduleParams) { p.Missed = "later" },
			"bound":    func(p *store.ScheduleParams) { p.CatchUpMax = 3 },
			"owner":    func(p *store.ScheduleParams) { p.Owner = "me" },
			"cron":     func(p *store.ScheduleParams) { p.Cron = "" },
		} {
			p := params(b, uniqueName("sc"), next)
			mut(&p)
			_, err := ss.ScheduleCreate(b.ctx, p)
			require.ErrorIs(t, err, queue.ErrInvalidArgument, name)
		}
	})

	t.Run("DeleteByOwner", func(t *testing.T) {
		b := setup(t, newS)
		ss := sched(b)
		name := uniqueName("sc")
		_, err := ss.ScheduleCreate(b.ctx, params(b, name, next))
		require.NoError(t, err)
		require.ErrorIs(t, ss.ScheduleDelete(b.ctx, store.ScheduleDeleteParams{Name: name, Owner: queue.OwnerConfig}),
			queue.ErrScheduleOwnedByConfig)
		require.NoError(t, ss.ScheduleDelete(b.ctx, store.ScheduleDeleteParams{Name: name, Owner: queue.OwnerAPI}))
		require.ErrorIs(t, ss.ScheduleDelete(b.ctx, store.ScheduleDeleteParams{Name: name, Owner: queue.OwnerAPI}),
			queue.ErrScheduleNotFound)
	})

	t.Run("PauseResume", func(t *testing.T) {
		b := setup(t, newS)
		ss := sched(b)
		name := uniqueName("sc")
		_, err := ss.ScheduleCreate(b.ctx, params(b, name, next))
		require.NoError(t, err)
		s, err := ss.ScheduleSetPaused(b.ctx, store.ScheduleSetPausedParams{Name: name, Paused: true, NextFireAt: next.Add(time.Hour)})
		require.NoError(t, err)
		require.True(t, s.Paused)
		require.True(t, next.Equal(s.NextFireAt), "pausing keeps the next fire time")
		later := next.Add(24 * time.Hour)
		s, err = ss.ScheduleSetPaused(b.ctx, store.ScheduleSetPausedParams{Name: name, Paused: false, NextFireAt: later})
		require.NoError(t, err)
		require.False(t, s.Paused)
		require.True(t, later.Equal(s.NextFireAt), "resuming sets it")
		_, err = ss.ScheduleSetPaused(b.ctx, store.ScheduleSetPausedParams{Name: uniqueName("none"), Paused: true})
		require.ErrorIs(t, err, queue.ErrScheduleNotFound)
	})

	t.Run("DueAndAdvance", func(t *testing.T) {
		b := setup(t, newS)
		ss := sched(b)
		due0, err := ss.ScheduleDue(b.ctx, 1000)
		require.NoError(t, err)
		now := due0.Now
		require.WithinDuration(t, time.Now(), now, time.Minute, "the store's clock")
		past := now.Add(-time.Hour).Truncate(time.Second)
		dueName, pausedName, futureName := uniqueName("sc"), uniqueName("sc"), uniqueName("sc")
		_, err = ss.ScheduleCreate(b.ctx, params(b, dueName, past))
		require.NoError(t, err)
		pp := params(b, pausedName, past)
		pp.Paused = true
		_, err = ss.ScheduleCreate(b.ctx, pp)
		require.NoError(t, err)
		_, err = ss.ScheduleCreate(b.ctx, params(b, futureName, now.Add(time.Hour)))
		require.NoError(t, err)

		res, err := ss.ScheduleDue(b.ctx, 1000)
		require.NoError(t, err)
		require.False(t, res.Earliest.After(past), "the earliest unpaused fire time")
		names := map[string]bool{}
		for i, s := range res.Due {
			names[s.Name] = true
			require.False(t, s.NextFireAt.After(res.Now))
			require.False(t, s.Paused)
			if i > 0 {
				require.False(t, s.NextFireAt.Before(res.Due[i-1].NextFireAt))
			}
		}
		require.True(t, names[dueName])
		require.False(t, names[pausedName])
		require.False(t, names[futureName])

		jobID := "7d0d7d3a-9a3c-4a1e-8f5e-0c3c2b1a0f00"
		adv := store.ScheduleAdvanceParams{Name: dueName, From: past, Next: past.Add(24 * time.Hour),
			LastFireAt: past, LastJobID: jobID, LastOutcome: queue.FireSubmitted}
		ok, err := ss.ScheduleAdvance(b.ctx, adv)
		require.NoError(t, err)
		require.True(t, ok)
		ok, err = ss.ScheduleAdvance(b.ctx, adv)
		require.NoError(t, err)
		require.False(t, ok, "the compare-and-set refuses a second advance from the same fire time")
		s, err := ss.ScheduleGet(b.ctx, dueName)
		require.NoError(t, err)
		require.True(t, past.Add(24*time.Hour).Equal(s.NextFireAt))
		require.True(t, past.Equal(s.LastFireAt))
		require.Equal(t, jobID, s.LastJobID)
		require.Equal(t, queue.FireSubmitted, s.LastOutcome)

		// Skipping only (no LastFireAt) keeps the last fire; a zero Next means never again.
		ok, err = ss.ScheduleAdvance(b.ctx, store.ScheduleAdvanceParams{Name: dueName, From: s.NextFireAt})
		require.NoError(t, err)
		require.True(t, ok)
		s, err = ss.ScheduleGet(b.ctx, dueName)
		require.NoError(t, err)
		require.True(t, s.NextFireAt.IsZero())
		require.Equal(t, jobID, s.LastJobID)

		_, err = ss.ScheduleDue(b.ctx, 0)
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
	})

	// ScheduleFire: the fires of many schedules in one call, each only while its schedule is still
	// due as read; a deleted, paused or already advanced schedule gets no job; a refused job fails
	// the whole batch and writes nothing.
	t.Run("Fire", func(t *testing.T) {
		b := setup(t, newS)
		ss := sched(b)
		due0, err := ss.ScheduleDue(b.ctx, 1)
		require.NoError(t, err)
		past := due0.Now.Add(-time.Hour).Truncate(time.Second)
		names := make([]string, 5)
		for i := range names {
			names[i] = uniqueName("sc")
			_, err := ss.ScheduleCreate(b.ctx, params(b, names[i], past))
			require.NoError(t, err)
		}
		job := func(name string, at time.Time) store.JobInsertParams {
			return store.JobParamsOf(queue.JobTemplate{Queue: b.queue, Type: "report"},
				"schedule:"+name+":"+at.Format(time.RFC3339), at)
		}
		fireOf := func(name string, ats ...time.Time) store.ScheduleFireParams {
			p := store.ScheduleFireParams{ScheduleAdvanceParams: store.ScheduleAdvanceParams{
				Name: name, From: past, Next: past.Add(24 * time.Hour), LastFireAt: ats[len(ats)-1]}}
			for _, at := range ats {
				p.Jobs = append(p.Jobs, job(name, at))
			}
			return p
		}
		// Before the batch: one deleted, one paused, one advanced by "another replica".
		require.NoError(t, ss.ScheduleDelete(b.ctx, store.ScheduleDeleteParams{Name: names[2], Owner: queue.OwnerAPI}))
		_, err = ss.ScheduleSetPaused(b.ctx, store.ScheduleSetPausedParams{Name: names[3], Paused: true})
		require.NoError(t, err)
		ok, err := ss.ScheduleAdvance(b.ctx, store.ScheduleAdvanceParams{Name: names[4], From: past, Next: past.Add(time.Hour)})
		require.NoError(t, err)
		require.True(t, ok)

		earlier := past.Add(-time.Minute)
		ps := []store.ScheduleFireParams{fireOf(names[0], earlier, past), fireOf(names[1], past), fireOf(names[2], past),
			fireOf(names[3], past), fireOf(names[4], past)}
		res, err := ss.ScheduleFire(b.ctx, ps)
		require.NoError(t, err)
		require.Len(t, res, len(ps))
		require.True(t, res[0].Fired)
		require.Len(t, res[0].Jobs, 2)
		require.True(t, res[1].Fired)
		require.Len(t, res[1].Jobs, 1)
		for i := 2; i < 5; i++ {
			require.False(t, res[i].Fired, names[i])
			require.Empty(t, res[i].Jobs)
		}
		for _, r := range res[:2] {
			for _, jr := range r.Jobs {
				require.False(t, jr.Existing)
				require.Equal(t, queue.StatePending, b.get(jr.Job.ID).State)
			}
		}
		require.True(t, earlier.Equal(res[0].Jobs[0].Job.NotBefore), "each job due at its fire time")
		s0, err := ss.ScheduleGet(b.ctx, names[0])
		require.NoError(t, err)
		require.True(t, past.Add(24*time.Hour).Equal(s0.NextFireAt))
		require.True(t, past.Equal(s0.LastFireAt))
		require.Equal(t, res[0].Jobs[1].Job.ID, s0.LastJobID, "the last fire's job")
		require.Equal(t, queue.FireSubmitted, s0.LastOutcome)
		// Nothing was inserted for the schedules that were not due: their keys are free.
		for _, n := range names[2:] {
			r := b.insert(job(n, past))
			require.False(t, r[0].Existing, n)
		}
		s3, err := ss.ScheduleGet(b.ctx, names[3])
		require.NoError(t, err)
		require.True(t, past.Equal(s3.NextFireAt), "a paused schedule is not advanced")

		// The same batch again: every schedule has moved on, nothing is written.
		res, err = ss.ScheduleFire(b.ctx, ps[:2])
		require.NoError(t, err)
		require.False(t, res[0].Fired)
		require.False(t, res[1].Fired)

		// A job the store refuses fails the batch; the other schedule is not advanced either.
		a, c := uniqueName("sc"), uniqueName("sc")
		for _, n := range []string{a, c} {
			_, err := ss.ScheduleCreate(b.ctx, params(b, n, past))
			require.NoError(t, err)
		}
		bad := fireOf(c, past)
		bad.Jobs[0].Queue = uniqueName("gone")
		_, err = ss.ScheduleFire(b.ctx, []store.ScheduleFireParams{fireOf(a, past), bad})
		require.ErrorIs(t, err, queue.ErrQueueNotFound)
		sa, err := ss.ScheduleGet(b.ctx, a)
		require.NoError(t, err)
		require.True(t, past.Equal(sa.NextFireAt), "nothing written")
		// A refused fire is recorded without jobs.
		bad.Jobs, bad.LastOutcome, bad.LastError = nil, queue.FireFailed, "queue not found"
		res, err = ss.ScheduleFire(b.ctx, []store.ScheduleFireParams{fireOf(a, past), bad})
		require.NoError(t, err)
		require.True(t, res[0].Fired)
		require.True(t, res[1].Fired)
		sc, err := ss.ScheduleGet(b.ctx, c)
		require.NoError(t, err)
		require.Equal(t, queue.FireFailed, sc.LastOutcome)
		require.Equal(t, "queue not found", sc.LastError)
		require.Empty(t, sc.LastJobID)

		_, err = ss.ScheduleFire(b.ctx, []store.ScheduleFireParams{fireOf(a, past), fireOf(a, past)})
		require.ErrorIs(t, err, queue.ErrInvalidArgument, "a schedule twice in a batch")
	})

	t.Run("Reconcile", func(t *testing.T) {
		b := setup(t, newS)
		ss := sched(b)
		cfg := func(name string, at time.Time) store.ScheduleParams {
			p := params(b, name, at)
			p.Owner = queue.OwnerConfig
			return p
		}
		a, c, apiOwned := uniqueName("cfg"), uniqueName("cfg"), uniqueName("api")
		_, err := ss.ScheduleCreate(b.ctx, params(b, apiOwned, next))
		require.NoError(t, err)

		res, err := ss.ScheduleReconcile(b.ctx, store.ScheduleReconcileParams{Schedules: []store.ScheduleParams{cfg(a, next), cfg(c, next)}})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{a, c}, res.Created)

		// Unchanged spec: the next fire time stays (a restart loses nothing) and pause survives.
		_, err = ss.ScheduleSetPaused(b.ctx, store.ScheduleSetPausedParams{Name: c, Paused: true})
		require.NoError(t, err)
		changed := cfg(a, next.Add(time.Hour))
		changed.Template.Priority = 2
		changed.Overlap, changed.Template.TTL, changed.Template.KeepResult = queue.OverlapAllowAll, time.Minute, true
		res, err = ss.ScheduleReconcile(b.ctx, store.ScheduleReconcileParams{Schedules: []store.ScheduleParams{changed, cfg(c, next.Add(time.Hour))}})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{a, c}, res.Updated)
		s, err := ss.ScheduleGet(b.ctx, a)
		require.NoError(t, err)
		require.Equal(t, 2, s.Template.Priority)
		require.Equal(t, queue.OverlapAllowAll, s.Overlap)
		require.Equal(t, time.Minute, s.Template.TTL)
		require.True(t, s.Template.KeepResult)
		require.True(t, next.Equal(s.NextFireAt))
		s, err = ss.ScheduleGet(b.ctx, c)
		require.NoError(t, err)
		require.True(t, s.Paused)

		// A changed spec takes the new next fire time; an API-owned name is taken over; a
		// config-owned schedule left out of the file is deleted; other API-owned ones stay.
		respec := cfg(a, next.Add(2*time.Hour))
		respec.Cron = "0 4 * * *"
		res, err = ss.ScheduleReconcile(b.ctx, store.ScheduleReconcileParams{Schedules: []store.ScheduleParams{respec, cfg(apiOwned, next.Add(3*time.Hour))}})
		require.NoError(t, err)
		require.Equal(t, []string{c}, res.Deleted)
		require.Equal(t, []string{apiOwned}, res.TakenOver)
		s, err = ss.ScheduleGet(b.ctx, a)
		require.NoError(t, err)
		require.Equal(t, "0 4 * * *", s.Cron)
		require.True(t, next.Add(2*time.Hour).Equal(s.NextFireAt))
		s, err = ss.ScheduleGet(b.ctx, apiOwned)
		require.NoError(t, err)
		require.Equal(t, queue.OwnerConfig, s.Owner)
		require.True(t, next.Add(3*time.Hour).Equal(s.NextFireAt))
		_, err = ss.ScheduleGet(b.ctx, c)
		require.ErrorIs(t, err, queue.ErrScheduleNotFound)

		_, err = ss.ScheduleReconcile(b.ctx, store.ScheduleReconcileParams{Schedules: []store.ScheduleParams{cfg(a, next), cfg(a, next)}})
		require.ErrorIs(t, err, queue.ErrInvalidArgument)
		res, err = ss.ScheduleReconcile(b.ctx, store.ScheduleReconcileParams{})
		require.NoError(t, err)
		require.ElementsMatch(t, []string{a, apiOwned}, res.Deleted)
	})
}
