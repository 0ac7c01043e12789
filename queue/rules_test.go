package queue

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func TestSettleFailed(t *testing.T) {
	policy := RetryPolicy{Base: 2 * time.Second, Max: 10 * time.Second}
	half := func() float64 { return 0.5 }
	for _, tc := range []struct {
		name string
		job  FailedJob
		want Decision
	}{
		{"first retry: base plus jitter", FailedJob{MaxRetries: 3, Policy: policy},
			Decision{From: StateFailed, To: StatePending, Reason: ReasonRetry, NotBefore: t0.Add(2100 * time.Millisecond)}},
		{"third retry doubles twice", FailedJob{RetryCount: 2, MaxRetries: 3, Policy: policy},
			Decision{From: StateFailed, To: StatePending, Reason: ReasonRetry, NotBefore: t0.Add(8400 * time.Millisecond)}},
		{"capped at max", FailedJob{RetryCount: 2, MaxRetries: 9, Policy: RetryPolicy{Base: 4 * time.Second, Max: 10 * time.Second}},
			Decision{From: StateFailed, To: StatePending, Reason: ReasonRetry, NotBefore: t0.Add(10500 * time.Millisecond)}},
		{"the queue's defaults when it sets none", FailedJob{MaxRetries: 1},
			Decision{From: StateFailed, To: StatePending, Reason: ReasonRetry, NotBefore: t0.Add(DefaultBackoffBase * 21 / 20)}},
		{"Retry-After later than the backoff wins", FailedJob{MaxRetries: 3, Policy: policy, RetryAfter: time.Minute},
			Decision{From: StateFailed, To: StatePending, Reason: ReasonRetry, NotBefore: t0.Add(time.Minute)}},
		{"Retry-After earlier than the backoff loses", FailedJob{MaxRetries: 3, Policy: policy, RetryAfter: time.Second},
			Decision{From: StateFailed, To: StatePending, Reason: ReasonRetry, NotBefore: t0.Add(2100 * time.Millisecond)}},
		{"the TTL restarts from not_before", FailedJob{MaxRetries: 3, Policy: policy, TTL: time.Hour},
			Decision{From: StateFailed, To: StatePending, Reason: ReasonRetry, NotBefore: t0.Add(2100 * time.Millisecond),
				ExpiresAt: t0.Add(2100*time.Millisecond + time.Hour)}},
		{"no retry left", FailedJob{RetryCount: 3, MaxRetries: 3, Policy: policy},
			Decision{From: StateFailed, To: StateDeadLettered, Reason: ReasonMaxRetries}},
		{"no retries at all", FailedJob{Policy: policy},
			Decision{From: StateFailed, To: StateDeadLettered, Reason: ReasonMaxRetries}},
		{"permanent keeps a specific cause", FailedJob{MaxRetries: 3, NoRetry: true, Policy: policy, Reason: ReasonTimeout},
			Decision{From: StateFailed, To: StateDeadLettered, Reason: ReasonPermanent}},
		{"permanent names itself where the failure said only error", FailedJob{MaxRetries: 3, NoRetry: true, Reason: ReasonError},
			Decision{From: StateFailed, To: StateDeadLettered, Reason: ReasonPermanent, FailureReason: ReasonPermanent}},
		{"cancelled beats permanent", FailedJob{MaxRetries: 3, NoRetry: true, CancelRequested: true},
			Decision{From: StateFailed, To: StateDeadLettered, Reason: ReasonCancelled, FailureReason: ReasonCancelled}},
		{"out of retries names itself where the failure said only error", FailedJob{RetryCount: 1, MaxRetries: 1, Reason: ReasonError},
			Decision{From: StateFailed, To: StateDeadLettered, Reason: ReasonMaxRetries, FailureReason: ReasonMaxRetries}},
		{"out of retries keeps a specific cause", FailedJob{RetryCount: 1, MaxRetries: 1, Reason: ReasonTimeout},
			Decision{From: StateFailed, To: StateDeadLettered, Reason: ReasonMaxRetries}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SettleFailed(tc.job, t0, half)
			if got != tc.want {
				t.Fatalf("SettleFailed(%+v) = %+v, want %+v", tc.job, got, tc.want)
			}
			if err := CheckTransition(got.From, got.To); err != nil {
				t.Fatal(err)
			}
			if got.Retries() != tc.job.WillRetry() || got.Retries() != (got.To == StatePending) {
				t.Fatalf("Retries %v, WillRetry %v, to %s", got.Retries(), tc.job.WillRetry(), got.To)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	for _, tc := range []struct {
		from    State
		to      State
		request bool
		illegal bool
	}{
		{StatePending, StateDeadLettered, false, false},
		{StateAssigned, StateDeadLettered, false, false},
		{StateFailed, StateDeadLettered, false, false},
		{StateRunning, StateRunning, true, false},
		{StateDone, "", false, true},
		{StateDeadLettered, "", false, true},
		{"", "", false, true},
	} {
		d, request, err := Cancel(tc.from)
		if tc.illegal {
			if !errors.Is(err, ErrIllegalTransition) {
				t.Errorf("Cancel(%s): err %v, want ErrIllegalTransition", tc.from, err)
			}
			continue
		}
		if err != nil || d.To != tc.to || request != tc.request || d.Reason != ReasonCancelled {
			t.Errorf("Cancel(%s) = %+v, %v, %v", tc.from, d, request, err)
		}
		if !request {
			if err := CheckTransition(d.From, d.To); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestManualRetry(t *testing.T) {
	for _, s := range States() {
		d, err := ManualRetry(s, time.Minute, t0)
		if s != StateFailed && s != StateDeadLettered {
			if !errors.Is(err, ErrIllegalTransition) {
				t.Errorf("ManualRetry(%s): err %v, want ErrIllegalTransition", s, err)
			}
			continue
		}
		want := Decision{From: s, To: StatePending, Reason: ReasonManualRetry, NotBefore: t0, ExpiresAt: t0.Add(time.Minute), ResetRetries: true}
		if err != nil || d != want {
			t.Errorf("ManualRetry(%s) = %+v, %v; want %+v", s, d, err, want)
		}
	}
}

func TestDelete(t *testing.T) {
	for _, s := range States() {
		err := Delete(s)
		if s == StateDone || s == StateDeadLettered {
			if err != nil {
				t.Errorf("Delete(%s) = %v, want nil", s, err)
			}
			continue
		}
		if !errors.Is(err, ErrIllegalTransition) || !strings.Contains(err.Error(), "cancel it first") {
			t.Errorf("Delete(%s) = %v, want ErrIllegalTransition saying to cancel first", s, err)
		}
	}
}

func TestDeadlinesOverdue(t *testing.T) {
	d := Deadlines{Assignment: time.Minute, Grace: 10 * time.Second}
	for _, tc := range []struct {
		name   string
		job    Job
		lost   bool
		reason string
	}{
		{"assigned in time", Job{State: StateAssigned, UpdatedAt: t0.Add(-59 * time.Second)}, false, ""},
		{"assigned too long", Job{State: StateAssigned, UpdatedAt: t0.Add(-61 * time.Second)}, false, ReasonAssignmentTimeout},
		{"running within timeout and grace", Job{State: StateRunning, StartedAt: t0.Add(-39 * time.Second), Timeout: 30 * time.Second}, false, ""},
		{"running past timeout and grace", Job{State: StateRunning, StartedAt: t0.Add(-41 * time.Second), Timeout: 30 * time.Second}, false, ReasonTimeout},
		{"lost worker beats everything", Job{State: StateRunning, StartedAt: t0, Timeout: time.Hour}, true, ReasonWorkerLost},
		{"not held", Job{State: StatePending}, true, ""},
		{"finished", Job{State: StateDone}, true, ""},
	} {
		reason, ok := d.Overdue(&tc.job, tc.lost, t0)
		if reason != tc.reason || ok != (tc.reason != "") {
			t.Errorf("%s: Overdue = %q, %v; want %q", tc.name, reason, ok, tc.reason)
		}
	}
}

func TestDrain(t *testing.T) {
	if to, change, err := Drain(WorkerOnline); to != WorkerDraining || !change || err != nil {
		t.Errorf("Drain(ONLINE) = %s, %v, %v", to, change, err)
	}
	if to, change, err := Drain(WorkerDraining); to != WorkerDraining || change || err != nil {
		t.Errorf("Drain(DRAINING) = %s, %v, %v", to, change, err)
	}
	if _, _, err := Drain(WorkerOffline); !errors.Is(err, ErrIllegalTransition) {
		t.Errorf("Drain(OFFLINE): err %v", err)
	}
}

// FuzzLifecycle drives one job through any sequence of events — dispatch, ack, success, failure
// (plain, permanent, with Retry-After), the reaper's failures, the retry sweep, TTL expiry, cancel,
// manual retry — applying the rules as the engine does, and checks that every change is an edge of
// the transition table, that a refused command changes nothing, and that retries stay within the
// budget.
func FuzzLifecycle(f *testing.F) {
	f.Add([]byte{0, 1, 3, 5, 0, 1, 2}, uint8(2))
	f.Add([]byte{8, 9, 0, 8, 1, 8, 3, 8, 5, 9}, uint8(0))
	f.Add([]byte{7, 0, 6, 5, 0, 1, 4, 5, 9, 0, 1, 2, 8}, uint8(5))
	f.Fuzz(func(t *testing.T, ops []byte, maxRetries uint8) {
		j := Job{State: StatePending, MaxRetries: int(maxRetries % 8), TTL: time.Minute}
		now := t0
		move := func(to State) {
			if err := CheckTransition(j.State, to); err != nil {
				t.Fatalf("illegal edge after ops %v: %v", ops, err)
			}
			j.State = to
		}
		for _, op := range ops {
			now = now.Add(time.Second)
			switch op % 11 {
			case 0: // dispatch
				if j.State == StatePending {
					move(StateAssigned)
					j.Attempt++
				}
			case 1: // ack
				if j.State == StateAssigned {
					move(StateRunning)
				}
			case 2: // success
				if j.State == StateRunning {
					move(StateDone)
				}
			case 3, 4: // failure, permanent for 4
				if j.State == StateRunning {
					move(StateFailed)
					j.NoRetry = op%11 == 4
				}
			case 5: // the retry sweep
				if j.State == StateFailed {
					d := SettleFailed(FailedJobOf(&j, RetryPolicy{}), now, nil)
					move(d.To)
					if d.Retries() {
						j.RetryCount++
						if d.NotBefore.Before(now) {
							t.Fatalf("retry due before now")
						}
					}
				}
			case 6: // the reaper: assignment or execution timeout
				if j.State == StateAssigned || j.State == StateRunning {
					move(StateFailed)
				}
			case 7: // TTL expiry
				if j.State == StatePending {
					move(StateDeadLettered)
				}
			case 8: // cancel
				before := j
				d, request, err := Cancel(j.State)
				switch {
				case err != nil:
					if j.State != before.State || j.CancelRequested != before.CancelRequested || !errors.Is(err, ErrIllegalTransition) {
						t.Fatalf("a refused cancel: %v", err)
					}
				case request:
					j.CancelRequested = true
				default:
					move(d.To)
				}
			case 9: // manual retry
				d, err := ManualRetry(j.State, j.TTL, now)
				if err != nil {
					if !errors.Is(err, ErrIllegalTransition) {
						t.Fatal(err)
					}
					continue
				}
				move(d.To)
				j.RetryCount, j.NoRetry, j.CancelRequested = 0, false, false
			case 10: // a report of a cancelled RUNNING job fails it
				if j.State == StateRunning && j.CancelRequested {
					move(StateFailed)
				}
			}
			if j.RetryCount > j.MaxRetries {
				t.Fatalf("retry_count %d > max_retries %d", j.RetryCount, j.MaxRetries)
			}
		}
	})
}
