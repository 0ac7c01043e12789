package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/queue"
)

// maxPageSize is ListJobs' largest page.
const maxPageSize = 1000

// Run submits the job and prints its id — and nothing else — on stdout
// (FR-008); --output json/yaml prints the whole answer instead.
func (c *JobSubmitCmd) Run(re *runEnv) error {
	job, err := c.job(re)
	if err != nil {
		return err
	}
	cl, err := re.Client()
	if err != nil {
		return err
	}
	ctx, cancel := re.callCtx()
	defer cancel()
	sub, err := cl.Submit(ctx, job)
	if err != nil {
		return failed(namedQueueToUse(err, c.Queue), "cannot submit to queue %q", c.Queue)
	}
	if c.Wait {
		return waitJob(re, sub.ID, c.WaitTimeout)
	}
	// Submitted is SubmitJobResponse field for field.
	return re.printMessage(&jqv1.SubmitJobResponse{JobId: sub.ID, Existing: sub.Existing}, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, cell(sub.ID))
		return err
	})
}

// Run waits for the job's end.
func (c *JobWaitCmd) Run(re *runEnv) error { return waitJob(re, c.ID, c.WaitTimeout) }

// waitJob follows the job (client.Watch: the server's WatchJob stream) until it is DONE or
// DEAD_LETTERED — without a deadline unless --wait-timeout gives one; --timeout bounds each
// request, not the wait — and prints it: its id and state (the whole job with -o json|yaml). On
// a terminal, stderr shows a live status line meanwhile. A job that did not end well is an error
// (exit 1) naming its state and reason.
func waitJob(re *runEnv, id string, limit time.Duration) error {
	cl, err := re.Client()
	if err != nil {
		return err
	}
	ctx, cancel := re.ctx, context.CancelFunc(func() {})
	if limit > 0 {
		ctx, cancel = context.WithTimeout(re.ctx, limit)
	}
	defer cancel()
	status := newWaitStatus(re, id)
	j, err := cl.Watch(ctx, id, status.update)
	status.stop()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && re.ctx.Err() == nil {
			status.askWhy()
			return fmt.Errorf("job %s has not ended after %v (--wait-timeout)%s", id, limit, status.hint())
		}
		return named(err, "job", id)
	}
	resp := &jqv1.GetJobResponse{Job: api.JobProto(j)}
	if err := re.printMessage(resp, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "%s\t%s\n", cell(resp.GetJob().GetId()), re.state(resp.GetJob().GetState()))
		return err
	}); err != nil {
		return err
	}
	if j.State != queue.StateDone {
		return fmt.Errorf("job %s is %s (reason %s): %s", id, stateName(resp.GetJob().GetState()), cell(j.FailureReason), cell(j.LastError))
	}
	return nil
}

// onJob runs one of the Go client's calls on a job (Get, Cancel, Retry, Wait) under the command's
// deadline.
func onJob(re *runEnv, method func(*client.Client, context.Context, string) (*queue.Job, error), id string) (*queue.Job, error) {
	cl, err := re.Client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := re.callCtx()
	defer cancel()
	return method(cl, ctx, id)
}

