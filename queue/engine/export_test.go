package engine

// Sessions is the number of open assignment streams on this replica.
func (e *Engine) Sessions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}
