package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

// Slots are freed exactly once per attempt; a refused ack never frees a slot
// held by an attempt from before the session (only its report does).
func TestSessionReleasedCountsEachAttemptOnce(t *testing.T) {
	t.Parallel()
	e := &Engine{sessions: map[string]*Session{}, wakeScheduler: make(chan struct{}, 1), ready: make(chan struct{})}
	s := e.OpenSession(&queue.Worker{ID: "w", Concurrency: 4, Queues: []string{"q"}}, 2)
	require.Equal(t, 2, s.free(), "two slots were busy when the stream opened")

	s.mu.Lock()
	s.outstanding["a"], s.outstanding["b"] = "q", "q"
	s.mu.Unlock()
	require.Equal(t, 0, s.free())

	s.released([]string{"a", "a", "unknown"}, false) // a refused ack, repeated, and an id from before
	require.Equal(t, 1, s.free(), "a is freed once; an unknown id's refused ack frees nothing")

	s.released([]string{"c"}, true) // the report of an attempt from before the stream
	require.Equal(t, 2, s.free(), "the report of an id this session does not hold frees a carried slot")
	s.released([]string{"old1", "old2", "old3"}, true)
	require.Equal(t, 3, s.free(), "never more than the carried slots")
	s.released([]string{"b"}, true)
	require.Equal(t, 4, s.free())
}

// After CloseSessions (a server stopping) a new stream gets no session: its
// Next fails at once instead of claiming jobs it could never deliver.
func TestSessionRefusedWhileClosing(t *testing.T) {
	t.Parallel()
	e := &Engine{sessions: map[string]*Session{}, wakeScheduler: make(chan struct{}, 1), ready: make(chan struct{})}
	e.CloseSessions()
	s := e.OpenSession(&queue.Worker{ID: "w", Concurrency: 1, Queues: []string{"q"}}, 1)
	_, err := s.Next(t.Context())
	require.ErrorIs(t, err, queue.ErrShutdown)
	require.Empty(t, e.sessions)
}

// A replaced session stops at once with ErrSessionReplaced.
func TestSessionReplaced(t *testing.T) {
	t.Parallel()
	e := &Engine{sessions: map[string]*Session{}, wakeScheduler: make(chan struct{}, 1), ready: make(chan struct{})}
	w := &queue.Worker{ID: "w", Concurrency: 1, Queues: []string{"q"}}
	old := e.OpenSession(w, 1)
	_ = e.OpenSession(w, 1)
	_, err := old.Next(t.Context())
	require.ErrorIs(t, err, ErrSessionReplaced)
}
