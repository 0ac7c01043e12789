package admin

import (
	"fmt"
	"io"

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
