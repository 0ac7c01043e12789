// Package admin is `jq --role=admin`: the operator commands of SPEC §1 (seed
// 002's jq-ctl plus seed 004's stats, peek and purge-dlq). Every command talks
// to a server only through its API, with the Go client (package client) and,
// for the calls it does not wrap, the generated stubs under it (call.go).
package admin

import (
	"time"
)

// Globals are the connection and output flags every admin command accepts.
type Globals struct {
	ServerAddr string        `help:"Address of the jq server's API." default:"localhost:50051" env:"JQ_SERVER_ADDR" placeholder:"HOST:PORT"`
	TLSCert    string        `name:"tls-cert" help:"Client certificate for mTLS (PEM)." type:"path" placeholder:"PATH"`
	TLSKey     string        `name:"tls-key" help:"Client private key for mTLS (PEM)." type:"path" placeholder:"PATH"`
	TLSCA      string        `name:"tls-ca" help:"CA bundle that signed the server certificate (PEM); enables TLS." type:"path" placeholder:"PATH"`
	Token      string        `help:"API token sent to the server (prefer JQ_TOKEN or --token-file: a flag is visible to other users of the machine)." env:"JQ_TOKEN" placeholder:"TOKEN"`
	TokenFile  string        `help:"File holding the API token." type:"path" env:"JQ_TOKEN_FILE" placeholder:"PATH"`
	Output     string        `short:"o" help:"Output format: table, json or yaml." enum:"table,json,yaml" default:"table"`
	Timeout    time.Duration `help:"Deadline of each request; a command that runs past it fails." default:"10s"`
}

// Commands is the admin command tree.
type Commands struct {
	Globals `group:"global"`

	Job        JobCmd        `cmd:"" help:"Submit, inspect, cancel and retry jobs."`
	Queue      QueueCmd      `cmd:"" help:"Create, delete, pause and inspect queues."`
	Worker     WorkerCmd     `cmd:"" help:"List, drain, resume and shut down workers."`
	Schedule   ScheduleCmd   `cmd:"" help:"Periodic jobs: create, list, show, pause, resume, trigger and delete schedules."`
	Constraint ConstraintCmd `cmd:"" help:"Flow control: create, list, show and delete constraints (at most N running and N starts per interval, per key, of the jobs a matcher selects)."`
	Status     StatusCmd     `cmd:"" help:"System health: server, workers, queue depths, Postgres/Redis/Kafka (exit 1 when unhealthy)."`
	Version    VersionCmd    `cmd:"" help:"Client and server versions."`
	Stats      StatsCmd      `cmd:"" help:"Dispatch counters per queue: ready, in flight, dead-lettered, live heartbeats."`
	Peek       PeekCmd       `cmd:"" help:"Show the next jobs of a queue in dispatch order, or the newest dead letters with --dead."`
	PurgeDLQ   PurgeDLQCmd   `cmd:"" name:"purge-dlq" help:"Delete dead-lettered jobs with their history (all queues or one); refuses without --yes."`
	RedriveDLQ RedriveDLQCmd `cmd:"" name:"redrive-dlq" help:"Retry dead-lettered jobs (all queues or one, up to --limit) with reset retry counters; refuses without --yes."`
	Bench      BenchCmd      `cmd:"" help:"Load generator: submit jobs and report submit and end-to-end throughput and latency."`
	Events     EventsCmd     `cmd:"" help:"Lifecycle events."`
	Tokens     TokenCmd      `cmd:"" name:"token" help:"API tokens: issue one for a server's auth.tokens (no server needed)."`
}

// JobCmd groups the job commands.
type JobCmd struct {
	Submit JobSubmitCmd `cmd:"" help:"Submit a job; prints its id and nothing else."`
	Status JobStatusCmd `cmd:"" help:"Show a job: state, progress while it runs (what its handler last reported with queue.Progress, at most once a second), payload, result, retries and times."`
	Cancel JobCancelCmd `cmd:"" help:"Cancel a job (PENDING, ASSIGNED and FAILED are dead-lettered with reason cancelled; RUNNING is asked to stop)."`
	Retry  JobRetryCmd  `cmd:"" help:"Retry a FAILED or DEAD_LETTERED job with a reset retry counter."`
	Delete JobDeleteCmd `cmd:"" help:"Delete a finished (DONE or DEAD_LETTERED) job with its result and history."`
	List   JobListCmd   `cmd:"" help:"List jobs, newest first, filtered by queue, state, type, labels and time; prints a --page-token hint on stderr when more remain."`
	Logs   JobLogsCmd   `cmd:"" help:"The job's state transitions in order, with time and reason."`
	Wait   JobWaitCmd   `cmd:"" help:"Wait until a job ends (DONE or DEAD_LETTERED), without a deadline unless --wait-timeout (e.g. --wait-timeout 5m), following the server's WatchJob stream with a live status line on a terminal: prints its final state; exit 0 when DONE, 1 when dead-lettered (cancelled included) or still running at the deadline, 3 when there is no such job."`
	Result JobResultCmd `cmd:"" help:"Print a job's result: a success's bytes exactly as reported on stdout (exit 0); a failure's reason and message as one line on stderr (exit 1); one line saying why when there is none: not finished, not kept, consumed or past the queue's result retention (exit 1); exit 3 when there is no such job. -o json prints the whole answer."`
}

