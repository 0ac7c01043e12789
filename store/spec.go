package store

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"slices"
)

// SpecHash fingerprints the job spec that idempotency compares: queue, type, payload, priority,
// max_retries, ttl, timeout, run_at, labels and keep_result, as submitted (before queue defaults are
// applied, so a later change of the queue's defaults does not turn a retry of the same request into a
// conflict). The id, idempotency key and trace context are not part of it. The encoding is
// length-prefixed and versioned, so no two different specs share an input.
func (p JobInsertParams) SpecHash() []byte {
	h := sha256.New()
	w := specWriter{h: h}
	w.str("jq.job-spec.v1")
	w.str(p.Queue)
	w.str(p.Type)
	w.bytes(p.Payload)
	w.int(int64(p.Priority))
	if p.MaxRetries == nil {
		w.int(0)
	} else {
		w.int(1)
		w.int(int64(*p.MaxRetries))
	}
	w.int(int64(p.TTL))
	w.int(int64(p.Timeout))
	if p.RunAt.IsZero() {
		w.int(0)
	} else {
		w.int(1)
		w.int(p.RunAt.UnixMicro()) // the stores keep microseconds
	}
	w.labels(p.Labels)
	if p.KeepResult {
		w.int(1)
	} else {
		w.int(0)
	}
	// Another principal reusing a key conflicts instead of being handed the job: it may not see
	// it. Jobs submitted with authentication off hash as before.
	if p.Principal != "" {
		w.str("principal")
		w.str(p.Principal)
	}
	return h.Sum(nil)
}

type specWriter struct{ h hash.Hash }

// labels writes a label map in key order, so equal maps hash equally.
func (w specWriter) labels(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.int(int64(len(keys)))
	for _, k := range keys {
		w.str(k)
		w.str(m[k])
	}
}

func (w specWriter) int(v int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(v)) //nolint:gosec // the bit pattern is hashed, not the value
	w.h.Write(b[:])
}

func (w specWriter) bytes(b []byte) {
	w.int(int64(len(b)))
	w.h.Write(b)
}

func (w specWriter) str(s string) {
	w.int(int64(len(s)))
	w.h.Write([]byte(s))
}
