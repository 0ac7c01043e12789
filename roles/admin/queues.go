package admin

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/jq-dev/jq/api"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/queue"
)

// Run lists every queue with its settings.
func (c *QueueListCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.QueueServiceClient.ListQueues, &jqv1.ListQueuesRequest{})
	if err != nil {
		return err
	}
	return re.printMessage(resp, func(w io.Writer) error {
		tw := newTable(w)
		fmt.Fprintf(tw, "NAME\t%s\tMAX RETRIES\tTTL\tBACKOFF\tPRIORITY WEIGHTS\tMAX WAIT\tCREATED\n", re.header("STATE"))
		for _, q := range resp.GetQueues() {
			state := re.paint(colGreen, "active")
			if q.GetPaused() {
				state = re.paint(colYellow, "paused")
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s..%s\t%s\t%s\t%s\n", cell(q.GetName()), state, q.GetMaxRetries(), duration(q.GetTtl()),
				duration(q.GetBackoffBase()), duration(q.GetBackoffMax()), weights(q.GetPriorityWeights()), duration(q.GetMaxWait()),
				re.when(q.GetCreatedAt()))
		}
		return tw.Flush()
	})
}

// weights renders priority weights as "9=10,0=1", highest priority first;
// "strict" when there are none.
func weights(m map[int32]int32) string {
	if len(m) == 0 {
		return "strict"
	}
	return api.FormatPriorityWeights(m)
}

// maxRetriesArg checks --max-retries for create and update; nil when not given.
func maxRetriesArg(v *int) (*int32, error) {
	if v == nil {
		return nil, nil
	}
	if *v < 0 || *v > 100 {
		return nil, usagef("--max-retries %d: want 0 to 100", *v)
	}
	n := int32(*v)
	return &n, nil
}

// Run creates a queue (FR-025).
func (c *QueueCreateCmd) Run(re *runEnv) error {
	req := &jqv1.CreateQueueRequest{Name: c.Name}
	n, err := maxRetriesArg(c.MaxRetries)
	if err != nil {
		return err
	}
	req.MaxRetries = n
	for _, d := range []struct {
		flag string
		v    time.Duration
		dst  **durationpb.Duration
	}{{"--ttl", c.TTL, &req.Ttl}, {"--backoff-base", c.BackoffBase, &req.BackoffBase}, {"--backoff-max", c.BackoffMax, &req.BackoffMax},
		{"--result-retention", c.ResultRetention, &req.ResultRetention}, {"--max-wait", c.MaxWait, &req.MaxWait}} {
		if d.v < 0 {
			return usagef("%s %s: must be positive", d.flag, d.v)
		}
		if d.v > 0 {
			*d.dst = durationpb.New(d.v)
		}
	}
	w, err := parseWeights(c.PriorityWeights)
	if err != nil {
		return err
	}
	req.PriorityWeights = w
	resp, err := call(re, jqv1connect.QueueServiceClient.CreateQueue, req)
	if err != nil {
		if errors.Is(err, queue.ErrQueueExists) {
			return fmt.Errorf("queue %q already exists", c.Name)
		}
		return failed(err, "cannot create queue %q", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		q := resp.GetQueue()
		_, err := fmt.Fprintf(w, "queue %s created: max retries %d, ttl %s, backoff %s..%s, priority weights %s, max wait %s, result retention %s\n",
			cell(q.GetName()), q.GetMaxRetries(), duration(q.GetTtl()), duration(q.GetBackoffBase()), duration(q.GetBackoffMax()),
			weights(q.GetPriorityWeights()), duration(q.GetMaxWait()), duration(q.GetResultRetention()))
		return err
	})
}

// Run changes a queue's settings; only the flags given are sent.
func (c *QueueUpdateCmd) Run(re *runEnv) error {
	req := &jqv1.UpdateQueueRequest{Name: c.Name}
	n, err := maxRetriesArg(c.MaxRetries)
	if err != nil {
		return err
	}
	req.MaxRetries = n
	for _, d := range []struct {
		flag string
		v    *time.Duration
		dst  **durationpb.Duration
	}{{"--ttl", c.TTL, &req.Ttl}, {"--backoff-base", c.BackoffBase, &req.BackoffBase}, {"--backoff-max", c.BackoffMax, &req.BackoffMax},
		{"--result-retention", c.ResultRetention, &req.ResultRetention}, {"--max-wait", c.MaxWait, &req.MaxWait}} {
		if d.v == nil {
			continue
		}
		if *d.v < 0 {
			return usagef("%s %s: must not be negative", d.flag, *d.v)
		}
		*d.dst = durationpb.New(*d.v)
	}
	if c.PriorityWeights != nil {
		arg := *c.PriorityWeights
		if strings.TrimSpace(arg) == "strict" {
			arg = ""
		}
		w, err := parseWeights(arg)
		if err != nil {
			return err
		}
		req.PriorityWeights = &jqv1.PriorityWeights{Weights: w}
	}
	if req.MaxRetries == nil && req.Ttl == nil && req.BackoffBase == nil && req.BackoffMax == nil && req.ResultRetention == nil &&
		req.MaxWait == nil && req.PriorityWeights == nil {
		return usagef("nothing to change: give at least one of --max-retries, --ttl, --priority-weights, --backoff-base, --backoff-max, --result-retention, --max-wait")
	}
	resp, err := call(re, jqv1connect.QueueServiceClient.UpdateQueue, req)
	if err != nil {
		return failed(named(err, "queue", c.Name), "cannot update queue %q", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		q := resp.GetQueue()
		_, err := fmt.Fprintf(w, "queue %s updated: max retries %d, ttl %s, backoff %s..%s, priority weights %s, max wait %s, result retention %s\n",
			cell(q.GetName()), q.GetMaxRetries(), duration(q.GetTtl()), duration(q.GetBackoffBase()), duration(q.GetBackoffMax()),
			weights(q.GetPriorityWeights()), duration(q.GetMaxWait()), duration(q.GetResultRetention()))
		return err
	})
}