// JobSubmitCmd is `job submit`.
type JobSubmitCmd struct {
	Queue          string            `help:"Queue to submit to." default:"default" predictor:"queue"`
	Payload        string            `help:"Payload: JSON text, or @file to read it from a file (@- for stdin)." default:"{}"`
	Type           string            `help:"Job type: the handler that runs it. Built-in: noop, sleep ({\"ms\":250}), synthetic ({\"work_duration_ms\":300}), exec ({\"argv\":[...]}, off unless enabled on the worker), file ({\"path\":...}), http ({\"url\":...}); or an application's own." default:"noop"`
	Priority       int               `help:"0-9, 9 runs first." default:"0"`
	MaxRetries     *int              `help:"Retries after a failure (default: the queue's)."`
	TTL            time.Duration     `name:"ttl" help:"Dead-letter the job if it has not started within this time."`
	RunAt          string            `help:"Earliest start time (RFC 3339)." xor:"start"`
	Delay          time.Duration     `help:"Earliest start, relative to now." xor:"start"`
	JobTimeout     time.Duration     `help:"Execution limit of one attempt (default 30s). (--timeout is the request deadline of every admin command.)"`
	IdempotencyKey string            `help:"Submitting the same key and spec again returns the first job."`
	Label          map[string]string `help:"Label k=v (repeatable)." mapsep:"none"`
	KeepResult     bool              `help:"Keep the result until fetched."`
	Wait           bool              `help:"Wait until the job ends, as job wait does: prints its id and final state; exit 0 when DONE, 1 otherwise. No deadline unless --wait-timeout; a live status line on a terminal."`
	WaitTimeout    time.Duration     `help:"With --wait, give up after this long (exit 1); default: wait until the job ends."`
}

// JobWaitCmd is `job wait`.
type JobWaitCmd struct {
	ID          string        `arg:"" help:"Job id."`
	WaitTimeout time.Duration `help:"Give up after this long (exit 1); default: wait until the job ends."`
}

// JobResultCmd is `job result`.
type JobResultCmd struct {
	ID      string `arg:"" help:"Job id."`
	Consume bool   `help:"Delete the result as it is returned, so that no one fetches it again."`
}

// JobStatusCmd is `job status`.
type JobStatusCmd struct {
	ID string `arg:"" help:"Job id."`
}

// JobCancelCmd is `job cancel`.
type JobCancelCmd struct {
	ID string `arg:"" help:"Job id."`
}

// JobRetryCmd is `job retry`.
type JobRetryCmd struct {
	ID string `arg:"" help:"Job id."`
}

// JobDeleteCmd is `job delete`.
type JobDeleteCmd struct {
	ID string `arg:"" help:"Job id."`
}

// JobLogsCmd is `job logs`.
type JobLogsCmd struct {
	ID string `arg:"" help:"Job id."`
}

// JobListCmd is `job list`.
type JobListCmd struct {
	Queue     string            `help:"Only this queue." predictor:"queue"`
	Status    string            `help:"Only these states (comma-separated): PENDING, ASSIGNED, RUNNING, DONE, FAILED, DEAD_LETTERED."`
	Type      string            `help:"Only jobs of this type."`
	Label     map[string]string `help:"Only jobs with this label (key=value; repeat for several, all must match)."`
	Scheduled bool              `help:"Only scheduled jobs: PENDING and not due yet (delayed submits, retries in backoff)."`
	// Times: RFC 3339, or a duration meaning that long ago (2h).
	CreatedAfter    string `help:"Only jobs created at or after this time: RFC 3339 (2026-01-02T15:04:05Z) or a duration ago (2h)."`
	CreatedBefore   string `help:"Only jobs created before this time (RFC 3339 or a duration ago)."`
	CompletedAfter  string `help:"Only jobs completed (DONE or DEAD_LETTERED) at or after this time (RFC 3339 or a duration ago)."`
	CompletedBefore string `help:"Only jobs completed before this time (RFC 3339 or a duration ago)."`
	Limit           int    `help:"Jobs per page, 1-1000." default:"20"`
	PageToken       string `help:"Continue after a previous page (printed at its end)."`
	Payloads        bool   `help:"Include each job's payload and kept result in --output json/yaml (pages of large jobs then hold fewer jobs)."`
}

