package roles

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/config"
)

// component names one part of a process in the role table.
type component string

// row is one line of the role table: a component, the role that runs it and what it needs.
type row struct {
	role Name
	name component
	// needs start before this component and stop after it; they run in the same role.
	needs []component
	// after orders this component after others when they run in the same process (--role=all)
	// without needing them.
	after []component
	// skip leaves the component out of a process (nil: never).
	skip func(Name, *config.Config) bool
	// finite components may end on their own without stopping the others.
	finite bool
	build  func(ctx context.Context, p *process) (part, error)
}

// part is a built component. The build took its resources and did whatever must be done before
// the components that need it start (connect, migrate, bind a port).
type part struct {
	// run does the component's work until ctx ends (nil: the part only holds resources).
	run func(ctx context.Context) error
	// close releases the build's resources, once run has returned and every component that
	// needs this one has stopped (nil: nothing to release).
	close func()
}

// plan selects the role's rows (--role=all: every row but the admin role's, which has none) and
// orders them: table order, except that a component starts after what it needs or follows.
func plan(table []row, role Name, cfg *config.Config) ([]row, error) {
	var sel []row
	in := map[component]bool{}
	for _, r := range table {
		if (r.role == role || role == All) && (r.skip == nil || !r.skip(role, cfg)) {
			sel = append(sel, r)
			in[r.name] = true
		}
	}
	for _, r := range sel {
		for _, n := range r.needs {
			if !in[n] {
				return nil, fmt.Errorf("role table: %s needs %s, which --role=%s does not run", r.name, n, role)
			}
		}
	}
	var out []row
	placed := map[component]bool{}
	for len(out) < len(sel) {
		progress := false
		for _, r := range sel {
			if placed[r.name] || !ready(r, in, placed) {
				continue
			}
			out = append(out, r)
			placed[r.name] = true
			progress = true
			break // back to the top: table order wins among the components that may start
		}
		if !progress {
			var left []component
			for _, r := range sel {
				if !placed[r.name] {
					left = append(left, r.name)
				}
			}
			return nil, fmt.Errorf("role table: a cycle among %v", left)
		}
	}
	return out, nil
}

func ready(r row, in, placed map[component]bool) bool {
	for _, n := range slices.Concat(r.needs, r.after) {
		if in[n] && !placed[n] {
			return false
		}
	}
	return true
}

// lifecycle is where a running graph is: /readyz is 503 unless every component has started and
// none has begun to stop.
type lifecycle struct {
	started  atomic.Bool
	stopping atomic.Bool
}

// runGraph builds and starts the components in order and stops them in reverse. It stops them
// all when ctx ends, when a component's run fails or returns while it should not, or when every
// component with work has finished. Each stops only after the ones started after it have: run's
// context is cancelled, run returns, then close. Errors name the role of the component.
func runGraph(ctx context.Context, rows []row, p *process, lc *lifecycle, log *zap.Logger) error {
	type running struct {
		row    row
		part   part
		cancel context.CancelFunc
		done   chan struct{}
		err    error
	}
	var live []*running
	ended := make(chan *running, len(rows))
	working := 0
	var firstErr error
	for _, r := range rows {
		pt, err := r.build(ctx, p)
		if err != nil {
			// A stop asked for while starting (SIGTERM during a migration) is not a failure.
			if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
				firstErr = fmt.Errorf("start %s: %w", r.role, err)
			}
			break
		}
		rn := &running{row: r, part: pt, done: make(chan struct{})}
		live = append(live, rn)
		if pt.run == nil {
			close(rn.done)
			continue
		}
		working++
		// Detached from ctx: a component stops when the graph stops it, in order.
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		rn.cancel = cancel
		go func() {
			rn.err = pt.run(cctx)
			close(rn.done)
			ended <- rn
		}()
	}
	if firstErr == nil && len(live) == len(rows) && ctx.Err() == nil {
		lc.started.Store(true)
	wait:
		for working > 0 {
			select {
			case <-ctx.Done():
				log.Info("shutdown requested")
				break wait
			case rn := <-ended:
				working--
				if rn.err != nil || !rn.row.finite {
					break wait
				}
			}
		}
	}
	lc.stopping.Store(true)
	for i := len(live) - 1; i >= 0; i-- {
		rn := live[i]
		if rn.cancel != nil {
			rn.cancel()
		}
		<-rn.done
		if err := rn.err; err != nil && !errors.Is(err, context.Canceled) && firstErr == nil {
			firstErr = fmt.Errorf("%s: %w", rn.row.role, err)
		}
		if rn.part.close != nil {
			rn.part.close()
		}
	}
	return firstErr
}