// parseWeights reads --priority-weights "9=10,0=1".
func parseWeights(arg string) (map[int32]int32, error) {
	w, err := api.ParsePriorityWeights(arg)
	if err != nil {
		return nil, usagef("--priority-weights %v", err)
	}
	return w, nil
}

// Run deletes a queue; the server refuses one that holds jobs unless
// --force (FR-026).
func (c *QueueDeleteCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.QueueServiceClient.DeleteQueue, &jqv1.DeleteQueueRequest{Name: c.Name, Force: c.Force})
	if err != nil {
		if errors.Is(err, queue.ErrQueueNotEmpty) {
			return fmt.Errorf("queue %q is not empty: it still holds jobs (--force deletes them with it)", c.Name)
		}
		return failed(named(err, "queue", c.Name), "cannot delete queue %q", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "queue %s deleted with %d jobs\n", c.Name, resp.GetDeletedJobs())
		return err
	})
}

// Run prints a queue's depth by state and processing statistics (FR-028).
func (c *QueueStatsCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.QueueServiceClient.GetQueueStats, &jqv1.GetQueueStatsRequest{Name: c.Name})
	if err != nil {
		return named(err, "queue", c.Name)
	}
	return re.printMessage(resp, func(w io.Writer) error {
		s := resp.GetStats()
		tw := newTable(w)
		row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
		row("QUEUE", cell(s.GetQueue()))
		row("PENDING", s.GetPending())
		row("ASSIGNED", s.GetAssigned())
		row("RUNNING", s.GetRunning())
		done, total := strconv.FormatInt(s.GetDone(), 10), strconv.FormatInt(s.GetTotalProcessed(), 10)
		if s.GetDoneEstimated() {
			// Past 10,000 DONE jobs the server estimates instead of counting the history.
			done, total = "≈ "+done+" (estimated)", "≈ "+total
		}
		row("DONE", done)
		row("FAILED", s.GetFailed())
		row("DEAD_LETTERED", s.GetDeadLettered())
		row("TOTAL PROCESSED", total+" (DONE + DEAD_LETTERED stored)")
		window := duration(s.GetWindow())
		row("RECENT WINDOW", window+" (the figures below, ending now)")
		row("FINISHED ATTEMPTS", fmt.Sprintf("%d (%d failed)", s.GetFinished(), s.GetFailedAttempts()))
		rate := fmt.Sprintf("%.1f%%", 100*s.GetErrorRate())
		if s.GetErrorRate() > 0 {
			rate = re.paint(colRed, rate)
		}
		row("ERROR RATE", rate)
		row("AVG PROCESSING TIME", duration(s.GetAvgProcessingTime())+" (latest successes)")
		span := min(time.Minute, s.GetWindow().AsDuration())
		perSec := 0.0
		if span > 0 {
			perSec = float64(s.GetFinishedLastMinute()) / span.Seconds()
		}
		row("THROUGHPUT", fmt.Sprintf("%.1f attempts/s (last minute, %d failed)", perSec, s.GetFailedLastMinute()))
		row("OLDEST PENDING", duration(s.GetOldestPendingAge())+" (oldest due job)")
		return tw.Flush()
	})
}

// Run pauses a queue's dispatch.
func (c *QueuePauseCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.QueueServiceClient.PauseQueue, &jqv1.PauseQueueRequest{Name: c.Name})
	if err != nil {
		return failed(named(err, "queue", c.Name), "cannot pause queue %q", c.Name)
	}
	return re.printMessage(resp, pausedLine(resp.GetQueue()))
}

// Run resumes a paused queue.
func (c *QueueResumeCmd) Run(re *runEnv) error {
	resp, err := call(re, jqv1connect.QueueServiceClient.ResumeQueue, &jqv1.ResumeQueueRequest{Name: c.Name})
	if err != nil {
		return failed(named(err, "queue", c.Name), "cannot resume queue %q", c.Name)
	}
	return re.printMessage(resp, pausedLine(resp.GetQueue()))
}

// pausedLine is the table output of pause and resume: whether the queue dispatches now.
func pausedLine(q *jqv1.Queue) func(io.Writer) error {
	return func(w io.Writer) error {
		word := "resumed: dispatching"
		if q.GetPaused() {
			word = "paused: submits are accepted, nothing is dispatched until it is resumed"
		}
		_, err := fmt.Fprintf(w, "queue %s %s\n", cell(q.GetName()), word)
		return err
	}
}
