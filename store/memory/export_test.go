package memory

// LockHeld says whether the job's lock in the queue is held now (dropping it if it has expired).
func (d *Dispatcher) LockHeld(queueName, id string) bool { return d.lockHeld(queueName, id) }

// Locks is the number of locks stored, expired or not.
func (d *Dispatcher) Locks() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.locks)
}

// Sets is the number of in-flight sets stored, and Queues the number of queues that have one.
func (d *Dispatcher) Sets() (sets, queues int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, qs := range d.queues {
		sets += len(qs.workers)
	}
	return sets, len(d.queues)
}

// MinSweep is the lock count below which no sweep runs.
const MinSweep = minSweep
