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
}

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
		d := time.Duration(p.MS) * time.Millisecond
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("sleep interrupted: %w", context.Cause(ctx))
		case <-t.C:
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