// job checks the flags and builds the job to submit.
func (c *JobSubmitCmd) job(re *runEnv) (client.Job, error) {
	payload, err := readPayload(c.Payload, re.Stdin)
	if err != nil {
		return client.Job{}, err
	}
	if c.Priority < 0 || c.Priority > 9 {
		return client.Job{}, usagef("--priority %d: want 0 to 9", c.Priority)
	}
	opts := []client.Option{client.Priority(c.Priority), client.IdempotencyKey(c.IdempotencyKey)}
	if len(c.Label) > 0 {
		opts = append(opts, client.Labels(c.Label))
	}
	if c.KeepResult {
		opts = append(opts, client.KeepResult())
	}
	if c.MaxRetries != nil {
		if *c.MaxRetries < 0 || *c.MaxRetries > 100 {
			return client.Job{}, usagef("--max-retries %d: want 0 to 100", *c.MaxRetries)
		}
		opts = append(opts, client.MaxRetries(*c.MaxRetries))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
		opt  func(time.Duration) client.Option
	}{{"--ttl", c.TTL, client.TTL}, {"--job-timeout", c.JobTimeout, client.Timeout}} {
		if d.v < 0 {
			return client.Job{}, usagef("%s %s: must be positive", d.flag, d.v)
		}
		opts = append(opts, d.opt(d.v)) // 0: the default
	}
	switch {
	case c.RunAt != "":
		t, err := time.Parse(time.RFC3339, c.RunAt)
		if err != nil {
			return client.Job{}, usagef("--run-at %q: want an RFC 3339 time such as 2030-01-02T15:04:05Z", c.RunAt)
		}
		opts = append(opts, client.RunAt(t))
	case c.Delay < 0:
		return client.Job{}, usagef("--delay %s: must be positive", c.Delay)
	case c.Delay > 0:
		opts = append(opts, client.RunAt(re.now().Add(c.Delay))) // the command's clock, not the client's
	}
	return client.Job{Queue: c.Queue, Type: c.Type, Payload: payload, Options: opts}, nil
}

// readPayload is --payload: inline JSON (checked), or @file / @- (stdin),
// sent as it is.
func readPayload(arg string, stdin io.Reader) ([]byte, error) {
	switch {
	case arg == "@-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("--payload @-: reading stdin: %w", err)
		}
		return b, nil
	case strings.HasPrefix(arg, "@"):
		b, err := os.ReadFile(arg[1:])
		if err != nil {
			return nil, usagef("--payload %s: %v", arg, err)
		}
		return b, nil
	}
	if !json.Valid([]byte(arg)) {
		return nil, usagef("--payload is not valid JSON (use @file for other bytes): %.60q", arg)
	}
	return []byte(arg), nil
}

// Run shows one job (FR-030).
func (c *JobStatusCmd) Run(re *runEnv) error {
	j, err := onJob(re, (*client.Client).Get, c.ID)
	if err != nil {
		return named(err, "job", c.ID)
	}
	resp := &jqv1.GetJobResponse{Job: api.JobProto(j)}
	return re.printMessage(resp, func(w io.Writer) error { return re.jobTable(w, resp.GetJob()) })
}

func (re *runEnv) jobTable(w io.Writer, j *jqv1.Job) error {
	tw := newTable(w)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("ID", cell(j.GetId()))
	row("QUEUE", cell(j.GetQueue()))
	row("TYPE", cell(j.GetType()))
	row("STATUS", re.state(j.GetState()))
	if j.GetWaiting() != "" {
		row("WAITING", cell(j.GetWaiting()))
	}
	if p := j.GetProgress(); p != nil {
		row("PROGRESS", fmt.Sprintf("%d%% %s (%s)", p.GetPercent(), dash(p.GetMessage()), re.when(p.GetUpdatedAt())))
	}
	row("PRIORITY", fmt.Sprint(j.GetPriority()))
	row("RETRIES", fmt.Sprintf("%d of %d", j.GetRetryCount(), j.GetMaxRetries()))
	row("ATTEMPT", fmt.Sprint(j.GetAttempt()))
	row("LABELS", labelsText(j.GetLabels()))
	row("PAYLOAD", bytesText(j.GetPayload()))
	switch {
	case j.GetResult() != nil:
		row("RESULT", bytesText(j.GetResult().GetData()))
		row("RUNTIME", duration(j.GetResult().GetRuntime()))
	case j.GetState() == jqv1.JobState_JOB_STATE_DONE && j.GetKeepResult():
		row("RESULT", "(consumed, or dropped after the queue's result retention)")
	case j.GetState() == jqv1.JobState_JOB_STATE_DONE:
		row("RESULT", "(not kept)")
	default:
		row("RESULT", "-")
	}
	if j.GetFailureReason() != "" || j.GetLastError() != "" {
		row("ERROR", fmt.Sprintf("%s (%s)", dash(j.GetLastError()), dash(j.GetFailureReason())))
	}
	row("WORKER", dash(j.GetWorkerId()))
	row("CREATED", re.when(j.GetCreatedAt()))
	if j.GetRunAt() != nil || j.GetState() == jqv1.JobState_JOB_STATE_PENDING {
		row("NOT BEFORE", re.when(j.GetNotBefore()))
	}
	row("STARTED", re.when(j.GetStartedAt()))
	row("COMPLETED", re.when(j.GetCompletedAt()))
	return tw.Flush()
}