// QueueCmd groups the queue commands.
type QueueCmd struct {
	List   QueueListCmd   `cmd:"" help:"List queues."`
	Create QueueCreateCmd `cmd:"" help:"Create a queue."`
	Update QueueUpdateCmd `cmd:"" help:"Change a queue's settings; the flags not given keep their value. Applies on every server replica without a restart."`
	Delete QueueDeleteCmd `cmd:"" help:"Delete a queue; refuses a queue that still holds jobs unless --force."`
	Stats  QueueStatsCmd  `cmd:"" help:"Jobs by state (DONE estimated past 10,000), and the last hour's finished attempts, error rate, run time and throughput."`
	Pause  QueuePauseCmd  `cmd:"" help:"Stop dispatching the queue's jobs (submits are still accepted)."`
	Resume QueueResumeCmd `cmd:"" help:"Resume dispatching a paused queue."`
}

// QueueListCmd is `queue list`.
type QueueListCmd struct{}

// QueueCreateCmd is `queue create`.
type QueueCreateCmd struct {
	Name            string        `arg:"" help:"Queue name: lowercase letters, digits, '.', '_' or '-', at most 64."`
	MaxRetries      *int          `help:"Default retries of the queue's jobs (default 3)."`
	TTL             time.Duration `name:"ttl" help:"Default time-to-live of the queue's jobs."`
	PriorityWeights string        `help:"Weights per priority, e.g. 9=10,0=1: due levels share dispatch in proportion; unlisted levels get what the listed leave (default: strict priority)."`
	BackoffBase     time.Duration `help:"Retry backoff base (default 5s)."`
	BackoffMax      time.Duration `help:"Retry backoff cap (default 300s)."`
	ResultRetention time.Duration `help:"How long a kept result (keep_result) waits for its fetch after the job completed before it is dropped (default 24h)."`
	MaxWait         time.Duration `help:"Aging: a due job that has waited this long is dispatched before any other, whatever its priority and the weights (default none)."`
}

// QueueUpdateCmd is `queue update`: the flags of create, each optional.
type QueueUpdateCmd struct {
	Name            string         `arg:"" help:"Queue name."`
	MaxRetries      *int           `help:"Default retries of the queue's jobs, 0 to 100."`
	TTL             *time.Duration `name:"ttl" help:"Default time-to-live of the queue's jobs; 0 removes it."`
	PriorityWeights *string        `help:"Weights per priority, e.g. 9=10,0=1; \"strict\" (or \"\") for strict priority."`
	BackoffBase     *time.Duration `help:"Retry backoff base; 0 restores the default (5s)."`
	BackoffMax      *time.Duration `help:"Retry backoff cap; 0 restores the default (300s)."`
	ResultRetention *time.Duration `help:"How long a kept result waits for its fetch; 0 restores the default (24h)."`
	MaxWait         *time.Duration `help:"Aging bound; 0 removes aging."`
}

// QueueDeleteCmd is `queue delete`.
type QueueDeleteCmd struct {
	Name  string `arg:"" help:"Queue name." predictor:"queue"`
	Force bool   `help:"Delete the queue and all its jobs."`
}

// QueueStatsCmd is `queue stats`.
type QueueStatsCmd struct {
	Name string `arg:"" help:"Queue name." predictor:"queue"`
}

// QueuePauseCmd is `queue pause`.
type QueuePauseCmd struct {
	Name string `arg:"" help:"Queue name." predictor:"queue"`
}

// QueueResumeCmd is `queue resume`.
type QueueResumeCmd struct {
	Name string `arg:"" help:"Queue name." predictor:"queue"`
}

// WorkerCmd groups the worker commands.
type WorkerCmd struct {
	List     WorkerListCmd     `cmd:"" help:"List workers: id, host, status, concurrency, running jobs, last heartbeat."`
	Drain    WorkerDrainCmd    `cmd:"" help:"Stop giving the worker new jobs; it finishes the current ones."`
	Shutdown WorkerShutdownCmd `cmd:"" help:"Drain the worker, then make it deregister and exit."`
	Resume   WorkerResumeCmd   `cmd:"" help:"Put a drained worker back to work: it takes new jobs again."`
}

// WorkerListCmd is `worker list`.
type WorkerListCmd struct{}

// WorkerDrainCmd is `worker drain`.
type WorkerDrainCmd struct {
	ID string `arg:"" help:"Worker id." predictor:"worker"`
}

// WorkerResumeCmd is `worker resume`.
type WorkerResumeCmd struct {
	ID string `arg:"" help:"Worker id." predictor:"worker"`
}

