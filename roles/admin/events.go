package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/api/codec"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/queue"
)

// EventStream reads the events topic (store/kafka.Tail).
type EventStream interface {
	// Next blocks until the next message and returns its value: a protobuf jq.v1.JobEvent.
	Next(ctx context.Context) ([]byte, error)
	Close() error
}

// OpenEventStream opens an EventStream on k.TopicEvents, positioned at the end of the topic.
type OpenEventStream func(ctx context.Context, k config.Kafka) (EventStream, error)

// Help is the long help of `events tail`.
func (c *EventsTailCmd) Help() string {
	return `One line per event: time, job id, queue, from→to, reason, worker, attempt; -o json prints one
JSON object per line (the fields of job logs -o json), -o yaml one document per event. Ctrl-C ends
it with exit 0.

From Kafka (--source kafka, or auto when the server reports Kafka enabled) every event published
from now on is shown, in order per job; the brokers, topic, TLS and SASL settings are this
process's kafka.* configuration (--config, JQ_KAFKA_BROKERS, ...). It joins no consumer group and
commits nothing. An event the relay published twice (after a crash) is shown once.

From Postgres (--source postgres, or auto with Kafka off) the server streams every event recorded
from now on (of --queue, or of every queue) as it records it (WatchEvents): at once for the
transitions its own engine makes, within a second for the others (the reaper, other replicas). If
the stream breaks (a server restart) it is opened again every --interval; the events recorded
meanwhile are not shown. With --job that job is followed exactly (its whole history first), and the
tail ends (exit 0) after the event that moves the job to DONE or DEAD_LETTERED.

A server without WatchEvents (an older jq) is polled every --interval instead: the tail then
watches the newest 1,000 jobs and the newest 1,000 being worked on, and misses a job outside both.`
}

// Run follows events until ctx ends (Ctrl-C), which is success.
func (c *EventsTailCmd) Run(re *runEnv) error {
	if c.Interval <= 0 {
		return usagef("--interval %s: must be positive", c.Interval)
	}
	if c.Queue != "" {
		if err := queue.ValidateQueueName(c.Queue); err != nil {
			return usagef("--queue: %v", err)
		}
	}
	src, err := c.source(re)
	if err != nil {
		return err
	}
	out := &eventPrinter{re: re, filter: eventFilter{queue: c.Queue, job: c.Job}}
	parent := re.ctx
	if c.Job != "" {
		// Following one job ends with the job: the event that moves it to DONE or DEAD_LETTERED.
		ctx, stop := context.WithCancel(parent)
		defer stop()
		re.ctx, out.ended = ctx, stop
		defer func() { re.ctx = parent }()
	}
	if src == "kafka" {
		err = c.followKafka(re, out)
	} else {
		err = c.followPostgres(re, out)
	}
	if re.ctx.Err() != nil {
		return nil // Ctrl-C, or the followed job ended
	}
	return err
}

// source picks kafka or postgres.
func (c *EventsTailCmd) source(re *runEnv) (string, error) {
	if c.Source != "auto" {
		return c.Source, nil
	}
	st, err := call(re, jqv1connect.AdminServiceClient.GetStatus, &jqv1.GetStatusRequest{})
	if err != nil {
		return "", err
	}
	for _, comp := range st.GetComponents() {
		if comp.GetName() == "kafka" { // reported only when kafka.enabled
			return "kafka", nil
		}
	}
	return "postgres", nil
}

func (c *EventsTailCmd) followKafka(re *runEnv, out *eventPrinter) error {
	if c.OpenKafka == nil {
		return errors.New("this jq cannot read Kafka; use --source postgres")
	}
	k := config.Default().Kafka
	if re.Config != nil {
		k = re.Config.Kafka
	}
	ctx, cancel := re.callCtx()
	stream, err := c.OpenKafka(ctx, k)
	cancel()
	if err != nil {
		return fmt.Errorf("cannot follow Kafka topic %s on %s: %w", k.TopicEvents, strings.Join(k.Brokers, ","), err)
	}
	defer func() { _ = stream.Close() }()
	out.notice("following Kafka topic %s on %s (Ctrl-C to stop)", k.TopicEvents, strings.Join(k.Brokers, ","))
	seen := newSeqs()
	if c.Job != "" {
		// The stream is positioned before the history is read: nothing falls in between.
		evs, err := c.history(re)
		if err != nil {
			return err
		}
		for _, e := range evs {
			seen.fresh(e)
			out.print(e)
		}
	}
	return followStream(re.ctx, stream, out, seen)
}

// followStream prints the stream's events until ctx ends or the stream fails. A message that is
// not a JobEvent is reported on stderr and skipped.
func followStream(ctx context.Context, stream EventStream, out *eventPrinter, seen *seqs) error {
	for {
		v, err := stream.Next(ctx)
		if err != nil {
			return err
		}
		e := new(jqv1.JobEvent)
		if err := proto.Unmarshal(v, e); err != nil || e.GetJobId() == "" {
			out.notice("skipped a message that is not a jq.v1.JobEvent (%d bytes)", len(v))
			continue
		}
		if seen.fresh(e) {
			out.print(e)
		}
	}
}

