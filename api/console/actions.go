package console

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
)

// procedures names the RPCs behind the console's buttons, for view.Can.
var procedures = map[string]string{
	"PauseQueue":       jqv1connect.QueueServicePauseQueueProcedure,
	"ResumeQueue":      jqv1connect.QueueServiceResumeQueueProcedure,
	"DeleteQueue":      jqv1connect.QueueServiceDeleteQueueProcedure,
	"UpdateQueue":      jqv1connect.QueueServiceUpdateQueueProcedure,
	"RetryJob":         jqv1connect.JobServiceRetryJobProcedure,
	"CancelJob":        jqv1connect.JobServiceCancelJobProcedure,
	"DeleteJob":        jqv1connect.JobServiceDeleteJobProcedure,
	"PurgeDeadLetters": jqv1connect.AdminServicePurgeDeadLettersProcedure,
	"DrainWorker":      jqv1connect.WorkerServiceDrainWorkerProcedure,
	"ResumeWorker":     jqv1connect.WorkerServiceResumeWorkerProcedure,
	"ShutdownWorker":   jqv1connect.WorkerServiceShutdownWorkerProcedure,
	"CreateConstraint": jqv1connect.ConstraintServiceCreateConstraintProcedure,
	"DeleteConstraint": jqv1connect.ConstraintServiceDeleteConstraintProcedure,
	"UpdateSchedule":   jqv1connect.ScheduleServiceUpdateScheduleProcedure,
	"PauseSchedule":    jqv1connect.ScheduleServicePauseScheduleProcedure,
	"ResumeSchedule":   jqv1connect.ScheduleServiceResumeScheduleProcedure,
	"TriggerSchedule":  jqv1connect.ScheduleServiceTriggerScheduleProcedure,
	"DeleteSchedule":   jqv1connect.ScheduleServiceDeleteScheduleProcedure,
}

// maxBulk bounds the jobs one bulk action touches: it walks the filter's pages and calls the
// job's RPC for each, as the CLI would, so a larger set takes several clicks.
const maxBulk = 1000

type actionFunc = func(w http.ResponseWriter, r *http.Request, u *user)

func (c *Console) actions() map[string]actionFunc {
	return map[string]actionFunc{
		"queue-pause":     c.queueAction("pause"),
		"queue-resume":    c.queueAction("resume"),
		"queue-delete":    c.queueAction("delete"),
		"queue-update":    c.queueUpdate,
		"job-retry":       c.jobAction("retry"),
		"job-cancel":      c.jobAction("cancel"),
		"job-delete":      c.jobAction("delete"),
		"jobs-bulk":       c.bulk,
		"dead-purge":      c.purge,
		"worker-drain":    c.workerAction("drain"),
		"worker-resume":   c.workerAction("resume"),
		"worker-shutdown": c.workerAction("shutdown"),

		"constraint-create": c.constraintCreate,
		"constraint-delete": c.constraintDelete,

		"schedule-update":  c.scheduleUpdate,
		"schedule-pause":   c.scheduleAction("pause"),
		"schedule-resume":  c.scheduleAction("resume"),
		"schedule-trigger": c.scheduleAction("trigger"),
		"schedule-delete":  c.scheduleAction("delete"),
	}
}

// confirmed reports whether the page's confirmation dialog was answered; every action needs it.
func confirmed(r *http.Request) bool { return r.PostFormValue("confirmed") == "yes" }

// back is where an action returns: the page it came from, a path on this console only.
func back(r *http.Request, fallback string) string {
	if b := backOf(r.PostFormValue("back")); b != "" {
		return b
	}
	return fallback
}

// backOf is b when it is a path on this console, else "".
func backOf(b string) string {
	if !strings.HasPrefix(b, "/") || strings.HasPrefix(b, "//") || strings.HasPrefix(b, "/\\") || strings.ContainsAny(b, "\r\n") {
		return ""
	}
	return b
}

