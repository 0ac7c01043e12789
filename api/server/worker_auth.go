package apiserver

import (
	"context"
	"fmt"
	"sync"

	"github.com/jq-dev/jq/api/apierr"
	"github.com/jq-dev/jq/api/auth"
	"github.com/jq-dev/jq/queue"
)

// ownWorker refuses a restricted principal (authenticated, not an admin) acting as a worker id
// another principal registered: PERMISSION_DENIED, before anything is written. A worker id's owner
// never changes once set (store.WorkerRegisterParams), so owners are cached after the first look.
func (s *workerService) ownWorker(ctx context.Context, id string) error {
	p, restricted := auth.Restricted(ctx)
	if !restricted {
		return nil
	}
	owner, ok := s.owners.Load(id)
	if !ok {
		w, err := s.store.WorkerGet(ctx, id)
		if err != nil {
			return err
		}
		if w.Principal == "" {
			return fmt.Errorf("%w: worker %q was registered without authentication: register it again", queue.ErrPermissionDenied, id)
		}
		s.owners.Store(id, w.Principal)
		owner = w.Principal
	}
	if owner != p.Name {
		return fmt.Errorf("%w: worker %q is registered by another principal", queue.ErrPermissionDenied, id)
	}
	return nil
}

func isAdmin(ctx context.Context) bool {
	p, ok := auth.FromContext(ctx)
	return ok && p.IsAdmin()
}

// checkRegistration applies the principal's queue list and the worker-count limits.
func (s *workerService) checkRegistration(ctx context.Context, id string, queues []string) error {
	if p, restricted := auth.Restricted(ctx); restricted {
		for _, q := range queues {
			if !p.AllowsQueue(q) {
				return fmt.Errorf("%w: %s may not take jobs from queue %q", queue.ErrPermissionDenied, p.Name, q)
			}
		}
	}
	if s.limits.MaxWorkers <= 0 && s.limits.MaxWorkersPerPrincipal <= 0 {
		return nil
	}
	owner := auth.Owner(ctx)
	c, err := s.store.WorkerCounts(ctx, owner, id)
	if err != nil {
		return err
	}
	switch {
	case s.limits.MaxWorkers > 0 && c.Live >= s.limits.MaxWorkers:
		s.refused(auth.ReasonWorkerLimit)
		return apierr.New(queue.ErrLimitReached,
			fmt.Sprintf("%d workers are registered, the most allowed (server.max_workers)", c.Live))
	case owner != "" && s.limits.MaxWorkersPerPrincipal > 0 && c.LiveOfPrincipal >= s.limits.MaxWorkersPerPrincipal:
		s.refused(auth.ReasonWorkerLimit)
		return apierr.New(queue.ErrLimitReached,
			fmt.Sprintf("%s has %d live workers, the most allowed (auth.max_workers_per_principal)", owner, c.LiveOfPrincipal))
	}
	return nil
}

// streamCounter counts the long-lived streams of one kind open on this server (what: "assignment"
// for StreamJobs, "watch" for WatchJob and WatchEvents), in all and per principal; each kind is
// held to server.max_streams and auth.max_streams_per_principal on its own.
type streamCounter struct {
	what  string
	mu    sync.Mutex
	total int
	by    map[string]int
}

func newStreamCounter(what string) *streamCounter {
	return &streamCounter{what: what, by: map[string]int{}}
}

// open takes a slot for one stream of principal (""; authentication off) or refuses.
func (c *streamCounter) open(principal string, limits Limits) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if limits.MaxStreams > 0 && c.total >= limits.MaxStreams {
		return nil, apierr.New(apierr.ErrStreamLimit,
			fmt.Sprintf("%d %s streams are open on this server, the most allowed (server.max_streams)", c.total, c.what))
	}
	if principal != "" && limits.MaxStreamsPerPrincipal > 0 && c.by[principal] >= limits.MaxStreamsPerPrincipal {
		return nil, apierr.New(apierr.ErrStreamLimit,
			fmt.Sprintf("%s has %d %s streams open on this server, the most allowed (auth.max_streams_per_principal)",
				principal, c.by[principal], c.what))
	}
	c.total++
	c.by[principal]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.total--
			if c.by[principal]--; c.by[principal] <= 0 {
				delete(c.by, principal)
			}
		})
	}, nil
}
