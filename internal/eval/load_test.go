package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	tqv1 "github.com/jq-dev/jq/api/gen/taskqueue/v1"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/handlers"
)

// Seed 003's owner formula, checked against values computed independently (Python hashlib).
func TestOwnerIndex(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key    string
		n4, n6 int
	}{{"abc", 2, 0}, {"job-1", 2, 4}, {"eval-42", 2, 4}} {
		require.Equal(t, c.n4, ownerIndex(c.key, 4), c.key)
		require.Equal(t, c.n6, ownerIndex(c.key, 6), c.key)
	}
}

func TestPayloadIsSyntheticJSON(t *testing.T) {
	t.Parallel()
	var v handlers.SyntheticPayload
	require.NoError(t, json.Unmarshal(payload(mixJob{ms: 50, size: 4096}), &v))
	require.Equal(t, handlers.SyntheticPayload{WorkDurationMS: 50, PayloadSizeBytes: 4096}, v)
}

// The operation mix's check of a result: the synthetic handler's bytes, of the asked size, with
// their SHA-256 as the checksum; anything else is a mismatch.
func TestResultMatches(t *testing.T) {
	t.Parallel()
	const id = "00000000-0000-4000-8000-000000000001"
	out := handlers.SyntheticOutput(id, 1024)
	good := &tqv1.GetJobResultResponse{ResultReady: true, OutputBytes: out, Checksum: queue.Checksum(out)}
	require.True(t, resultMatches(good, id, 1024))
	require.False(t, resultMatches(good, id, 1000), "another size")
	require.False(t, resultMatches(good, "00000000-0000-4000-8000-000000000002", 1024), "another job's bytes")
	bad := &tqv1.GetJobResultResponse{ResultReady: true, OutputBytes: out, Checksum: queue.Checksum(out[1:])}
	require.False(t, resultMatches(bad, id, 1024), "a checksum that does not match")
}
