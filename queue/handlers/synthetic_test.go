package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/handlers"
)

func synthJob(p handlers.SyntheticPayload) *queue.Job {
	return job(handlers.TypeSynthetic, string(handlers.SyntheticJobPayload(p)))
}

func TestSyntheticWorksThenReturnsDeterministicOutput(t *testing.T) {
	t.Parallel()
	h := handlers.Synthetic(handlers.SyntheticOptions{})
	j := synthJob(handlers.SyntheticPayload{WorkDurationMS: 60, PayloadSizeBytes: 1000})
	start := time.Now()
	out, err := h.Handle(t.Context(), j)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 60*time.Millisecond, "it works for work_duration_ms")
	require.Len(t, out, 1000)
	require.Equal(t, handlers.SyntheticOutput(j.ID, 1000), out, "the same bytes for every attempt")
	// The first block is the SHA-256 of the id and counter 0: recomputable by anyone.
	first := sha256.Sum256(append([]byte(j.ID), 0, 0, 0, 0, 0, 0, 0, 0))
	require.Equal(t, first[:], out[:32])
	require.NotEqual(t, out, handlers.SyntheticOutput("00000000-0000-4000-8000-000000000002", 1000))
	sum := sha256.Sum256(out)
	require.Equal(t, hex.EncodeToString(sum[:]), queue.Checksum(out), "the result checksum is verifiable")

	out, err = h.Handle(t.Context(), job(handlers.TypeSynthetic, ""))
	require.NoError(t, err, "an empty payload: no work, no output")
	require.Empty(t, out)
}

func TestSyntheticOutputTooLarge(t *testing.T) {
	t.Parallel()
	h := handlers.Synthetic(handlers.SyntheticOptions{MaxOutputBytes: 100})
	_, err := h.Handle(t.Context(), synthJob(handlers.SyntheticPayload{WorkDurationMS: 60_000, PayloadSizeBytes: 101}))
	require.ErrorIs(t, err, queue.ErrOutputTooLarge, "refused before working: no 60 s wait")
	require.True(t, queue.IsPermanent(err))
	require.Contains(t, err.Error(), "OUTPUT_TOO_LARGE")

	out, err := h.Handle(t.Context(), synthJob(handlers.SyntheticPayload{PayloadSizeBytes: 100}))
	require.NoError(t, err)
	require.Len(t, out, 100)

	_, err = handlers.Synthetic(handlers.SyntheticOptions{}).Handle(t.Context(),
		synthJob(handlers.SyntheticPayload{PayloadSizeBytes: handlers.DefaultMaxOutputBytes + 1}))
	require.ErrorIs(t, err, queue.ErrOutputTooLarge, "seed 003's MAX_OUTPUT_BYTES by default")
}

func TestSyntheticEndsWithItsContext(t *testing.T) {
	t.Parallel()
	h := handlers.Synthetic(handlers.SyntheticOptions{})
	// The executor gives the handler a context that ends at the job's timeout.
	ctx, cancel := context.WithTimeoutCause(t.Context(), 50*time.Millisecond, context.DeadlineExceeded)
	defer cancel()
	start := time.Now()
	_, err := h.Handle(ctx, synthJob(handlers.SyntheticPayload{WorkDurationMS: 60_000}))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, queue.IsPermanent(err))
	require.Less(t, time.Since(start), 30*time.Second, "the timeout ended the work, not its duration")

	ctx, cancelCause := context.WithCancelCause(t.Context())
	cancelCause(queue.ErrShutdown)
	_, err = h.Handle(ctx, synthJob(handlers.SyntheticPayload{WorkDurationMS: 60_000}))
	require.ErrorIs(t, err, queue.ErrShutdown)
}

func TestSyntheticBadPayload(t *testing.T) {
	t.Parallel()
	h := handlers.Synthetic(handlers.SyntheticOptions{})
	for _, p := range []string{`{"ms": 5}`, `{"work_duration_ms": -1}`, `{"work_duration_ms": 86400001}`, `[]`} {
		_, err := h.Handle(t.Context(), job(handlers.TypeSynthetic, p))
		require.Error(t, err, p)
		require.True(t, queue.IsPermanent(err), p)
	}
}
