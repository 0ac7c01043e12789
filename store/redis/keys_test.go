package redisstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hashTag returns the part of key Redis Cluster hashes: the text between the first '{' and the
// next '}', when that is not empty; else the whole key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

func TestKeys(t *testing.T) {
	t.Parallel()
	k := keys{prefix: "jq"}
	require.Equal(t, "jq:{emails}:processing:w-1", k.inflight("emails", "w-1"))
	require.Equal(t, "jq:{emails}:lock:0190c0de-0000-7000-8000-000000000001", k.lock("emails", "0190c0de-0000-7000-8000-000000000001"))
	require.Equal(t, []string{"x", "jq:{emails}:lock:a", "jq:{emails}:lock:b"}, k.locks([]string{"x"}, "emails", []string{"a", "b"}))

	// Every key of a queue hashes to the queue's slot, whatever the worker or job id holds.
	test := keys{prefix: "jqtest:0123456789abcdef"}
	for _, kk := range []keys{k, test} {
		for _, q := range []string{"default", "a", "emails.high_prio-2"} {
			for _, key := range []string{
				kk.inflight(q, "host-1/42"),
				kk.inflight(q, "{evil}"),
				kk.inflight(q, "}{"),
				kk.lock(q, "0190c0de-0000-7000-8000-000000000001"),
				kk.lock(q, "{x}"),
			} {
				require.Equal(t, q, hashTag(key), key)
				require.True(t, strings.HasPrefix(key, kk.prefix+":"), key)
			}
		}
	}
}
