package admin

import (
	"fmt"
	"io"

	"github.com/jq-dev/jq/internal/term"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
)

// Run prints the job's result (seed 001). A success writes its bytes exactly as reported to
// stdout, nothing added, so `job result ID > out.json` saves them; binary bytes bound for a
// terminal are summarised instead. A failure and a missing result are one line on stderr and exit
// 1: a script tells "here is the result" (0) from "there is none" (1) and "no such job" (3).
// -o json|yaml prints the whole answer, with the same exit codes.
func (c *JobResultCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.JobServiceClient.GetJobResult, &jqv1.GetJobResultRequest{JobId: c.ID, Consume: c.Consume})
	if err != nil {
		return named(err, "job", c.ID)
	}
	res := resp.GetResult()
	if err := re.printMessage(resp, func(w io.Writer) error {
		if !resp.GetFound() || res.GetType() != "success" {
			return nil // said on stderr below
		}
		data := res.GetData()
		if isBinary(data) && term.IsTerminal(w) {
			_, err := fmt.Fprintln(w, bytesText(data))
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		if term.IsTerminal(w) && len(data) > 0 && data[len(data)-1] != '\n' {
			// Ends the line for the prompt; a pipe or file gets the bytes exactly.
			_, err := io.WriteString(w, "\n")
			return err
		}
		return nil
	}); err != nil {
		return err
	}
	switch {
	case !resp.GetFound():
		return c.none(re, resp.GetState())
	case res.GetType() != "success":
		retry := "will not be retried"
		if res.GetShouldRetry() {
			retry = "will be retried"
		}
		return fmt.Errorf("job %s failed (%s, reason %s, %s): %s", c.ID, stateName(resp.GetState()),
			cell(res.GetReason()), retry, cell(res.GetMessage()))
	}
	return nil
}

// none says why a job has no result. A DONE job's keep_result (one more read, only on this path)
// tells "never kept" from "kept, then consumed or dropped after the retention".
func (c *JobResultCmd) none(re *runEnv, state jqv1.JobState) error {
	if state != jqv1.JobState_JOB_STATE_DONE {
		return fmt.Errorf("no result: job %s is %s, not finished", c.ID, stateName(state))
	}
	resp, err := call(re, jqv1connect.JobServiceClient.GetJob, &jqv1.GetJobRequest{JobId: c.ID})
	if err != nil {
		return named(err, "job", c.ID)
	}
	if !resp.GetJob().GetKeepResult() {
		return fmt.Errorf("no result (kept: false): job %s was submitted without keep_result", c.ID)
	}
	return fmt.Errorf("no result (kept: true): the result of job %s was consumed or passed its queue's result retention", c.ID)
}
