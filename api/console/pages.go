package console

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// pageSize is how many jobs a list page shows.
const pageSize = 50

// overviewData is the overview page: health, workers and every queue's counts.
type overviewData struct {
	Status    *jqv1.GetStatusResponse
	StatusErr string
	Queues    []queueRow
	QueuesErr string
}

type queueRow struct {
	Queue *jqv1.Queue
	Stats *jqv1.QueueStats
	Err   string
}

// statsConcurrency bounds the per-queue stats calls of one overview.
const statsConcurrency = 4

func (c *Console) overview(w http.ResponseWriter, r *http.Request, u *user) {
	ctx, cancel := u.ctx(r)
	defer cancel()
	var d overviewData
	var wg sync.WaitGroup
	wg.Go(func() {
		// Without the depth of every queue: the rows below count each queue with GetQueueStats.
		st, err := c.api.admin.GetStatus(ctx, connect.NewRequest(&jqv1.GetStatusRequest{OmitQueueDepth: true}))
		if err != nil {
			d.StatusErr = errorLine(err)
			return
		}
		d.Status = st.Msg
	})
	qs, err := c.api.queues.ListQueues(ctx, connect.NewRequest(&jqv1.ListQueuesRequest{}))
	if err != nil {
		d.QueuesErr = errorLine(err)
	} else {
		d.Queues = make([]queueRow, len(qs.Msg.GetQueues()))
		sem := make(chan struct{}, statsConcurrency)
		for i, q := range qs.Msg.GetQueues() {
			d.Queues[i].Queue = q
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				st, err := c.api.queues.GetQueueStats(ctx, connect.NewRequest(&jqv1.GetQueueStatsRequest{Name: q.GetName()}))
				if err != nil {
					d.Queues[i].Err = errorLine(err)
					return
				}
				d.Queues[i].Stats = st.Msg.GetStats()
			})
		}
	}
	wg.Wait()
	if d.Status == nil && d.Queues == nil && d.QueuesErr != "" {
		c.fail(w, r, u, "Overview", err)
		return
	}
	c.render(w, r, u, http.StatusOK, "overview", view{Title: "Overview", Nav: "overview", Live: true, Data: &d})
}

// queueData is one queue's page: settings, counts and its next jobs in dispatch order.
type queueData struct {
	Queue     *jqv1.Queue
	Form      queueForm
	Stats     *jqv1.QueueStats
	StatsErr  string
	Next      []*jqv1.Job
	NextErr   string
	Truncated bool
}

// nextJobs is how many of a queue's next jobs its page shows.
const nextJobs = 20

func (c *Console) queuePage(w http.ResponseWriter, r *http.Request, u *user) {
	ctx, cancel := u.ctx(r)
	defer cancel()
	name := r.PathValue("name")
	q, err := c.api.queues.GetQueue(ctx, connect.NewRequest(&jqv1.GetQueueRequest{Name: name}))
	if err != nil {
		c.fail(w, r, u, "Queue", err)
		return
	}
	d := queueData{Queue: q.Msg.GetQueue(), Form: queueFormOf(q.Msg.GetQueue())}
	var wg sync.WaitGroup
	wg.Go(func() {
		st, err := c.api.queues.GetQueueStats(ctx, connect.NewRequest(&jqv1.GetQueueStatsRequest{Name: name}))
		if err != nil {
			d.StatsErr = errorLine(err)
			return
		}
		d.Stats = st.Msg.GetStats()
	})
	wg.Go(func() {
		pk, err := c.api.admin.PeekQueue(ctx, connect.NewRequest(&jqv1.PeekQueueRequest{Queue: name, Limit: nextJobs}))
		if err != nil {
			d.NextErr = errorLine(err)
			return
		}
		d.Next, d.Truncated = pk.Msg.GetJobs(), pk.Msg.GetTruncated()
	})
	wg.Wait()
	c.render(w, r, u, http.StatusOK, "queue", view{Title: "Queue " + name, Nav: "queues", Live: true, Data: &d})
}

