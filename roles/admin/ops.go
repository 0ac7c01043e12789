package admin

import (
	"fmt"
	"io"

	"google.golang.org/protobuf/types/known/structpb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
)

// maxPeek is PeekQueue's largest limit.
const maxPeek = 1000

// Run prints the live dispatch counters (seed 004's stats).
func (c *StatsCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.AdminServiceClient.GetStats, &jqv1.GetStatsRequest{})
	if err != nil {
		return err
	}
	return re.printMessage(resp, func(w io.Writer) error {
		tw := newTable(w)
		fmt.Fprintln(tw, "QUEUE\tREADY\tIN FLIGHT\tDEAD_LETTERED\t")
		for _, q := range resp.GetQueues() {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", cell(q.GetQueue()), q.GetReady(), q.GetInflight(), q.GetDeadLettered())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "\nin flight: %d   live heartbeats: %d\n", resp.GetInflight(), resp.GetLiveHeartbeats())
		return err
	})
}

// Run shows the next jobs of a queue in dispatch order, or its newest dead
// letters (seed 004's peek).
func (c *PeekCmd) Run(re *runEnv) error {
	if c.N < 1 || c.N > maxPeek {
		return usagef("-n %d: want 1 to %d", c.N, maxPeek)
	}
	resp, err := call(re, jqv1connect.AdminServiceClient.PeekQueue, &jqv1.PeekQueueRequest{
		Queue: c.Queue, Limit: int32(c.N), Dead: c.Dead, IncludePayloads: c.Payloads,
	})
	if err != nil {
		return named(err, "queue", c.Queue)
	}
	if resp.GetTruncated() {
		fmt.Fprintf(re.Stderr, "only %d jobs fit one response (the server's max_page_bytes)\n", len(resp.GetJobs()))
	}
	return re.printMessage(resp, func(w io.Writer) error {
		tw := newTable(w)
		if c.Dead {
			fmt.Fprintln(tw, "ID\tTYPE\tDEAD-LETTERED\tREASON\tRETRIES\tERROR")
			for _, j := range resp.GetJobs() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\n", cell(j.GetId()), cell(j.GetType()), re.when(j.GetCompletedAt()),
					dash(j.GetFailureReason()), j.GetRetryCount(), j.GetMaxRetries(), dash(bytesLine(j.GetLastError())))
			}
		} else {
			payload := func(*jqv1.Job) string { return "" }
			header := "#\tID\tTYPE\tPRIORITY\tCREATED\n"
			if c.Payloads {
				payload = func(j *jqv1.Job) string { return "\t" + bytesLine(string(j.GetPayload())) }
				header = "#\tID\tTYPE\tPRIORITY\tCREATED\tPAYLOAD\n"
			}
			fmt.Fprint(tw, header)
			for i, j := range resp.GetJobs() {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s%s\n", i+1, cell(j.GetId()), cell(j.GetType()), j.GetPriority(), re.when(j.GetCreatedAt()), payload(j))
			}
		}
		return tw.Flush()
	})
}

// bytesLine shortens text for one table cell.
func bytesLine(s string) string {
	const maxLine = 60
	t := bytesText([]byte(s))
	if r := []rune(t); len(r) > maxLine {
		return string(r[:maxLine]) + "…"
	}
	return t
}

// Run deletes dead letters (seed 004's purge-dlq; FR-035's "until explicitly
// deleted"). Without --yes it refuses and changes nothing.
func (c *PurgeDLQCmd) Run(re *runEnv) error {
	scope := "every queue"
	if c.Queue != "" {
		scope = fmt.Sprintf("queue %q", c.Queue)
	}
	if !c.Yes {
		return usagef("purge-dlq permanently deletes the dead-lettered jobs of %s: add --yes to confirm", scope)
	}
	resp, err := call(re, jqv1connect.AdminServiceClient.PurgeDeadLetters, &jqv1.PurgeDeadLettersRequest{Queue: c.Queue, Confirm: true})
	if err != nil {
		return failed(named(err, "queue", c.Queue), "cannot purge the dead letters of %s", scope)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "deleted %d dead-lettered jobs of %s\n", resp.GetDeleted(), scope)
		return err
	})
}

// Run retries dead letters, oldest pages first as ListJobs gives them, each with RetryJob (the API
// has no bulk retry; the console's bulk retry works the same way). A job retried or deleted
// meanwhile is counted as failed and skipped.
func (c *RedriveDLQCmd) Run(re *runEnv) error {
	scope := "every queue"
	if c.Queue != "" {
		scope = "queue " + c.Queue
	}
	if c.Limit < 1 || c.Limit > 100_000 {
		return usagef("--limit %d: want 1 to 100000", c.Limit)
	}
	if !c.Yes {
		return usagef("redrive-dlq retries the dead-lettered jobs of %s: add --yes to confirm", scope)
	}
	var ids []string
	token := ""
	for len(ids) < c.Limit {
		size := int32(min(maxPageSize, c.Limit-len(ids))) //nolint:gosec // 1..maxPageSize (1000)
		resp, err := call(re, jqv1connect.JobServiceClient.ListJobs, &jqv1.ListJobsRequest{
			Queue: c.Queue, States: []jqv1.JobState{jqv1.JobState_JOB_STATE_DEAD_LETTERED}, PageSize: size, PageToken: token,
		})
		if err != nil {
			return failed(named(err, "queue", c.Queue), "cannot list the dead letters of %s", scope)
		}
		for _, j := range resp.GetJobs() {
			ids = append(ids, j.GetId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	retried, failures := 0, 0
	var firstErr error
	for _, id := range ids {
		if _, err := call(re, jqv1connect.JobServiceClient.RetryJob, &jqv1.RetryJobRequest{JobId: id}); err != nil {
			failures++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		retried++
	}
	out, err := structpb.NewStruct(map[string]any{"retried": retried, "matched": len(ids), "failed": failures})
	if err != nil {
		return err
	}
	err = re.printMessage(out, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "retried %d of %d dead-lettered jobs of %s (%d failed)\n", retried, len(ids), scope, failures)
		return err
	})
	if err == nil && firstErr != nil {
		return failed(firstErr, "%d of %d retries failed, the first", failures, len(ids))
	}
	return err
}
