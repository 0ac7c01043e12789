package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jq-dev/jq/queue"
)

// TypeSynthetic is the job type of the synthetic handler: seed 003's jobs, which name no work but
// how long it takes and how much output it makes. The taskqueue.v1 facade submits every job with
// it; a jq.v1 job asks for it by type.
const TypeSynthetic = "synthetic"

// DefaultMaxOutputBytes is seed 003's MAX_OUTPUT_BYTES (256 KiB), also the server's default
// result limit (server.max_result_bytes).
const DefaultMaxOutputBytes = 256 << 10

// SyntheticPayload is the payload of the synthetic handler: seed 003's JobSpec numbers.
type SyntheticPayload struct {
	// WorkDurationMS is how long the job works, in milliseconds; the job's timeout and a
	// cancellation end it early.
	WorkDurationMS uint32 `json:"work_duration_ms"`
	// PayloadSizeBytes is the size of the output (SyntheticOutput).
	PayloadSizeBytes uint32 `json:"payload_size_bytes"`
}

// SyntheticJobPayload encodes p with a fixed field order, so equal specs give equal payloads (the
// facade's idempotency compares payloads byte for byte).
func SyntheticJobPayload(p SyntheticPayload) []byte {
	return fmt.Appendf(nil, `{"work_duration_ms":%d,"payload_size_bytes":%d}`, p.WorkDurationMS, p.PayloadSizeBytes)
}

// SyntheticOptions configure the synthetic handler.
type SyntheticOptions struct {
	// MaxOutputBytes bounds payload_size_bytes: a larger job fails permanently with
	// output_too_large before working (seed 003's OUTPUT_TOO_LARGE). Default
	// DefaultMaxOutputBytes; keep it at most server.max_result_bytes.
	MaxOutputBytes int
}

// Synthetic works for the payload's work_duration_ms, then succeeds with SyntheticOutput(job id,
// payload_size_bytes): deterministic bytes whose SHA-256 (the result checksum) anyone can
// recompute from the job id and the size. The wait ends early, failing the attempt with the
// context's cause, when the job's timeout passes or the job is cancelled. A size past
// MaxOutputBytes fails permanently with queue.ErrOutputTooLarge without waiting: no attempt can
// succeed.
func Synthetic(opts SyntheticOptions) queue.Handler {
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = DefaultMaxOutputBytes
	}
	return queue.HandlerFunc(func(ctx context.Context, job *queue.Job) ([]byte, error) {
		var p SyntheticPayload
		if err := decodePayload(TypeSynthetic, job.Payload, &p); err != nil {
			return nil, err
		}
		if int64(p.PayloadSizeBytes) > int64(opts.MaxOutputBytes) {
			return nil, queue.Permanent(fmt.Errorf("synthetic: OUTPUT_TOO_LARGE: payload_size_bytes %d exceeds MAX_OUTPUT_BYTES %d: %w",
				p.PayloadSizeBytes, opts.MaxOutputBytes, queue.ErrOutputTooLarge))
		}
		if time.Duration(p.WorkDurationMS) > maxSleep/time.Millisecond {
			return nil, queue.Permanent(fmt.Errorf("synthetic: invalid payload: work_duration_ms must be at most %d, got %d", maxSleep.Milliseconds(), p.WorkDurationMS))
		}
		t := time.NewTimer(time.Duration(p.WorkDurationMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("synthetic work interrupted: %w", context.Cause(ctx))
		case <-t.C:
		}
		id := job.ID
		if info, ok := queue.JobInfoFromContext(ctx); ok {
			id = info.ID
		}
		return SyntheticOutput(id, int(p.PayloadSizeBytes)), nil
	})
}

// SyntheticOutput is the synthetic handler's output for a job: n bytes made of the SHA-256 digests
// of the job id followed by a big-endian 64-bit block counter (0, 1, …), cut to n. Every attempt of
// a job gives the same bytes; different jobs give different ones.
func SyntheticOutput(jobID string, n int) []byte {
	out := make([]byte, 0, n+sha256.Size)
	buf := make([]byte, len(jobID)+8)
	copy(buf, jobID)
	for i := uint64(0); len(out) < n; i++ {
		binary.BigEndian.PutUint64(buf[len(jobID):], i)
		sum := sha256.Sum256(buf)
		out = append(out, sum[:]...)
	}
	return out[:n]
}