// done ends an action: its one-line outcome for the next page, and back there.
func (c *Console) done(w http.ResponseWriter, r *http.Request, to string, err error, ok string) {
	if err != nil {
		c.flash(w, false, errorLine(err))
	} else {
		c.flash(w, true, ok)
	}
	http.Redirect(w, r, to, http.StatusSeeOther) //nolint:gosec // to is a fixed page or backOf's: a path on this console, never another origin
}

var errNotConfirmed = connect.NewError(connect.CodeFailedPrecondition, errors.New("not confirmed: nothing was changed"))

func (c *Console) queueAction(op string) actionFunc {
	return func(w http.ResponseWriter, r *http.Request, u *user) {
		name := r.PostFormValue("name")
		to := back(r, "/queues/"+pathSeg(name))
		if !confirmed(r) {
			c.done(w, r, to, errNotConfirmed, "")
			return
		}
		ctx, cancel := u.ctx(r)
		defer cancel()
		var err error
		msg := ""
		switch op {
		case "pause":
			_, err = c.api.queues.PauseQueue(ctx, connect.NewRequest(&jqv1.PauseQueueRequest{Name: name}))
			msg = "queue " + name + " paused"
		case "resume":
			_, err = c.api.queues.ResumeQueue(ctx, connect.NewRequest(&jqv1.ResumeQueueRequest{Name: name}))
			msg = "queue " + name + " resumed"
		case "delete":
			var resp *connect.Response[jqv1.DeleteQueueResponse]
			resp, err = c.api.queues.DeleteQueue(ctx, connect.NewRequest(&jqv1.DeleteQueueRequest{Name: name, Force: r.PostFormValue("force") == "yes"}))
			if err == nil {
				msg, to = fmt.Sprintf("queue %s deleted with %d jobs", name, resp.Msg.GetDeletedJobs()), "/"
			}
		}
		c.logAction(u, "queue_"+op, name, err)
		c.done(w, r, to, err, msg)
	}
}

func (c *Console) jobAction(op string) actionFunc {
	return func(w http.ResponseWriter, r *http.Request, u *user) {
		id := r.PostFormValue("id")
		to := back(r, "/jobs/"+pathSeg(id))
		if !confirmed(r) {
			c.done(w, r, to, errNotConfirmed, "")
			return
		}
		ctx, cancel := u.ctx(r)
		defer cancel()
		var err error
		msg := ""
		switch op {
		case "retry":
			_, err = c.api.jobs.RetryJob(ctx, connect.NewRequest(&jqv1.RetryJobRequest{JobId: id}))
			msg = "job " + id + " retried: PENDING again"
		case "cancel":
			var resp *connect.Response[jqv1.CancelJobResponse]
			resp, err = c.api.jobs.CancelJob(ctx, connect.NewRequest(&jqv1.CancelJobRequest{JobId: id}))
			msg = "job " + id + " cancelled"
			if err == nil && resp.Msg.GetCancelRequested() {
				msg = "job " + id + " is RUNNING: its worker was asked to stop it"
			}
		case "delete":
			_, err = c.api.jobs.DeleteJob(ctx, connect.NewRequest(&jqv1.DeleteJobRequest{JobId: id}))
			msg = "job " + id + " deleted"
			if err == nil {
				to = back(r, "/jobs") // its own page is gone
			}
		}
		c.logAction(u, "job_"+op, id, err)
		c.done(w, r, to, err, msg)
	}
}

