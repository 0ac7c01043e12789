package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store"
)

// Items repeating a job id are written by a later call, after the first occurrence: a batch judges
// only the first item of an id.
func TestFlushConcatRepeatsGoToALaterCall(t *testing.T) {
	var calls [][]store.JobLease
	write := func(_ context.Context, ls []store.JobLease) ([]store.LeaseOutcome, error) {
		calls = append(calls, ls)
		seen := map[string]bool{}
		out := make([]store.LeaseOutcome, len(ls))
		for i, l := range ls {
			require.False(t, seen[l.ID], "an id twice in one call")
			seen[l.ID] = true
			out[i] = store.LeaseOutcome{ID: l.ID, Err: errors.New(string(rune('0' + l.Attempt)))}
		}
		return out, nil
	}
	reqs := [][]store.JobLease{
		{{ID: "a", Attempt: 1}, {ID: "b", Attempt: 1}},
		{{ID: "A", Attempt: 2}},
		{{ID: "a", Attempt: 3}, {ID: "c", Attempt: 1}},
	}
	res, err := flushConcat(context.Background(), reqs, func(l store.JobLease) string { return l.ID }, write)
	require.NoError(t, err)
	require.Len(t, calls, 3, "a, A and a again: three rounds")
	require.Len(t, calls[0], 3)
	for i, r := range reqs {
		require.Len(t, res[i], len(r))
		for j, l := range r {
			require.Equal(t, l.ID, res[i][j].ID, "outcomes back in the callers' order")
			require.EqualError(t, res[i][j].Err, string(rune('0'+l.Attempt)))
		}
	}

	_, err = flushConcat(context.Background(), reqs, func(l store.JobLease) string { return l.ID },
		func(context.Context, []store.JobLease) ([]store.LeaseOutcome, error) { return nil, nil })
	require.Error(t, err, "a store that returns too few outcomes")
}