func (c *EventsTailCmd) history(re *runEnv) ([]*jqv1.JobEvent, error) {
	resp, err := call(re, jqv1connect.JobServiceClient.ListJobEvents, &jqv1.ListJobEventsRequest{JobId: c.Job})
	if err != nil {
		return nil, named(err, "job", c.Job)
	}
	return resp.GetEvents(), nil
}

// seqs remembers each job's last sequence number printed, to drop the duplicates of at-least-once
// delivery. It forgets everything past maxSeqs jobs: a very late duplicate may then show.
type seqs struct{ last map[string]int64 }

const maxSeqs = 100_000

func newSeqs() *seqs { return &seqs{last: map[string]int64{}} }

// fresh reports whether e is newer than what was printed for its job, and records it.
func (s *seqs) fresh(e *jqv1.JobEvent) bool {
	if last, ok := s.last[e.GetJobId()]; ok && e.GetSeq() <= last {
		return false
	}
	if len(s.last) >= maxSeqs {
		clear(s.last)
	}
	s.last[e.GetJobId()] = e.GetSeq()
	return true
}

// eventFilter is --queue and --job.
type eventFilter struct{ queue, job string }

func (f eventFilter) match(e *jqv1.JobEvent) bool {
	return (f.queue == "" || e.GetQueue() == f.queue) && (f.job == "" || strings.EqualFold(e.GetJobId(), f.job))
}

// eventPrinter writes events in the chosen format, one line (or document) each, as they come.
type eventPrinter struct {
	re       *runEnv
	filter   eventFilter
	headered bool
	// ended, when set, is called after an event that ends its job (to DONE or DEAD_LETTERED):
	// `events tail --job` stops there.
	ended func()
}

// Column widths of the table format; longer values push the line, they are never cut.
const (
	wTime, wJob, wQueue, wMove, wReason, wWorker = 24, 36, 16, 27, 20, 16
)

func (p *eventPrinter) print(e *jqv1.JobEvent) {
	if !p.filter.match(e) {
		return
	}
	if p.ended != nil && (e.GetToState() == jqv1.JobState_JOB_STATE_DONE || e.GetToState() == jqv1.JobState_JOB_STATE_DEAD_LETTERED) {
		defer p.ended()
	}
	re := p.re
	switch re.globals.Output {
	case "json":
		b, err := codec.MarshalJSON(protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: true}, e)
		if err == nil {
			fmt.Fprintln(re.Stdout, string(b))
		}
	case "yaml":
		b, err := codec.MarshalJSON(protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: true}, e)
		if err != nil {
			return
		}
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil { // JSON is YAML
			return
		}
		y, err := yaml.Marshal(v)
		if err == nil {
			fmt.Fprintf(re.Stdout, "---\n%s", y)
		}
	default:
		if !p.headered {
			p.headered = true
			fmt.Fprintln(re.Stdout, strings.TrimRight(pad("TIME", wTime)+pad("JOB", wJob)+pad("QUEUE", wQueue)+
				pad("FROM→TO", wMove)+pad("REASON", wReason)+pad("WORKER", wWorker)+"ATTEMPT", " "))
		}
		fmt.Fprintln(re.Stdout, p.line(e))
	}
}

// line is the table format of one event.
func (p *eventPrinter) line(e *jqv1.JobEvent) string {
	from := "-"
	if e.GetFromState() != jqv1.JobState_JOB_STATE_UNSPECIFIED {
		from = stateName(e.GetFromState())
	}
	at := "-"
	if e.GetTimestamp() != nil {
		at = e.GetTimestamp().AsTime().UTC().Format("2006-01-02T15:04:05.000Z")
	}
	move := from + "→" + stateName(e.GetToState())
	painted := from + "→" + p.re.state(e.GetToState())
	return pad(at, wTime) + pad(cell(e.GetJobId()), wJob) + pad(cell(e.GetQueue()), wQueue) +
		painted + strings.Repeat(" ", max(wMove-utf8.RuneCountInString(move), 0)+2) +
		pad(dash(e.GetReason()), wReason) + pad(dash(e.GetWorkerId()), wWorker) + fmt.Sprint(e.GetAttempt())
}

// notice writes a status line on stderr in the table format only, so json and yaml stay parseable
// even when both streams are captured together.
func (p *eventPrinter) notice(format string, args ...any) {
	if p.re.globals.Output == "table" {
		fmt.Fprintf(p.re.Stderr, "jq: "+format+"\n", args...)
	}
}

// pad left-aligns s in a column of width w, with at least two spaces after it.
func pad(s string, w int) string {
	return s + strings.Repeat(" ", max(w-utf8.RuneCountInString(s), 0)+2)
}