// WorkerShutdownCmd is `worker shutdown`.
type WorkerShutdownCmd struct {
	ID          string        `arg:"" help:"Worker id." predictor:"worker"`
	Wait        bool          `help:"Wait until the worker has finished its jobs and gone OFFLINE (a live status line on a terminal); no deadline unless --wait-timeout."`
	WaitTimeout time.Duration `help:"With --wait, give up after this long (exit 1)."`
}

// StatusCmd is `status`.
type StatusCmd struct{}

// VersionCmd is `version`.
type VersionCmd struct{}

// StatsCmd is `stats`.
type StatsCmd struct{}

// PeekCmd is `peek`.
type PeekCmd struct {
	Queue string `arg:"" help:"Queue name." predictor:"queue"`
	N     int    `short:"n" help:"How many jobs, 1-1000." default:"10"`
	Dead  bool   `help:"Show the newest dead-lettered jobs instead."`
	// Payloads also adds the table's PAYLOAD column.
	Payloads bool `help:"Include each job's payload (a PAYLOAD column in the table)."`
}

// PurgeDLQCmd is `purge-dlq`.
type PurgeDLQCmd struct {
	Queue string `help:"Only this queue (default: all queues)." predictor:"queue"`
	Yes   bool   `help:"Really delete (without it the command refuses, exit 2)."`
}

// RedriveDLQCmd is `redrive-dlq`.
type RedriveDLQCmd struct {
	Queue string `help:"Only this queue (default: all queues)."`
	Limit int    `help:"At most this many jobs (1 to 100000)." default:"1000"`
	Yes   bool   `help:"Really retry (without it the command refuses, exit 2)."`
}

// BenchCmd is `bench`.
type BenchCmd struct {
	Jobs        int           `help:"Jobs to submit (ignored with --rate and --duration)." default:"10000"`
	Concurrency int           `short:"c" help:"Concurrent clients." default:"32"`
	Batch       int           `help:"Jobs per SubmitJobs call (1 = unary SubmitJob)." default:"1"`
	Rate        int           `help:"Offered jobs per second, open loop (0 = as fast as possible)."`
	Duration    time.Duration `help:"With --rate: how long to offer load."`
	Queue       string        `help:"Queue to submit to (workers must serve it)." default:"default" predictor:"queue"`
	Type        string        `help:"Handler of the jobs (noop, sleep, ...)." default:"noop"`
	PayloadSize int           `help:"Payload bytes per job." default:"16"`
	NoWait      bool          `help:"Only measure submits; do not wait for the jobs to finish."`
	WaitTimeout time.Duration `help:"How long to wait for the jobs to finish." default:"10m"`
	Collect     string        `help:"Submit nothing: wait for and report the jobs of an earlier run, e.g. to measure draining a backlog submitted with --no-wait. Give the run_ref that run printed (its id and its jobs' creation window: the wait then reads only that window of the queue) or its bare run id (the wait then filters every job of the queue by label)."`
	window      createdWindow // with Collect: the run's creation-time window, when known
	Suite       bool          `help:"Run the standard workloads one after the other against --queue, whose workers must be running and which nothing else should use (docs/performance.md): batch (--jobs in SubmitJobs of 1,000 from 4 clients, with the queue paused; bench/compare uses --jobs 100000), drain (the queue resumed: those jobs run off), rate1000 and rate5000 (single submits offered for --duration, default 20s, from 256 clients), submit (3,000 sequential SubmitJob, or --jobs if fewer). --queue, --type, --payload-size and --wait-timeout apply; the other flags are ignored."`
}

// EventsCmd groups the event commands.
type EventsCmd struct {
	Tail EventsTailCmd `cmd:"" help:"Follow lifecycle events, one line (or JSON object) each, until Ctrl-C: from Kafka when the server has it enabled, else from Postgres through the API."`
}

// EventsTailCmd is `events tail`.
type EventsTailCmd struct {
	Queue    string        `help:"Only this queue." predictor:"queue"`
	Job      string        `help:"Only this job; its history so far is printed first."`
	Source   string        `help:"Where to read: auto (Kafka when the server reports it enabled, else Postgres), kafka (brokers and topic from this process's kafka.* configuration, e.g. JQ_KAFKA_BROKERS) or postgres (the server's event stream through the API)." enum:"auto,kafka,postgres" default:"auto"`
	Interval time.Duration `help:"Postgres source: how often to poll one job (--job) or a server without an event stream, or to reopen a broken stream." default:"1s"`

	// OpenKafka opens the Kafka reader (store/kafka, set by roles/wire.go: this package talks to
	// Kafka only through it). Nil: the Kafka source is unavailable.
	OpenKafka OpenEventStream `kong:"-"`
}
