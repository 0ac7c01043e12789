package e2e

// End-to-end test of the Prometheus metrics (FR-039/FR-040, seed 004): a server process and
// a worker process run a known mix of jobs; both /metrics endpoints are scraped over HTTP and every
// metric is checked for its type, its labels and its value against what went through. promlint
// lints both scrapes.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/test/internal/jqbin"
)

// scrape is one parsed /metrics response.
type scrape struct {
	raw      []byte
	families map[string]*dto.MetricFamily
}

func scrapeMetrics(port int) (scrape, error) {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/metrics")
	if err != nil {
		return scrape{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return scrape{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return scrape{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return scrape{}, fmt.Errorf("parse /metrics: %w", err)
	}
	return scrape{raw: raw, families: fams}, nil
}

// family returns a metric family after checking its type and label names (every series carries
// exactly labels).
func (s scrape) family(t *testing.T, name string, typ dto.MetricType, labels ...string) *dto.MetricFamily {
	t.Helper()
	f, ok := s.families[name]
	require.True(t, ok, "metric %s missing", name)
	require.Equal(t, typ, f.GetType(), "type of %s", name)
	require.NotEmpty(t, f.GetMetric(), "%s has no series", name)
	want := slices.Clone(labels)
	sort.Strings(want)
	for _, m := range f.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName())
		}
		sort.Strings(got)
		require.Equal(t, want, got, "label names of %s", name)
	}
	return f
}

// value is the sample of name with exactly these label values (counter or gauge value, or a
// histogram's count); ok is false when there is no such series.
func (s scrape) value(name string, labels ...string) (float64, bool) {
	f, ok := s.families[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels)/2 {
			continue
		}
		for i := 0; i < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// expect is a wanted sample: name, label pairs, value.
type expect struct {
	name   string
	labels []string
	want   float64
}

func (s scrape) mismatches(want []expect) error {
	var errs []error
	for _, e := range want {
		got, ok := s.value(e.name, e.labels...)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s%v missing", e.name, e.labels))
		case got != e.want:
			errs = append(errs, fmt.Errorf("%s%v = %v, want %v", e.name, e.labels, got, e.want))
		}
	}
	return errors.Join(errs...)
}

// acceptedLint is the one finding of the Prometheus linter that jq keeps on purpose: FR-040 names the
// gauge of active workers jq_worker_active_count, and the linter reserves _count for histograms
// and summaries (docs/observability.md).
const acceptedLint = `jq_worker_active_count non-histogram and non-summary metrics should not have "_count" suffix`

// lintScrape lints a scrape in-process with client_golang's promlint (the linter behind
// `promtool check metrics`, without installing Debian's whole prometheus package); it must report
// nothing but acceptedLint.
func lintScrape(t *testing.T, what string, raw []byte) {
	t.Helper()
	found, err := promlint.New(bytes.NewReader(raw)).Lint()
	require.NoError(t, err, "promlint on the %s scrape", what)
	var problems []string
	for _, p := range found {
		if line := p.Metric + " " + p.Text; line != acceptedLint {
			problems = append(problems, line)
		}
	}
	require.Empty(t, problems, "promlint on the %s scrape", what)
}

