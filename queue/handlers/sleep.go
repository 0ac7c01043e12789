package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
)

// maxSleep matches the longest job timeout the API accepts.
const maxSleep = 24 * time.Hour

// SleepPayload is the payload of the sleep handler.
type SleepPayload struct {
	// MS is how long to sleep, in milliseconds (default 0).
	MS int64 `json:"ms"`
	// Fail makes the job fail after sleeping.
	Fail bool `json:"fail,omitempty"`
	// Retryable says whether that failure may be retried; false makes it
	// permanent. Default true.
	Retryable *bool `json:"retryable,omitempty"`
	// Progress splits the sleep into that many equal steps and reports
	// progress (queue.Progress) at the start of each: step i of N is
	// (i-1)·100/N percent, "step i of N" (default 0: none; at most 10,000).
	Progress int `json:"progress,omitempty"`
}

// maxSleepSteps bounds SleepPayload.Progress.
const maxSleepSteps = 10_000

// errSleepFail is the failure the sleep handler was asked for.
var errSleepFail = errors.New("sleep handler asked to fail")

// Sleep sleeps for the payload's ms, then succeeds with {"slept_ms":N} or
// fails as the payload asks ("fail": true; "retryable": false makes the
// failure permanent). A cancelled context ends the sleep early with the
// context's cause.
func Sleep() queue.Handler {
	return queue.HandlerFunc(func(ctx context.Context, job *queue.Job) ([]byte, error) {
		var p SleepPayload
		if err := decodePayload(TypeSleep, job.Payload, &p); err != nil {
			return nil, err
		}
		if p.MS < 0 || time.Duration(p.MS) > maxSleep/time.Millisecond {
			return nil, queue.Permanent(fmt.Errorf("sleep: invalid payload: ms must be 0 to %d, got %d", maxSleep.Milliseconds(), p.MS))
		}
		if p.Progress < 0 || p.Progress > maxSleepSteps {
			return nil, queue.Permanent(fmt.Errorf("sleep: invalid payload: progress must be 0 to %d, got %d", maxSleepSteps, p.Progress))
		}
		d := time.Duration(p.MS) * time.Millisecond
		if p.Progress > 0 {
			if err := sleepSteps(ctx, d, p.Progress); err != nil {
				return nil, err
			}
		} else {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("sleep interrupted: %w", context.Cause(ctx))
			case <-t.C:
			}
		}
		if p.Fail {
			if p.Retryable != nil && !*p.Retryable {
				return nil, queue.Permanent(errSleepFail)
			}
			return nil, errSleepFail
		}
		return fmt.Appendf(nil, `{"slept_ms":%d}`, p.MS), nil
	})
}

// sleepSteps sleeps for d in steps equal parts, reporting progress at the start of each.
func sleepSteps(ctx context.Context, d time.Duration, steps int) error {
	start := time.Now()
	var t *time.Timer
	for i := range steps {
		_ = queue.Progress(ctx, i*100/steps, fmt.Sprintf("step %d of %d", i+1, steps)) // percent is 0..99
		wait := time.Until(start.Add(d * time.Duration(i+1) / time.Duration(steps)))
		if t == nil {
			t = time.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sleep interrupted: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
	return nil
}
