package handlers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jq-dev/jq/queue"
)

// TypeFault is the job type of the fault handler. The worker registers it
// only with worker.test_handlers set.
const TypeFault = "fault"

// Modes of the fault handler.
const (
	FaultOK    = "ok"    // succeed after ms
	FaultFail  = "fail"  // fail (retryable) after ms
	FaultPanic = "panic" // panic at once
	FaultExit  = "exit"  // end the whole worker process with the exit code: a crash
	FaultHang  = "hang"  // sleep ms ignoring the context, as a handler stuck in a call would
)

// FaultPayload is the payload of the fault handler.
type FaultPayload struct {
	// Mode is ok (the default), fail, panic, exit or hang.
	Mode string `json:"mode,omitempty"`
	// MS is how long ok and fail wait (ending early when the context ends),
	// and how long hang sleeps regardless of it. Default 0.
	MS int64 `json:"ms,omitempty"`
	// Code is the process exit code of mode exit. Default 0.
	Code int `json:"code,omitempty"`
	// Marker, when set, is a file to which the handler appends
	// "<job_id> <attempt>\n" before anything else, so a test can count the
	// executions of a job across worker processes (see internal/faultcheck).
	Marker string `json:"marker,omitempty"`
	// Spans, when set, is a file to which the handler appends
	// "<job_id> <attempt> <start_unix_nanos> <end_unix_nanos>\n" when it returns, so a test can
	// tell whether two executions of a job overlapped in time (the partition test).
	Spans string `json:"spans,omitempty"`
}

// errFaultFail is the failure of mode fail.
var errFaultFail = errors.New("fault handler asked to fail")

// Fault misbehaves as its payload asks, for fault-injection tests. It must
// never be registered in production: mode exit ends the worker process.
//
// Mode hang returns only after its ms even when its context ended long
// before; it then fails with the context's cause (the worker reports the
// attempt as timed out, though the server has usually failed it by then and
// refuses the late report). A hang that outlives no deadline succeeds.
func Fault() queue.Handler {
	return queue.HandlerFunc(func(ctx context.Context, job *queue.Job) ([]byte, error) {
		var p FaultPayload
		if err := decodePayload(TypeFault, job.Payload, &p); err != nil {
			return nil, err
		}
		if p.MS < 0 || time.Duration(p.MS) > maxSleep/time.Millisecond {
			return nil, queue.Permanent(fmt.Errorf("fault: invalid payload: ms must be 0 to %d, got %d", maxSleep.Milliseconds(), p.MS))
		}
		d := time.Duration(p.MS) * time.Millisecond
		switch p.Mode {
		case "", FaultOK, FaultFail, FaultPanic, FaultExit, FaultHang:
		default:
			return nil, queue.Permanent(fmt.Errorf("fault: invalid payload: unknown mode %q (want ok, fail, panic, exit or hang)", p.Mode))
		}
		if p.Marker != "" {
			if err := appendMarker(ctx, job, p.Marker); err != nil {
				return nil, err
			}
		}
		if p.Spans != "" {
			start := time.Now()
			defer func() { appendSpan(ctx, job, p.Spans, start, time.Now()) }()
		}
		switch p.Mode {
		case FaultPanic:
			panic(fmt.Sprintf("fault handler asked to panic (job %s)", job.ID))
		case FaultExit:
			os.Exit(p.Code)
		case FaultHang:
			time.Sleep(d)
			if ctx.Err() != nil {
				return nil, fmt.Errorf("fault handler hung for %v ignoring cancellation: %w", d, context.Cause(ctx))
			}
			return fmt.Appendf(nil, `{"hung_ms":%d}`, p.MS), nil
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("fault handler interrupted: %w", context.Cause(ctx))
		case <-t.C:
		}
		if p.Mode == FaultFail {
			return nil, errFaultFail
		}
		return fmt.Appendf(nil, `{"ok_ms":%d}`, p.MS), nil
	})
}

// appendSpan appends one execution's span to path in a single write; errors are ignored (the
// test that reads the file reports missing spans).
func appendSpan(ctx context.Context, job *queue.Job, path string, start, end time.Time) {
	id, attempt := job.ID, job.Attempt
	if info, ok := queue.JobInfoFromContext(ctx); ok {
		id, attempt = info.ID, info.Attempt
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	_, _ = fmt.Fprintf(f, "%s %d %d %d\n", id, attempt, start.UnixNano(), end.UnixNano())
	_ = f.Close()
}

// appendMarker appends "<job_id> <attempt>\n" to path in a single write, so
// lines of concurrent handlers and processes never interleave.
func appendMarker(ctx context.Context, job *queue.Job, path string) error {
	id, attempt := job.ID, job.Attempt
	if info, ok := queue.JobInfoFromContext(ctx); ok {
		id, attempt = info.ID, info.Attempt
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("fault: marker: %w", err)
	}
	_, werr := fmt.Fprintf(f, "%s %d\n", id, attempt)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("fault: marker: %w", werr)
	}
	return nil
}
