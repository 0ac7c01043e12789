package engine

import "sync"

// changeHooks are told the id of each job whose state this replica just changed, so a WatchJob
// stream (api/server/watch.go) wakes at once instead of when the watch hub's feed reads the event. Hooks run on the
// engine's commit paths: they must not block.
type changeHooks struct {
	mu       sync.RWMutex
	fns      []func(jobID string)
	progress []func(jobID string)
}

// OnJobChange registers f to hear the ids of the jobs this replica moves: submits (PENDING),
// claims (ASSIGNED), acks (RUNNING), reports (DONE, FAILED, dead-lettered), an operator's cancel
// and retry. Transitions made by the reaper, the retry sweep or another replica are not heard; a
// watcher hears those through their events (the watch hub reads the event feed).
func (e *Engine) OnJobChange(f func(jobID string)) {
	e.changes.mu.Lock()
	defer e.changes.mu.Unlock()
	e.changes.fns = append(e.changes.fns, f)
}

// OnJobProgress registers f to hear the ids of the jobs whose progress this replica recorded
// (Progress). Progress records no event, so the watch hub's feed never hears it; a watcher of a
// job whose worker reports to another replica re-reads the progress itself (see Alone).
func (e *Engine) OnJobProgress(f func(jobID string)) {
	e.changes.mu.Lock()
	defer e.changes.mu.Unlock()
	e.changes.progress = append(e.changes.progress, f)
}

func (e *Engine) jobProgressed(id string) {
	e.changes.mu.RLock()
	defer e.changes.mu.RUnlock()
	for _, f := range e.changes.progress {
		f(id)
	}
}

func (e *Engine) jobChanged(id string) {
	e.changes.mu.RLock()
	defer e.changes.mu.RUnlock()
	for _, f := range e.changes.fns {
		f(id)
	}
}

// Closing reports whether CloseSessions was called: the replica is shutting down, and long-lived
// streams should end so their clients reconnect elsewhere.
func (e *Engine) Closing() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closing
}