// Run cancels a job (FR-012).
func (c *JobCancelCmd) Run(re *runEnv) error {
	j, err := onJob(re, (*client.Client).Cancel, c.ID)
	if err != nil {
		return failed(named(err, "job", c.ID), "cannot cancel job %s", c.ID)
	}
	resp := &jqv1.CancelJobResponse{Job: api.JobProto(j), CancelRequested: j.CancelRequested}
	return re.printMessage(resp, func(w io.Writer) error {
		j := resp.GetJob()
		if resp.GetCancelRequested() {
			_, err := fmt.Fprintf(w, "job %s is %s: its worker %s was asked to stop it\n", cell(j.GetId()), re.state(j.GetState()), cell(j.GetWorkerId()))
			return err
		}
		_, err := fmt.Fprintf(w, "job %s cancelled: %s (%s)\n", cell(j.GetId()), re.state(j.GetState()), cell(j.GetFailureReason()))
		return err
	})
}

// Run re-enqueues a FAILED or DEAD_LETTERED job (FR-013).
func (c *JobRetryCmd) Run(re *runEnv) error {
	j, err := onJob(re, (*client.Client).Retry, c.ID)
	if err != nil {
		return failed(named(err, "job", c.ID), "cannot retry job %s", c.ID)
	}
	resp := &jqv1.RetryJobResponse{Job: api.JobProto(j)}
	return re.printMessage(resp, func(w io.Writer) error {
		j := resp.GetJob()
		_, err := fmt.Fprintf(w, "job %s is %s again, retry count reset to %d\n", cell(j.GetId()), re.state(j.GetState()), j.GetRetryCount())
		return err
	})
}

// Run deletes a finished job (DeleteJob).
func (c *JobDeleteCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.JobServiceClient.DeleteJob, &jqv1.DeleteJobRequest{JobId: c.ID})
	if err != nil {
		return failed(named(err, "job", c.ID), "cannot delete job %s", c.ID)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "job %s deleted (it was %s)\n", cell(c.ID), re.state(resp.GetJob().GetState()))
		return err
	})
}

// Run lists one page of jobs (FR-032, FR-035). When more remain the table is
// followed by a hint on stderr; json/yaml carry next_page_token.
func (c *JobListCmd) Run(re *runEnv) error {
	if c.Limit < 1 || c.Limit > maxPageSize {
		return usagef("--limit %d: want 1 to %d", c.Limit, maxPageSize)
	}
	states, err := parseStates(c.Status)
	if err != nil {
		return err
	}
	req := &jqv1.ListJobsRequest{
		Queue: c.Queue, States: states, PageSize: int32(c.Limit), PageToken: c.PageToken,
		IncludePayloads: c.Payloads && re.globals.Output != "table", // the table has no payload column
		Type:            c.Type, Labels: c.Label, Scheduled: c.Scheduled,
	}
	now := time.Now()
	for _, f := range []struct {
		flag, arg string
		dst       **timestamppb.Timestamp
	}{{"--created-after", c.CreatedAfter, &req.CreatedAfter}, {"--created-before", c.CreatedBefore, &req.CreatedBefore},
		{"--completed-after", c.CompletedAfter, &req.CompletedAfter}, {"--completed-before", c.CompletedBefore, &req.CompletedBefore}} {
		if f.arg == "" {
			continue
		}
		at, err := timeArg(f.flag, f.arg, now)
		if err != nil {
			return err
		}
		*f.dst = timestamppb.New(at)
	}
	resp, err := call(re, jqv1connect.JobServiceClient.ListJobs, req)
	if err != nil {
		return named(err, "queue", c.Queue)
	}
	if err := re.printMessage(resp, func(w io.Writer) error { return re.jobsTable(w, resp.GetJobs()) }); err != nil {
		return err
	}
	if re.globals.Output == "table" {
		if next := resp.GetNextPageToken(); next != "" {
			fmt.Fprintf(re.Stderr, "more jobs: add --page-token %s\n", cell(next))
		}
	} else if !c.Payloads && len(resp.GetJobs()) > 0 {
		fmt.Fprintln(re.Stderr, "payloads and results left out: add --payloads, or see one job with `job status`")
	}
	return nil
}