// bulk retries, cancels or deletes every job the filter matches, up to maxBulk, one RPC per job.
// A delete skips, and counts, the jobs that are not finished (DONE or DEAD_LETTERED): they must be
// cancelled first; so does it a job that moved out of a finished state since it was listed.
// collect lists the jobs a bulk action on req's filter would act on, at most maxBulk (with those
// it would skip: a delete skips unfinished jobs); more reports that the filter matches more.
func (c *Console) collect(r *http.Request, u *user, op string, req *jqv1.ListJobsRequest) (ids []string, skipped int, more bool, err error) {
	for {
		ctx, cancel := u.ctx(r)
		resp, err := c.api.jobs.ListJobs(ctx, connect.NewRequest(req))
		cancel()
		if err != nil {
			return nil, 0, false, err
		}
		for _, j := range resp.Msg.GetJobs() {
			switch {
			case len(ids)+skipped >= maxBulk:
				more = true
			case op == "delete" && !terminal(j.GetState()):
				skipped++
			default:
				ids = append(ids, j.GetId())
			}
		}
		if req.PageToken = resp.Msg.GetNextPageToken(); req.PageToken == "" || more {
			return ids, skipped, more || (req.PageToken != "" && len(ids)+skipped >= maxBulk), nil
		}
	}
}

// bulkCount says, before a bulk action's confirmation, how many jobs it would affect: one line of
// text for the dialog (GET /bulk-count with the action's op and filter fields).
func (c *Console) bulkCount(w http.ResponseWriter, r *http.Request, u *user) {
	q := r.URL.Query()
	op := q.Get("op")
	f := filterOf(q)
	f.Page = ""
	if op == "purge" {
		f = jobFilter{Queue: f.Queue, State: "DEAD_LETTERED"}
	}
	req, err := f.request(pageSize)
	if err != nil {
		http.Error(w, "invalid_argument: "+oneLine(err.Error(), 200), http.StatusBadRequest)
		return
	}
	ids, skipped, more, err := c.collect(r, u, op, req)
	if err != nil {
		http.Error(w, errorLine(err), httpStatus(err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, countLine(op, len(ids), skipped, more))
}

// countLine is the dialog's count: "It affects 37 jobs." and what it leaves out.
func countLine(op string, n, skipped int, more bool) string {
	jobs := func(n int) string {
		if n == 1 {
			return "1 job"
		}
		return fmt.Sprintf("%d jobs", n)
	}
	switch {
	case op == "purge" && more:
		return fmt.Sprintf("It deletes more than %d dead letters.", maxBulk)
	case more:
		return fmt.Sprintf("More than %d jobs match: this affects the first %s; act again for the rest.", maxBulk, jobs(n))
	case skipped > 0:
		return fmt.Sprintf("It affects %s (%s matching but not finished are skipped).", jobs(n), jobs(skipped))
	}
	return fmt.Sprintf("It affects %s.", jobs(n))
}

func (c *Console) bulk(w http.ResponseWriter, r *http.Request, u *user) {
	op := r.PostFormValue("op")
	f := filterOf(r.PostForm)
	f.Page = ""
	to := back(r, "/jobs?"+f.Query())
	if f.Scheduled {
		to = back(r, "/scheduled?"+f.Query())
	}
	if !confirmed(r) {
		c.done(w, r, to, errNotConfirmed, "")
		return
	}
	if op != "retry" && op != "cancel" && op != "delete" {
		c.done(w, r, to, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("bulk action %q: want retry, cancel or delete", oneLine(op, 40))), "")
		return
	}
	req, err := f.request(pageSize)
	if err != nil {
		c.done(w, r, to, connect.NewError(connect.CodeInvalidArgument, err), "")
		return
	}
	if op == "retry" && (len(req.GetStates()) != 1 || (req.GetStates()[0] != jqv1.JobState_JOB_STATE_FAILED && req.GetStates()[0] != jqv1.JobState_JOB_STATE_DEAD_LETTERED)) {
		c.done(w, r, to, connect.NewError(connect.CodeInvalidArgument, errors.New("bulk retry needs a state filter of FAILED or DEAD_LETTERED")), "")
		return
	}
	// Collect first, act after: acting while paging would move jobs out of the filter under the
	// cursor (a retried dead letter leaves DEAD_LETTERED).
	ids, skipped, _, err := c.collect(r, u, op, req)
	if err != nil {
		c.done(w, r, to, err, "")
		return
	}
	var n, failed int
	var firstErr error
	for _, id := range ids {
		ctx, cancel := u.ctx(r)
		var err error
		switch op {
		case "retry":
			_, err = c.api.jobs.RetryJob(ctx, connect.NewRequest(&jqv1.RetryJobRequest{JobId: id}))
		case "cancel":
			_, err = c.api.jobs.CancelJob(ctx, connect.NewRequest(&jqv1.CancelJobRequest{JobId: id}))
		default:
			_, err = c.api.jobs.DeleteJob(ctx, connect.NewRequest(&jqv1.DeleteJobRequest{JobId: id}))
		}
		cancel()
		if op == "delete" && connect.CodeOf(err) == connect.CodeFailedPrecondition {
			skipped++ // no longer finished: retried since it was listed
			continue
		}
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			if code := connect.CodeOf(err); code == connect.CodePermissionDenied || code == connect.CodeUnauthenticated {
				break // every other job would be refused the same way
			}
			continue
		}
		n++
	}
	c.logAction(u, "jobs_bulk_"+op, f.Query(), firstErr)
	skip := ""
	if skipped > 0 {
		skip = fmt.Sprintf("; %d skipped: not DONE or DEAD_LETTERED (cancel them first)", skipped)
	}
	if firstErr != nil {
		c.done(w, r, to, fmt.Errorf("%s: %d of %d jobs done, %d failed%s; first error: %s", op, n, len(ids), failed, skip, errorLine(firstErr)), "")
		return
	}
	c.done(w, r, to, nil, fmt.Sprintf("%s: %d jobs%s", op, n, skip))
}