func TestMetricsE2E(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	se := c.startServer()
	ctx := c.ctx()

	// The mix, on three queues: qOK gets successes (one submitted twice with an idempotency key)
	// and a delayed job that is cancelled; qFail retryable failures that use up 2 retries and
	// permanent failures that dead-letter at once; qTTL, served by no worker, one job whose TTL
	// expires.
	const (
		qOK, qFail, qTTL     = "m-ok", "m-fail", "m-ttl"
		successes, retryable = 12, 4
		permanent, retries   = 3, 2
	)
	maxRetries := int32(retries)
	for _, q := range []string{qOK, qFail, qTTL} {
		_, err := c.client.Queues.CreateQueue(ctx, connect.NewRequest(&jqv1.CreateQueueRequest{
			Name: q, MaxRetries: &maxRetries,
			BackoffBase: durationpb.New(10 * time.Millisecond), BackoffMax: durationpb.New(50 * time.Millisecond),
		}))
		require.NoError(t, err)
	}
	workerMetrics := jqbin.FreePort(t)
	const workerID = "metrics-worker"
	jqbin.Start(t, []string{
		"JQ_WORKER_HEALTH_PORT=" + strconv.Itoa(jqbin.FreePort(t)),
		"JQ_WORKER_METRICS_PORT=" + strconv.Itoa(workerMetrics),
		"JQ_WORKER_ACK_DELAY_MS=0", // every start acknowledged, so the ack statement is timed too
	}, "--role=worker", "--server-addr", se.Addr(), "--worker-id", workerID, "--concurrency", "4",
		"--queues", qOK+","+qFail)

	spec := func(q, payload string) *jqv1.JobSpec {
		return &jqv1.JobSpec{Queue: q, Type: "sleep", Payload: []byte(payload)}
	}
	var ids []string
	submits := 0
	submit := func(s *jqv1.JobSpec) string {
		submits++
		id := c.submit(ctx, s)
		ids = append(ids, id)
		return id
	}
	for range successes - 1 {
		submit(spec(qOK, `{"ms":1}`))
	}
	keyed := spec(qOK, `{"ms":1}`)
	keyed.IdempotencyKey = "metrics-once"
	require.Equal(t, submit(keyed), submit(keyed), "an idempotent repeat is the same job")
	for range retryable {
		submit(spec(qFail, `{"ms":1,"fail":true,"retryable":true}`))
	}
	for range permanent {
		submit(spec(qFail, `{"ms":1,"fail":true,"retryable":false}`))
	}
	delayed := spec(qOK, `{"ms":1}`)
	delayed.RunAt = timestamppb.New(time.Now().Add(time.Hour))
	cancelled := submit(delayed)
	_, err := c.client.Jobs.CancelJob(ctx, connect.NewRequest(&jqv1.CancelJobRequest{JobId: cancelled}))
	require.NoError(t, err)
	expiring := spec(qTTL, `{"ms":1}`)
	expiring.Ttl = durationpb.New(50 * time.Millisecond)
	submit(expiring)
	// One refused call, for the status_code label.
	_, err = c.client.Jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: "0b8f4a0e-4c1b-4a53-9a57-a1f1b1c2d3e4"}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))

	// Everything settles: DONE or DEAD_LETTERED.
	testenv.Eventually(t, 90*time.Second, func() error {
		for _, id := range ids {
			switch s := c.job(ctx, id).GetState(); s {
			case jqv1.JobState_JOB_STATE_DONE, jqv1.JobState_JOB_STATE_DEAD_LETTERED:
			default:
				return fmt.Errorf("job %s is %v", id, s)
			}
		}
		return nil
	})

	produced := successes + retryable + permanent + 2 // + the cancelled and the expired job
	attemptsFail := retryable*(retries+1) + permanent
	attempts := successes + attemptsFail
	deadLetters := retryable + permanent + 2
	n := func(v int) float64 { return float64(v) }
	serverWant := []expect{
		{"jq_jobs_produced_total", nil, n(produced)},
		{"jq_jobs_consumed_total", nil, n(attempts)},
		{"jq_jobs_completed_total", nil, n(successes)},
		{"jq_jobs_failed_total", nil, n(attemptsFail)},
		{"jq_jobs_retried_total", nil, n(retryable * retries)},
		{"jq_jobs_dead_letter_total", nil, n(deadLetters)},

		{"jq_job_total", []string{"queue", qOK, "status", "PENDING"}, n(successes + 1)},
		{"jq_job_total", []string{"queue", qOK, "status", "ASSIGNED"}, n(successes)},
		{"jq_job_total", []string{"queue", qOK, "status", "RUNNING"}, n(successes)},
		{"jq_job_total", []string{"queue", qOK, "status", "DONE"}, n(successes)},
		{"jq_job_total", []string{"queue", qOK, "status", "FAILED"}, 0},
		{"jq_job_total", []string{"queue", qOK, "status", "DEAD_LETTERED"}, 1},
		{"jq_job_total", []string{"queue", qFail, "status", "PENDING"}, n(retryable + permanent + retryable*retries)},
		{"jq_job_total", []string{"queue", qFail, "status", "ASSIGNED"}, n(attemptsFail)},
		{"jq_job_total", []string{"queue", qFail, "status", "RUNNING"}, n(attemptsFail)},
		{"jq_job_total", []string{"queue", qFail, "status", "DONE"}, 0},
		{"jq_job_total", []string{"queue", qFail, "status", "FAILED"}, n(attemptsFail)},
		{"jq_job_total", []string{"queue", qFail, "status", "DEAD_LETTERED"}, n(retryable + permanent)},
		{"jq_job_total", []string{"queue", qTTL, "status", "PENDING"}, 1},
		{"jq_job_total", []string{"queue", qTTL, "status", "DEAD_LETTERED"}, 1},

		{"jq_scheduler_jobs_assigned_total", []string{"queue", qOK}, n(successes)},
		{"jq_scheduler_jobs_assigned_total", []string{"queue", qFail}, n(attemptsFail)},
		{"jq_job_processing_duration_seconds", []string{"queue", qOK}, n(successes)},
		{"jq_job_processing_duration_seconds", []string{"queue", qFail}, n(attemptsFail)},
		{"jq_job_wait_duration_seconds", []string{"queue", qOK}, n(successes)},
		{"jq_job_wait_duration_seconds", []string{"queue", qFail}, n(attemptsFail)},

		{"jq_worker_active_count", nil, 1},
		{"jq_kafka_publish_errors_total", []string{"topic", "jq.job-events"}, 0},
		{"jq_kafka_publish_errors_total", []string{"topic", "job.dead-lettered"}, 0},
		{"jq_grpc_request_duration_seconds", []string{"method", "/jq.v1.JobService/SubmitJob", "status_code", "ok"}, n(submits)},
		{"jq_grpc_request_duration_seconds", []string{"method", "/jq.v1.JobService/GetJob", "status_code", "not_found"}, 1},
		{"jq_grpc_request_duration_seconds", []string{"method", "/jq.v1.JobService/CancelJob", "status_code", "ok"}, 1},
	}
	for _, q := range []string{qOK, qFail, qTTL, "default"} {
		for _, st := range []string{"PENDING", "ASSIGNED", "RUNNING", "FAILED"} {
			serverWant = append(serverWant, expect{"jq_job_queue_depth", []string{"queue", q, "status", st}, 0})
		}
		serverWant = append(serverWant, expect{"jq_queue_length", []string{"queue", q}, 0})
	}
	serverWant = append(serverWant,
		expect{"jq_job_queue_depth", []string{"queue", qOK, "status", "DEAD_LETTERED"}, 1},
		expect{"jq_job_queue_depth", []string{"queue", qFail, "status", "DEAD_LETTERED"}, n(retryable + permanent)},
		expect{"jq_job_queue_depth", []string{"queue", qTTL, "status", "DEAD_LETTERED"}, 1},
		expect{"jq_job_queue_depth", []string{"queue", "default", "status", "DEAD_LETTERED"}, 0},
	)
	workerWant := []expect{
		{"jq_worker_active", nil, 1},
		{"jq_worker_job_concurrency", []string{"worker_id", workerID}, 0},
		{"jq_circuit_breaker_state", []string{"queue", qOK}, 0},
		{"jq_circuit_breaker_state", []string{"queue", qFail}, 0}, // 12 retryable failures: below min_samples
		{"jq_worker_jobs_total", []string{"queue", qOK, "outcome", "succeeded"}, n(successes)},
		{"jq_worker_jobs_total", []string{"queue", qFail, "outcome", "failed"}, n(attemptsFail)},
		{"jq_worker_job_duration_seconds", []string{"queue", qOK}, n(successes)},
		{"jq_worker_job_duration_seconds", []string{"queue", qFail}, n(attemptsFail)},
	}

	// The counters follow the commits within moments; the depth gauges within one measurement
	// interval (5 s).
	var srv, wrk scrape
	testenv.Eventually(t, 30*time.Second, func() error {
		var err error
		if srv, err = scrapeMetrics(se.MetricsPort); err != nil {
			return err
		}
		if wrk, err = scrapeMetrics(workerMetrics); err != nil {
			return err
		}
		return errors.Join(srv.mismatches(serverWant), wrk.mismatches(workerWant))
	})

	// Every metric of FR-040 and seed 004, with its type and label names.
	counter, gauge, histogram := dto.MetricType_COUNTER, dto.MetricType_GAUGE, dto.MetricType_HISTOGRAM
	for _, m := range []struct {
		name   string
		typ    dto.MetricType
		labels []string
	}{
		{"jq_job_queue_depth", gauge, []string{"queue", "status"}},
		{"jq_job_processing_duration_seconds", histogram, []string{"queue"}},
		{"jq_job_total", counter, []string{"queue", "status"}},
		{"jq_worker_active_count", gauge, nil},
		{"jq_grpc_request_duration_seconds", histogram, []string{"method", "status_code"}},
		{"jq_scheduler_cycle_duration_seconds", histogram, nil},
		{"jq_scheduler_jobs_assigned_total", counter, []string{"queue"}},
		{"jq_kafka_publish_errors_total", counter, []string{"topic"}},
		{"jq_db_query_duration_seconds", histogram, []string{"query_name"}},
		{"jq_redis_operation_duration_seconds", histogram, []string{"operation"}},
		{"jq_jobs_produced_total", counter, nil},
		{"jq_jobs_consumed_total", counter, nil},
		{"jq_jobs_completed_total", counter, nil},
		{"jq_jobs_failed_total", counter, nil},
		{"jq_jobs_retried_total", counter, nil},
		{"jq_jobs_dead_letter_total", counter, nil},
		{"jq_queue_length", gauge, []string{"queue"}},
		{"jq_job_wait_duration_seconds", histogram, []string{"queue"}},
		{"jq_listener_connections_refused_total", counter, []string{"listener", "reason"}},
		{"jq_listener_connections_open", gauge, []string{"listener"}},
	} {
		srv.family(t, m.name, m.typ, m.labels...)
	}
	for _, m := range []struct {
		name   string
		typ    dto.MetricType
		labels []string
	}{
		{"jq_worker_active", gauge, nil},
		{"jq_worker_job_concurrency", gauge, []string{"worker_id"}},
		{"jq_circuit_breaker_state", gauge, []string{"queue"}},
		{"jq_worker_jobs_total", counter, []string{"queue", "outcome"}},
		{"jq_worker_job_duration_seconds", histogram, []string{"queue"}},
		{"jq_listener_connections_refused_total", counter, []string{"listener", "reason"}},
		{"jq_listener_connections_open", gauge, []string{"listener"}},
	} {
		wrk.family(t, m.name, m.typ, m.labels...)
	}

	// The scrape itself is a connection the metrics listener holds; nothing was refused.
	for _, sc := range []scrape{srv, wrk} {
		open, ok := sc.value("jq_listener_connections_open", "listener", "metrics")
		require.True(t, ok && open >= 1, "the scrape's own connection is open")
		refused, ok := sc.value("jq_listener_connections_refused_total", "listener", "health", "reason", "per_source")
		require.True(t, ok)
		require.Zero(t, refused)
	}

	// Histograms whose count is not fixed by the mix: they saw the work.
	cycles, _ := srv.value("jq_scheduler_cycle_duration_seconds")
	require.Positive(t, cycles, "scheduler cycles observed")
	for _, q := range []string{"job_insert_many", "job_claim", "job_ack_many", "job_report_many", "job_failed_lock", "job_settle_failed", "depth_snapshot"} {
		v, ok := srv.value("jq_db_query_duration_seconds", "query_name", q)
		require.True(t, ok && v > 0, "statement %s timed", q)
	}
	for _, op := range []string{"inflight_add", "inflight_remove"} {
		v, ok := srv.value("jq_redis_operation_duration_seconds", "operation", op)
		require.True(t, ok && v > 0, "redis operation %s timed", op)
	}
	_, evalsha := srv.value("jq_redis_operation_duration_seconds", "operation", "evalsha")
	require.False(t, evalsha, "jq's scripts are timed under their names")
	// Bounded labels: no job id anywhere.
	for _, id := range ids {
		require.NotContains(t, string(srv.raw), id)
		require.NotContains(t, string(wrk.raw), id)
	}

	lintScrape(t, "server", srv.raw)
	lintScrape(t, "worker", wrk.raw)
}