// timeArg reads a time flag: RFC 3339, or a positive duration meaning that long before now.
func timeArg(flag, arg string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, arg); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(arg); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("%s %q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago (2h)", flag, arg)
}

// parseStates reads --status: state names in any case, with or without the
// JOB_STATE_ prefix, comma-separated.
func parseStates(arg string) ([]jqv1.JobState, error) {
	var out []jqv1.JobState
	for _, f := range strings.Split(arg, ",") {
		f = strings.ToUpper(strings.TrimSpace(f))
		if f == "" {
			continue
		}
		v, ok := jqv1.JobState_value["JOB_STATE_"+strings.TrimPrefix(f, "JOB_STATE_")]
		if !ok || v == int32(jqv1.JobState_JOB_STATE_UNSPECIFIED) {
			return nil, usagef("--status %q: want PENDING, ASSIGNED, RUNNING, DONE, FAILED or DEAD_LETTERED", f)
		}
		out = append(out, jqv1.JobState(v))
	}
	return out, nil
}

func (re *runEnv) jobsTable(w io.Writer, jobs []*jqv1.Job) error {
	tw := newTable(w)
	fmt.Fprintf(tw, "ID\tQUEUE\tTYPE\t%s\tPRIORITY\tRETRIES\tCREATED\tUPDATED\n", re.header("STATUS"))
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\n", cell(j.GetId()), cell(j.GetQueue()), cell(j.GetType()), re.state(j.GetState()),
			j.GetPriority(), j.GetRetryCount(), j.GetMaxRetries(), re.when(j.GetCreatedAt()), re.ago(j.GetUpdatedAt()))
	}
	return tw.Flush()
}

// Run prints a job's transitions in order (FR-031).
func (c *JobLogsCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.JobServiceClient.ListJobEvents, &jqv1.ListJobEventsRequest{JobId: c.ID})
	if err != nil {
		return named(err, "job", c.ID)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		tw := newTable(w)
		fmt.Fprintf(tw, "SEQ\tTIME\tFROM\t%s\tREASON\tWORKER\tATTEMPT\n", re.header("TO"))
		for _, e := range resp.GetEvents() {
			from := "-"
			if e.GetFromState() != jqv1.JobState_JOB_STATE_UNSPECIFIED {
				from = stateName(e.GetFromState())
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\n", e.GetSeq(), re.when(e.GetTimestamp()), from, re.state(e.GetToState()),
				reasonCell(e.GetReason()), dash(eventWorker(e)), e.GetAttempt())
		}
		return tw.Flush()
	})
}

// eventWorker is the worker a transition belongs to. An event row carries the job's worker_id as
// it was at the transition, so an operator's retry would show the previous attempt's worker,
// which had no part in it.
func eventWorker(e *jqv1.JobEvent) string {
	if e.GetReason() == queue.ReasonManualRetry {
		return ""
	}
	return e.GetWorkerId()
}

// labelsText is a job's labels as k=v pairs in key order, "-" when it has none.
func labelsText(labels map[string]string) string {
	if len(labels) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, cell(k)+"="+cell(labels[k]))
	}
	return strings.Join(parts, ",")
}
