package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
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

func TestPayloadIsPaddedSleepJSON(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 128, 4096} {
		p := payload(mixJob{ms: 50, size: size})
		if size > 0 {
			require.Len(t, p, size)
		}
		var v struct {
			MS int `json:"ms"`
		}
		require.NoError(t, json.Unmarshal(p, &v))
		require.Equal(t, 50, v.MS)
	}
}
