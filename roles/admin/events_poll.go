package admin

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/queue"
)

// followPostgres follows the events recorded in Postgres: those of a queue (or of all) from the
// server's WatchEvents stream; those of one job (--job), or of a queue from a server without that
// stream, by polling the API every --interval (see Help for what polling can see). The first
// poll's failure ends the command (a missing job or queue is exit 3); later ones are reported once
// on stderr and retried, so a server restart does not end the tail.
func (c *EventsTailCmd) followPostgres(re *runEnv, out *eventPrinter) error {
	if c.Job == "" {
		if streamed, err := c.followWatch(re, out); streamed {
			return err
		}
	}
	cl, err := re.Client()
	if err != nil {
		return err
	}
	p := newPoller(cl.API().Jobs, c.Queue, c.Job, re.globals.Timeout)
	// With --job the server's WatchJob stream says when the job changed: poll then, not only every
	// --interval (which stays as the fallback).
	wake := make(chan struct{}, 1)
	if c.Job != "" {
		wctx, stop := context.WithCancel(re.ctx)
		var wg sync.WaitGroup
		defer func() { stop(); wg.Wait() }()
		wg.Go(func() {
			_, _ = cl.Watch(wctx, c.Job, func(*queue.Job) {
				select {
				case wake <- struct{}{}:
				default:
				}
			})
		})
	}
	failing := false
	for first := true; ; first = false {
		evs, err := p.poll(re.ctx)
		for _, e := range evs {
			out.print(e)
		}
		if err == nil && re.ctx.Err() != nil {
			return nil
		}
		switch {
		case err != nil && re.ctx.Err() != nil:
			return nil
		case err != nil && first && c.Job != "":
			return named(err, "job", c.Job)
		case err != nil && first:
			return named(err, "queue", c.Queue)
		case err != nil:
			if !failing {
				out.notice("polling failed, retrying: %s", errorLine(err, re.globals))
			}
			failing = true
		case first:
			out.notice("following events through the API of %s every %s; Kafka would show them all (see --help) (Ctrl-C to stop)",
				re.globals.ServerAddr, c.Interval)
		default:
			if failing {
				out.notice("polling again")
			}
			failing = false
		}
		t := time.NewTimer(c.Interval)
		select {
		case <-re.ctx.Done():
			t.Stop()
			return nil
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// pollWindow is how many jobs each listing of a poll watches (ListJobs' largest page).
const pollWindow = maxPageSize

// activeStates are the states a job passes through while it is worked on.
var activeStates = []jqv1.JobState{jqv1.JobState_JOB_STATE_ASSIGNED, jqv1.JobState_JOB_STATE_RUNNING, jqv1.JobState_JOB_STATE_FAILED}

// poller finds new events through ListJobs and ListJobEvents. The API has no event feed, so it
// watches jobs: those in two windows (the newest jobs, the newest jobs being worked on) whose
// update time moved since the last poll have their events read again.
type poller struct {
	jobs    jqv1connect.JobServiceClient
	queue   string
	job     string // --job: only this job, read whole at every poll
	timeout time.Duration

	started bool
	since   time.Time // events of a job not watched before are new from this time on (server clock)
	watched map[string]*watch
	lastSeq int64 // --job
}

// watch is what is known of one job.
type watch struct {
	updated   time.Time // its update time at the last poll
	after     time.Time // until its events are first read: only those after this are new
	inclusive bool      // … or at this time
	seq       int64     // the last seq read; 0 before the first read
	active    bool      // not DONE or DEAD_LETTERED
}

func newPoller(jobs jqv1connect.JobServiceClient, queue, job string, timeout time.Duration) *poller {
	return &poller{jobs: jobs, queue: queue, job: job, timeout: timeout, watched: map[string]*watch{}}
}

// poll returns the events that are new since the previous poll, in time order (with an error, those
// it read before the error). The first poll of
// a queue returns nothing: it learns where each job stands. With --job the first poll returns the
// job's whole history.
func (p *poller) poll(ctx context.Context) ([]*jqv1.JobEvent, error) {
	if p.job != "" {
		evs, err := p.events(ctx, p.job)
		if err != nil {
			return nil, err
		}
		var out []*jqv1.JobEvent
		for _, e := range evs {
			if e.GetSeq() > p.lastSeq {
				out = append(out, e)
				p.lastSeq = e.GetSeq()
			}
		}
		return out, nil
	}
	current := map[string]*jqv1.Job{}
	for _, states := range [][]jqv1.JobState{nil, activeStates} {
		jobs, err := p.list(ctx, states)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			current[j.GetId()] = j
		}
	}
	if !p.started {
		p.started = true
		for id, j := range current {
			u := j.GetUpdatedAt().AsTime()
			p.watched[id] = &watch{updated: u, after: u, active: active(j)}
			if u.After(p.since) {
				p.since = u
			}
		}
		return nil, nil
	}
	// A job's update time is recorded once its events are read, so a poll that fails half-way
	// reads the rest again next time.
	type read struct {
		id      string
		updated time.Time
		active  bool
	}
	var stale []read
	for id, j := range current {
		u := j.GetUpdatedAt().AsTime()
		w := p.watched[id]
		if w == nil {
			w = &watch{after: p.since, inclusive: true}
			p.watched[id] = w
		}
		if w.updated.IsZero() || u.After(w.updated) {
			stale = append(stale, read{id, u, active(j)})
		} else {
			w.active = active(j)
		}
	}
	var gone []string
	for id, w := range p.watched {
		if _, ok := current[id]; !ok {
			if w.active { // it left both windows: read its last transitions once
				stale = append(stale, read{id, w.updated, false})
			}
			gone = append(gone, id)
		}
	}
	var out []*jqv1.JobEvent
	for _, r := range stale {
		evs, err := p.events(ctx, r.id)
		if errors.Is(err, queue.ErrJobNotFound) {
			continue // purged meanwhile
		}
		if err != nil {
			sortEvents(out)
			return out, err // what was read is printed; the rest is read again next time
		}
		w := p.watched[r.id]
		out = append(out, w.newer(evs)...)
		w.updated, w.active = r.updated, r.active
	}
	for _, id := range gone {
		delete(p.watched, id)
	}
	sortEvents(out)
	return out, nil
}

// newer returns the events not seen before and records the last seq.
func (w *watch) newer(evs []*jqv1.JobEvent) []*jqv1.JobEvent {
	var out []*jqv1.JobEvent
	known := w.seq
	for _, e := range evs {
		var isNew bool
		if known > 0 {
			isNew = e.GetSeq() > known
		} else {
			at := e.GetTimestamp().AsTime()
			isNew = at.After(w.after) || (w.inclusive && at.Equal(w.after))
		}
		if isNew {
			out = append(out, e)
		}
		w.seq = max(w.seq, e.GetSeq())
	}
	return out
}

func active(j *jqv1.Job) bool {
	s := j.GetState()
	return s != jqv1.JobState_JOB_STATE_DONE && s != jqv1.JobState_JOB_STATE_DEAD_LETTERED
}

func sortEvents(evs []*jqv1.JobEvent) {
	slices.SortStableFunc(evs, func(a, b *jqv1.JobEvent) int {
		return cmp.Or(a.GetTimestamp().AsTime().Compare(b.GetTimestamp().AsTime()),
			cmp.Compare(a.GetJobId(), b.GetJobId()), cmp.Compare(a.GetSeq(), b.GetSeq()))
	})
}

func (p *poller) list(ctx context.Context, states []jqv1.JobState) ([]*jqv1.Job, error) {
	resp, err := request(ctx, p.timeout, p.jobs.ListJobs, &jqv1.ListJobsRequest{Queue: p.queue, States: states, PageSize: pollWindow})
	return resp.GetJobs(), err
}

func (p *poller) events(ctx context.Context, id string) ([]*jqv1.JobEvent, error) {
	resp, err := request(ctx, p.timeout, p.jobs.ListJobEvents, &jqv1.ListJobEventsRequest{JobId: id})
	return resp.GetEvents(), err
}