// purge deletes the dead letters of one queue, or of every queue.
func (c *Console) purge(w http.ResponseWriter, r *http.Request, u *user) {
	q := r.PostFormValue("queue")
	to := back(r, "/dead")
	if !confirmed(r) {
		c.done(w, r, to, errNotConfirmed, "")
		return
	}
	ctx, cancel := u.ctx(r)
	defer cancel()
	resp, err := c.api.admin.PurgeDeadLetters(ctx, connect.NewRequest(&jqv1.PurgeDeadLettersRequest{Queue: q, Confirm: true}))
	c.logAction(u, "dead_purge", q, err)
	msg := ""
	if err == nil {
		msg = fmt.Sprintf("%d dead letters purged", resp.Msg.GetDeleted())
	}
	c.done(w, r, to, err, msg)
}

func (c *Console) workerAction(op string) actionFunc {
	return func(w http.ResponseWriter, r *http.Request, u *user) {
		id := r.PostFormValue("id")
		to := back(r, "/workers")
		if !confirmed(r) {
			c.done(w, r, to, errNotConfirmed, "")
			return
		}
		ctx, cancel := u.ctx(r)
		defer cancel()
		var err error
		msg := "worker " + id + ": " + op + " requested"
		switch op {
		case "drain":
			_, err = c.api.workers.DrainWorker(ctx, connect.NewRequest(&jqv1.DrainWorkerRequest{WorkerId: id}))
		case "resume":
			_, err = c.api.workers.ResumeWorker(ctx, connect.NewRequest(&jqv1.ResumeWorkerRequest{WorkerId: id}))
			msg = "worker " + id + " resumed: it takes new jobs again"
		default:
			_, err = c.api.workers.ShutdownWorker(ctx, connect.NewRequest(&jqv1.ShutdownWorkerRequest{WorkerId: id}))
		}
		c.logAction(u, "worker_"+op, id, err)
		c.done(w, r, to, err, msg)
	}
}

// logAction records who did what from the console; the API logs its own refusals.
func (c *Console) logAction(u *user, action, target string, err error) {
	who, code := "", "ok"
	if u.principal != nil {
		who = u.principal.Name
	}
	if err != nil {
		code = connect.CodeOf(err).String()
	}
	c.log.Info("console action", zap.String("action", action), zap.String("target", oneLine(target, 200)),
		zap.String("principal", who), zap.String("code", code))
}

func pathSeg(s string) string { return url.PathEscape(s) }
