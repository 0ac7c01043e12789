package telemetry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/store"
)

func TestJobMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewJobMetrics(reg)
	m.KnownQueues([]string{"idle"})
	m.Submitted("q", 3)
	m.Assigned("q", 3)
	for range 3 {
		m.Started("q", 20*time.Millisecond)
	}
	m.Finished("q", queue.StateDone, time.Second)
	m.Finished("q", queue.StateFailed, time.Second)
	m.Failed("q", 1)
	m.Requeued("q", 1)
	m.DeadLettered("q", 1)
	m.SchedulerCycle(time.Millisecond)

	got := gatherValues(t, reg)
	for k, v := range map[string]float64{
		"jq_jobs_produced_total":                         3,
		"jq_jobs_consumed_total":                         3,
		"jq_jobs_completed_total":                        1,
		"jq_jobs_failed_total":                           2,
		"jq_jobs_dead_letter_total":                      1,
		"jq_job_total{queue=q}{status=PENDING}":          4,
		"jq_job_total{queue=q}{status=ASSIGNED}":         3,
		"jq_job_total{queue=q}{status=RUNNING}":          3,
		"jq_job_total{queue=q}{status=DONE}":             1,
		"jq_job_total{queue=q}{status=FAILED}":           2,
		"jq_job_total{queue=q}{status=DEAD_LETTERED}":    1,
		"jq_scheduler_jobs_assigned_total{queue=q}":      3,
		"jq_job_total{queue=idle}{status=DEAD_LETTERED}": 0, // known queues start at zero
		"jq_scheduler_jobs_assigned_total{queue=idle}":   0,
		"jq_job_processing_duration_seconds{queue=idle}": 0,
		"jq_job_wait_duration_seconds{queue=q}":          0,
		"jq_scheduler_cycle_duration_seconds":            0,
		"jq_job_processing_duration_seconds{queue=q}":    0,
		"jq_job_total{queue=idle}{status=PENDING}":       0,
		"jq_job_total{queue=idle}{status=RUNNING}":       0,
		"jq_job_total{queue=idle}{status=ASSIGNED}":      0,
		"jq_job_total{queue=idle}{status=DONE}":          0,
		"jq_job_total{queue=idle}{status=FAILED}":        0,
		"jq_job_wait_duration_seconds{queue=idle}":       0,
	} {
		require.Contains(t, got, k)
		require.InDelta(t, v, got[k], 0, k)
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]uint64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			if h := mt.GetHistogram(); h != nil && len(mt.GetLabel()) > 0 {
				counts[f.GetName()+"/"+mt.GetLabel()[0].GetValue()] = h.GetSampleCount()
			}
		}
	}
	require.Equal(t, uint64(3), counts["jq_job_wait_duration_seconds/q"])
	require.Equal(t, uint64(2), counts["jq_job_processing_duration_seconds/q"])
	require.Equal(t, uint64(0), counts["jq_job_processing_duration_seconds/idle"])
}

func TestDepthGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	snap := store.DepthSnapshot{
		Queues:        []string{"a", "b"},
		Jobs:          map[string]map[queue.State]int64{"a": {queue.StatePending: 5, queue.StateDeadLettered: 2}},
		ActiveWorkers: 3,
	}
	fail := false
	var known []string
	g := NewDepthGauges(reg, DepthOptions{
		Measure: func(context.Context) (store.DepthSnapshot, error) {
			if fail {
				return store.DepthSnapshot{}, errors.New("down")
			}
			return snap, nil
		},
		Queues: func(q []string) { known = q },
	})
	require.Empty(t, gatherValues(t, reg), "nothing before the first measurement")
	require.NoError(t, g.Refresh(t.Context()))
	require.Equal(t, []string{"a", "b"}, known)
	want := map[string]float64{"jq_worker_active_count": 3}
	for _, q := range []string{"a", "b"} {
		for _, s := range store.DepthStates {
			want["jq_job_queue_depth{queue="+q+"}{status="+string(s)+"}"] = 0
		}
		want["jq_queue_length{queue="+q+"}"] = 0
	}
	want["jq_job_queue_depth{queue=a}{status=PENDING}"] = 5
	want["jq_job_queue_depth{queue=a}{status=DEAD_LETTERED}"] = 2
	want["jq_queue_length{queue=a}"] = 5
	require.Equal(t, want, gatherValues(t, reg))

	fail = true
	require.Error(t, g.Refresh(t.Context()))
	require.Equal(t, want, gatherValues(t, reg), "a failed measurement keeps the last values")

	fail = false
	stop := g.Start(t.Context())
	stop()
}

func TestWorkerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewWorkerMetrics(reg, "w-1", []string{"q"})
	got := gatherValues(t, reg)
	require.InDelta(t, 0, got["jq_worker_active"], 0)
	require.InDelta(t, 0, got["jq_circuit_breaker_state{queue=q}"], 0)
	require.Contains(t, got, "jq_worker_jobs_total{outcome=abandoned}{queue=q}")
	// The breaker gauge follows each state change with seed 004's values.
	for _, c := range []struct {
		to   queue.BreakerState
		want float64
	}{{queue.BreakerOpen, 2}, {queue.BreakerHalfOpen, 1}, {queue.BreakerOpen, 2}, {queue.BreakerHalfOpen, 1}, {queue.BreakerClosed, 0}} {
		m.BreakerChanged(executor.BreakerChange{Queue: "q", To: c.to})
		require.InDelta(t, c.want, gatherValues(t, reg)["jq_circuit_breaker_state{queue=q}"], 0, "%s", c.to)
	}
	m.Watch(func() WorkerState { return WorkerState{Active: true, Running: 2} })
	m.JobDone(executor.JobDone{Job: &queue.Job{Queue: "q"}, Outcome: executor.OutcomeSucceeded, Runtime: time.Millisecond})
	got = gatherValues(t, reg)
	require.InDelta(t, 1, got["jq_worker_active"], 0)
	require.InDelta(t, 2, got["jq_worker_job_concurrency{worker_id=w-1}"], 0)
	require.InDelta(t, 1, got["jq_worker_jobs_total{outcome=succeeded}{queue=q}"], 0)
}

func TestOutboxCollectorZeroTopics(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewOutboxCollector(nil, "events", "dead"))
	require.Equal(t, map[string]float64{
		"jq_kafka_publish_errors_total{topic=events}": 0,
		"jq_kafka_publish_errors_total{topic=dead}":   0,
	}, gatherValues(t, reg), "Kafka disabled: only the error counters, at 0")
}

// A queue that a depth snapshot had and the next one has not was deleted: its series go. A queue
// only observed (created after the snapshot was read) stays.
func TestJobMetricsForgetDeletedQueues(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewJobMetrics(reg)
	m.KnownQueues([]string{"gone", "kept"})
	m.Submitted("gone", 1)
	m.Submitted("fresh", 1) // not in any snapshot yet
	m.KnownQueues([]string{"kept"})

	got := gatherValues(t, reg)
	for k := range got {
		require.NotContains(t, k, "queue=gone", "series of a deleted queue")
	}
	require.Contains(t, got, "jq_job_total{queue=kept}{status=PENDING}")
	require.InDelta(t, 1, got["jq_job_total{queue=fresh}{status=PENDING}"], 0, "a queue newer than the snapshot keeps its count")

	m.Submitted("gone", 2) // recreated under the same name: counts from zero again
	require.InDelta(t, 2, gatherValues(t, reg)["jq_job_total{queue=gone}{status=PENDING}"], 0)
}