// jobFilter is a job list's filters, as the list page's form and URL carry them.
type jobFilter struct {
	Queue string
	State string // a JobState name without its prefix ("PENDING"); "" any
	Label string // "k=v[,k=v]"
	Type  string
	// Time bounds as the form sends them: UTC, "2006-01-02T15:04" (datetime-local) or RFC 3339.
	CreatedFrom, CreatedTo, CompletedFrom, CompletedTo string
	Scheduled                                          bool   // PENDING and not yet due (/scheduled)
	Page                                               string // the API's page token
}

func filterOf(form url.Values) jobFilter {
	get := func(k string) string { return strings.TrimSpace(form.Get(k)) }
	return jobFilter{
		Queue: get("queue"), State: get("state"), Label: get("label"), Type: get("type"),
		CreatedFrom: get("created_from"), CreatedTo: get("created_to"),
		CompletedFrom: get("completed_from"), CompletedTo: get("completed_to"),
		Scheduled: get("scheduled") == "1", Page: form.Get("page"),
	}
}

// Query is the filter as a URL query, without the page.
func (f jobFilter) Query() string { return f.query("") }

// Link is the link to the filter's page of token ("": the first page). It is a URL of its own
// making (url.Values.Encode), so the template may use it as a whole href.
func (f jobFilter) Link(token string) template.URL { return template.URL("?" + f.query(token)) } //nolint:gosec // encoded here

// Fields are the filter's fields by form name, for the hidden inputs of a bulk action's form: the
// action must act on exactly what the page lists.
func (f jobFilter) Fields() map[string]string {
	m := map[string]string{
		"queue": f.Queue, "state": f.State, "label": f.Label, "type": f.Type,
		"created_from": f.CreatedFrom, "created_to": f.CreatedTo,
		"completed_from": f.CompletedFrom, "completed_to": f.CompletedTo,
	}
	if f.Scheduled {
		m["scheduled"] = "1"
	}
	return m
}

// Narrowed says whether a filter beyond queue and state is set (dead letters are purged by queue
// only).
func (f jobFilter) Narrowed() bool {
	return f.Label != "" || f.Type != "" || f.CreatedFrom != "" || f.CreatedTo != "" || f.CompletedFrom != "" || f.CompletedTo != ""
}

func (f jobFilter) query(page string) string {
	v := url.Values{}
	for k, s := range f.Fields() {
		if s != "" {
			v.Set(k, s)
		}
	}
	if page != "" {
		v.Set("page", page)
	}
	return v.Encode()
}

var errBadFilter = errors.New("bad filter")

// formTimeLayouts are the time forms a filter accepts, all in UTC unless they say otherwise.
var formTimeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano, "2006-01-02"}

func formTime(name, s string) (*timestamppb.Timestamp, error) {
	if s == "" {
		return nil, nil
	}
	for _, layout := range formTimeLayouts {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return timestamppb.New(t), nil
		}
	}
	return nil, fmt.Errorf("%w: %s %q: want a UTC time such as 2026-01-02T15:04", errBadFilter, name, oneLine(s, 40))
}

