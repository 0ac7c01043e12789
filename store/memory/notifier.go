package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ListenBuffer is how many notifications one Listen call holds before its callback takes them;
// past it Notify drops them (doc.go).
const ListenBuffer = 256

// Notifier is a store.Notifier within one process: Notify hands each queue name to every Listen
// call running at that moment, including the notifier's own process (as Postgres NOTIFY does).
// It is safe for concurrent use; the zero value is not usable, use NewNotifier.
type Notifier struct {
	mu        sync.Mutex
	listeners map[*listener]struct{}
}

type listener struct {
	names chan string
}

// NewNotifier returns a Notifier without listeners.
func NewNotifier() *Notifier {
	return &Notifier{listeners: map[*listener]struct{}{}}
}

// Notify delivers every name to every current listener without waiting for any: a listener whose
// buffer is full misses the name (it has wake-ups pending already). The names are not checked: the
// engine also sends presence announcements this way.
func (n *Notifier) Notify(ctx context.Context, queues []string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: notify: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for l := range n.listeners {
		for _, q := range queues {
			select {
			case l.names <- q:
			default:
			}
		}
	}
	return nil
}

// Listen calls f with the name of every notification sent from now on, one at a time, until ctx
// ends; it returns nil then (an in-process listener has no connection to lose). Notifications
// still buffered when ctx ends are dropped.
func (n *Notifier) Listen(ctx context.Context, f func(queueName string)) error {
	if f == nil {
		return errors.New("memory: listen: f is nil")
	}
	l := &listener{names: make(chan string, ListenBuffer)}
	n.mu.Lock()
	n.listeners[l] = struct{}{}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.listeners, l)
		n.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case q := <-l.names:
			if ctx.Err() != nil {
				return nil
			}
			f(q)
		}
	}
}
