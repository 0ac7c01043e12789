package queue

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxProgressMessage is the most bytes of a progress message; a longer one is cut (on a rune
// boundary, marked with "…") by [Progress], and refused by the server.
const MaxProgressMessage = 256

// ProgressInterval is the most often a worker sends one job's progress to the server: updates in
// between are coalesced, the latest wins.
const ProgressInterval = time.Second

// JobProgress is how far the running attempt of a job got, as its handler last reported it with
// [Progress]. It describes the current attempt only: a job that is not ASSIGNED or RUNNING, or
// that moved on to a newer attempt, shows none.
type JobProgress struct {
	Percent int    // 0..100
	Message string // at most MaxProgressMessage bytes; may be empty
	// UpdatedAt is when the server recorded the update.
	UpdatedAt time.Time
}

// ProgressReporter receives a handler's progress updates. The worker runtime (queue/executor)
// supplies one per attempt through [WithJobInfoReporter]; it must not block.
type ProgressReporter interface {
	ReportProgress(percent int, message string)
}

// Progress reports how far the handler running under ctx got: percent 0..100 and a short
// message (cut to MaxProgressMessage bytes; invalid UTF-8 replaced). It never blocks: the worker
// sends at most one update per job per ProgressInterval, the latest value, and drops what is
// left when the attempt ends. Progress is best effort and shown while the job runs (`jq job
// status`, GetJob); a handler that never calls it costs nothing. Outside a worker (a handler
// called directly, in a test) it does nothing. The only error is ErrInvalidArgument for a
// percent outside 0..100.
func Progress(ctx context.Context, percent int, message string) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("%w: progress percent must be 0 to 100, got %d", ErrInvalidArgument, percent)
	}
	jc, ok := ctx.Value(jobInfoKey{}).(jobContext)
	if !ok || jc.progress == nil {
		return nil
	}
	jc.progress.ReportProgress(percent, CleanProgressMessage(message))
	return nil
}

// CleanProgressMessage makes a message acceptable as progress: valid UTF-8, at most
// MaxProgressMessage bytes (cut on a rune boundary and marked with "…").
func CleanProgressMessage(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= MaxProgressMessage {
		return s
	}
	n := MaxProgressMessage - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ValidateProgress checks an update received from a worker: percent 0..100, a message of at
// most MaxProgressMessage bytes of valid UTF-8.
func ValidateProgress(percent int, message string) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("%w: progress percent must be 0 to 100, got %d", ErrInvalidArgument, percent)
	}
	if len(message) > MaxProgressMessage || !utf8.ValidString(message) {
		return fmt.Errorf("%w: progress message must be at most %d bytes of UTF-8", ErrInvalidArgument, MaxProgressMessage)
	}
	return nil
}

// jobContext is what WithJobInfoReporter stores: the attempt and where its progress goes, in
// one context value, so a worker pays nothing more per job than WithJobInfo.
type jobContext struct {
	info     JobInfo
	progress ProgressReporter
}

// WithJobInfoReporter is [WithJobInfo] for the worker runtime: it also names the reporter that
// [Progress] calls under the returned context.
func WithJobInfoReporter(ctx context.Context, info JobInfo, r ProgressReporter) context.Context {
	return context.WithValue(ctx, jobInfoKey{}, jobContext{info: info, progress: r})
}