// request is the filter as a ListJobs request.
func (f jobFilter) request(size int32) (*jqv1.ListJobsRequest, error) {
	req := &jqv1.ListJobsRequest{Queue: f.Queue, PageSize: size, PageToken: f.Page, Type: f.Type, Scheduled: f.Scheduled}
	if f.State != "" {
		st, ok := jqv1.JobState_value["JOB_STATE_"+strings.ToUpper(f.State)]
		if !ok || st == 0 {
			return nil, fmt.Errorf("%w: state %q: want one of PENDING, ASSIGNED, RUNNING, DONE, FAILED, DEAD_LETTERED", errBadFilter, f.State)
		}
		req.States = []jqv1.JobState{jqv1.JobState(st)}
	}
	if f.Label != "" {
		req.Labels = map[string]string{}
		for part := range strings.SplitSeq(f.Label, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%w: label %q: want key=value[,key=value]", errBadFilter, part)
			}
			req.Labels[k] = v
		}
	}
	var err error
	for _, t := range []struct {
		name, v string
		dst     **timestamppb.Timestamp
	}{{"created from", f.CreatedFrom, &req.CreatedAfter}, {"created to", f.CreatedTo, &req.CreatedBefore},
		{"completed from", f.CompletedFrom, &req.CompletedAfter}, {"completed to", f.CompletedTo, &req.CompletedBefore}} {
		if *t.dst, err = formTime(t.name, t.v); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// States are the states a filter may name.
var States = []string{"PENDING", "ASSIGNED", "RUNNING", "DONE", "FAILED", "DEAD_LETTERED"}

// listData is a page of jobs (the job list, the scheduled jobs and the dead letters).
type listData struct {
	// Note heads the list: the jobs an id prefix matched.
	Note   string
	Filter jobFilter
	Queues []string
	States []string
	Jobs   []*jqv1.Job
	Next   string
	Err    string
	Dead   bool
	// Path is the list's page: /jobs, /scheduled or /dead.
	Path string
}

func (c *Console) jobsPage(w http.ResponseWriter, r *http.Request, u *user) {
	if id := strings.TrimSpace(r.URL.Query().Get("id")); id != "" {
		if _, err := uuid.Parse(id); err == nil {
			http.Redirect(w, r, "/jobs/"+url.PathEscape(strings.ToLower(id)), http.StatusSeeOther)
			return
		}
		c.findByPrefix(w, r, u, id)
		return
	}
	c.list(w, r, u, filterOf(r.URL.Query()), false)
}

// prefixMatches is how many jobs an id prefix search lists.
const prefixMatches = 20

// findByPrefix is the header search with the start of an id, as the tables show it: the one job
// it names, or the list of those it matches.
func (c *Console) findByPrefix(w http.ResponseWriter, r *http.Request, u *user, prefix string) {
	ctx, cancel := u.ctx(r)
	defer cancel()
	resp, err := c.api.jobs.ListJobs(ctx, connect.NewRequest(&jqv1.ListJobsRequest{IdPrefix: prefix, PageSize: prefixMatches + 1}))
	if err != nil {
		c.fail(w, r, u, "Jobs", err)
		return
	}
	jobs := resp.Msg.GetJobs()
	switch len(jobs) {
	case 0:
		c.render(w, r, u, http.StatusNotFound, "error", view{Title: "Jobs", Data: fmt.Sprintf("not_found: no job id starts with %q", oneLine(prefix, 80))})
		return
	case 1:
		http.Redirect(w, r, "/jobs/"+url.PathEscape(jobs[0].GetId()), http.StatusSeeOther)
		return
	}
	d := listData{States: States, Path: "/jobs", Jobs: jobs[:min(len(jobs), prefixMatches)]}
	d.Note = fmt.Sprintf("%d jobs have an id starting with %q: choose one.", len(jobs), oneLine(prefix, 80))
	if len(jobs) > prefixMatches {
		d.Note = fmt.Sprintf("More than %d jobs have an id starting with %q: the first %d are listed; type more of the id.", prefixMatches, oneLine(prefix, 80), prefixMatches)
	}
	c.render(w, r, u, http.StatusOK, "jobs", view{Title: "Jobs", Nav: "jobs", Data: &d})
}

func (c *Console) deadPage(w http.ResponseWriter, r *http.Request, u *user) {
	f := filterOf(r.URL.Query())
	f.State, f.Scheduled = "DEAD_LETTERED", false
	c.list(w, r, u, f, true)
}

// scheduledPage lists the jobs not due yet: delayed submits and retries waiting for their backoff.
func (c *Console) scheduledPage(w http.ResponseWriter, r *http.Request, u *user) {
	f := filterOf(r.URL.Query())
	f.State, f.Scheduled, f.CompletedFrom, f.CompletedTo = "", true, "", ""
	c.list(w, r, u, f, false)
}

func (c *Console) list(w http.ResponseWriter, r *http.Request, u *user, f jobFilter, dead bool) {
	ctx, cancel := u.ctx(r)
	defer cancel()
	d := listData{Filter: f, States: States, Dead: dead, Path: "/jobs"}
	name, nav, title := "jobs", "jobs", "Jobs"
	switch {
	case dead:
		name, nav, title, d.Path = "dead", "dead", "Dead letters", "/dead"
	case f.Scheduled:
		name, nav, title, d.Path = "scheduled", "scheduled", "Scheduled jobs", "/scheduled"
	}
	if qs, err := c.api.queues.ListQueues(ctx, connect.NewRequest(&jqv1.ListQueuesRequest{})); err == nil {
		for _, q := range qs.Msg.GetQueues() {
			d.Queues = append(d.Queues, q.GetName())
		}
	}
	status := http.StatusOK
	req, err := f.request(pageSize)
	if err == nil {
		var resp *connect.Response[jqv1.ListJobsResponse]
		if resp, err = c.api.jobs.ListJobs(ctx, connect.NewRequest(req)); err == nil {
			d.Jobs, d.Next = resp.Msg.GetJobs(), resp.Msg.GetNextPageToken()
		}
	}
	if err != nil {
		if errors.Is(err, errBadFilter) {
			d.Err, status = "invalid_argument: "+strings.TrimPrefix(err.Error(), errBadFilter.Error()+": "), http.StatusBadRequest
		} else {
			d.Err, status = errorLine(err), httpStatus(err)
		}
	}
	c.render(w, r, u, status, name, view{Title: title, Nav: nav, Live: f.Page == "", Data: &d})
}

// jobData is one job's page.
type jobData struct {
	Job       *jqv1.Job
	Payload   shown
	Result    shown
	Failure   *jqv1.JobResult
	Events    []eventRow
	EventsErr string
	TraceID   string
	TraceURL  string
}

func (c *Console) jobPage(w http.ResponseWriter, r *http.Request, u *user) {
	ctx, cancel := u.ctx(r)
	defer cancel()
	id := r.PathValue("id")
	j, err := c.api.jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: id}))
	if err != nil {
		c.fail(w, r, u, "Job", err)
		return
	}
	job := j.Msg.GetJob()
	d := jobData{Job: job, Payload: show(job.GetPayload())}
	if res := job.GetResult(); res != nil && len(res.GetData()) > 0 {
		d.Result = show(res.GetData())
	}
	d.TraceID = traceID(job.GetTraceContext())
	if d.TraceID != "" && c.tracingURL != "" {
		d.TraceURL = strings.ReplaceAll(c.tracingURL, "{trace_id}", d.TraceID)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		ev, err := c.api.jobs.ListJobEvents(ctx, connect.NewRequest(&jqv1.ListJobEventsRequest{JobId: id}))
		if err != nil {
			d.EventsErr = errorLine(err)
			return
		}
		d.Events = timeline(ev.Msg.GetEvents())
	})
	if st := job.GetState(); st == jqv1.JobState_JOB_STATE_FAILED || st == jqv1.JobState_JOB_STATE_DEAD_LETTERED {
		wg.Go(func() {
			res, err := c.api.jobs.GetJobResult(ctx, connect.NewRequest(&jqv1.GetJobResultRequest{JobId: id}))
			if err == nil && res.Msg.GetFound() {
				d.Failure = res.Msg.GetResult()
			}
		})
	}
	wg.Wait()
	c.render(w, r, u, http.StatusOK, "job", view{Title: "Job " + job.GetId(), Nav: "jobs", Live: !terminal(job.GetState()), Data: &d})
}

func terminal(s jqv1.JobState) bool {
	return s == jqv1.JobState_JOB_STATE_DONE || s == jqv1.JobState_JOB_STATE_DEAD_LETTERED
}

// workersData is the workers page.
type workersData struct{ Workers []*jqv1.Worker }

func (c *Console) workersPage(w http.ResponseWriter, r *http.Request, u *user) {
	ctx, cancel := u.ctx(r)
	defer cancel()
	ws, err := c.api.workers.ListWorkers(ctx, connect.NewRequest(&jqv1.ListWorkersRequest{}))
	if err != nil {
		c.fail(w, r, u, "Workers", err)
		return
	}
	c.render(w, r, u, http.StatusOK, "workers", view{Title: "Workers", Nav: "workers", Live: true, Data: &workersData{Workers: ws.Msg.GetWorkers()}})
}
