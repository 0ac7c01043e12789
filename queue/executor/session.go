package executor

import (
	"context"
	"errors"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/internal/ctxtime"
)

// errStreamReset: the executor itself closed the stream (drain,
// re-registration, suspected dead connection).
var errStreamReset = errors.New("stream reset by the worker")

// sessionLoop keeps the worker registered and its assignment stream open
// until ctx ends: register (retrying with backoff while the server is not up),
// wait for a free slot, stream, and on any break reconnect with backoff. Jobs
// keep running meanwhile. It returns an error only for a registration the
// server refuses as invalid or not allowed.
func (e *Executor) sessionLoop(ctx context.Context) error {
	bo := newBackoff(e.opts.MinBackoff, e.opts.MaxBackoff)
	started := time.Now()
	failures, warned := 0, false
	for ctx.Err() == nil {
		if e.draining.Load() {
			// The stream stays closed until the operator resumes the worker (a heartbeat without
			// DRAIN) or the worker stops.
			select {
			case <-ctx.Done():
			case <-e.undrained:
			}
			continue
		}
		if !e.registered.Load() {
			if err := e.register(ctx); err != nil {
				if errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotAllowed) {
					return err // already names the call: "register worker: …"
				}
				if ctx.Err() != nil {
					break
				}
				failures++
				d := e.capBackoff(bo.next())
				// One failed attempt is normal when the server restarts, and so are those of the
				// start-up grace when worker and server start together (`jq --role=server &
				// jq --role=worker`, a deployment rolling out): the server migrates before it
				// listens. Past that a failure is worth a warning, then every tenth.
				quiet := failures == 1 || (!e.everRegistered.Load() && time.Since(started) < e.registerGrace)
				switch {
				case quiet:
					e.log.Debug("cannot register with the server; retrying",
						zap.Int("attempts", failures), zap.Duration("backoff", d), zap.Error(err))
				case !warned || failures%10 == 0:
					warned = true
					e.log.Warn("cannot register with the server; retrying",
						zap.Int("attempts", failures), zap.Duration("backoff", d), zap.Error(err))
				}
				ctxtime.Sleep(ctx, d)
				continue
			}
			failures, warned = 0, false
		}

		sctx, cancel := context.WithCancel(ctx)
		e.setStreamCancel(cancel)
		err := e.consume(sctx, bo)
		e.connected.Store(false)
		e.setStreamCancel(nil)
		reset := sctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			break
		}
		if reset {
			continue // the reason (drain, re-register) is already recorded
		}
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, ErrWorkerInactive):
			// Draining, or declared offline: the next heartbeat says which.
			signal(e.hbNow)
		case errors.Is(err, ErrUnknownWorker):
			e.registered.Store(false)
		default:
			// Server restart, network cut, ABORTED by a newer stream: register
			// again before reconnecting (it is idempotent).
			e.registered.Store(false)
		}
		d := e.capBackoff(bo.next())
		e.log.Warn("assignment stream ended; reconnecting", zap.Duration("backoff", d), zap.Error(err))
		ctxtime.Sleep(ctx, d)
	}
	return nil //nolint:nilerr // the loop ends only when ctx does: a stop, not a failure
}

// capBackoff keeps a reconnect pause well inside the server's heartbeat
// timeout: a worker that waits longer than that to come back (after a server
// or database outage) is declared lost and its running jobs are re-run.
func (e *Executor) capBackoff(d time.Duration) time.Duration {
	e.mu.Lock()
	timeout := e.hbTimeout
	e.mu.Unlock()
	if timeout > 0 {
		d = min(d, max(timeout/4, 100*time.Millisecond))
	}
	return d
}

// types are the job types the worker registers (Options.Types).
func (e *Executor) types() []string {
	if e.opts.Types != nil {
		return e.opts.Types
	}
	if h, ok := e.opts.Handler.(interface{ Types() []string }); ok {
		return h.Types()
	}
	return nil
}

func (e *Executor) register(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
	defer cancel()
	sent := time.Now()
	types := e.types()
	reg, err := e.conn.Register(cctx, RegisterParams{
		WorkerID:    e.opts.WorkerID,
		Hostname:    e.opts.Hostname,
		Version:     e.opts.Version,
		Concurrency: e.opts.Concurrency,
		Queues:      e.opts.Queues,
		Labels:      e.opts.Labels,
		Types:       types,
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	if reg.HeartbeatInterval > 0 {
		e.hbInterval = reg.HeartbeatInterval
	}
	if reg.HeartbeatTimeout > 0 {
		e.hbTimeout = reg.HeartbeatTimeout
	}
	interval, held := e.hbInterval, len(e.tasks)
	e.mu.Unlock()
	e.noteRenewed(sent)
	signal(e.renewed)
	e.registered.Store(true)
	e.everRegistered.Store(true)
	signal(e.hbNow) // the first heartbeat at once; it also picks up the server's interval
	e.log.Info("worker registered",
		zap.Int("concurrency", e.opts.Concurrency), zap.Strings("queues", e.opts.Queues), zap.Strings("types", types),
		zap.Duration("heartbeat_interval", interval), zap.Duration("heartbeat_timeout", reg.HeartbeatTimeout),
		zap.Int("held_leases", held))
	return nil
}

// consume waits for a free slot, opens the stream with the free capacity and
// accepts assignments until the stream ends.
func (e *Executor) consume(ctx context.Context, bo *backoff) error {
	capacity := e.waitCapacity(ctx)
	if capacity == 0 {
		return errStreamReset
	}
	st, err := e.conn.Stream(ctx, StreamParams{WorkerID: e.opts.WorkerID, Capacity: capacity, Prefetch: e.opts.Prefetch})
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	e.connected.Store(true)
	e.log.Info("assignment stream open", zap.Int("capacity", capacity))
	healthy := false
	for {
		a, err := st.Recv()
		if err != nil {
			return err
		}
		if !healthy {
			healthy = true
			bo.reset()
		}
		if a != nil {
			e.accept(a)
		}
	}
}

// waitCapacity returns the free slots (concurrency minus held leases) once
// there is at least one, or 0 when ctx ends. Leases awaiting their report
// count as held: the server frees their slot only when the report arrives.
func (e *Executor) waitCapacity(ctx context.Context) int {
	for {
		e.mu.Lock()
		free := e.opts.Concurrency + e.opts.Prefetch - len(e.tasks)
		e.mu.Unlock()
		if free > 0 {
			return free
		}
		select {
		case <-ctx.Done():
			return 0
		case <-e.capFreed:
		}
	}
}

func (e *Executor) setStreamCancel(c context.CancelFunc) {
	e.mu.Lock()
	e.streamCancel = c
	e.mu.Unlock()
}

// resetStream closes the current stream; the session loop decides what next.
func (e *Executor) resetStream() {
	e.mu.Lock()
	c := e.streamCancel
	e.mu.Unlock()
	if c != nil {
		c()
	}
}

// reregister makes the session loop register again and reopen the stream.
func (e *Executor) reregister() {
	e.registered.Store(false)
	e.resetStream()
}

// startDrain stops taking new jobs; running ones finish and are reported.
func (e *Executor) startDrain(why string) {
	if e.draining.CompareAndSwap(false, true) {
		e.log.Info("worker draining: taking no new jobs", zap.String("why", why))
		e.resetStream()
	}
}

func (e *Executor) heartbeatInterval() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hbInterval
}

// heartbeatLoop sends a heartbeat every interval while registered, or at once
// when asked (hbNow).
func (e *Executor) heartbeatLoop(ctx context.Context) {
	t := time.NewTimer(e.heartbeatInterval())
	defer t.Stop()
	unreachable := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.hbNow:
		}
		if e.registered.Load() {
			e.heartbeat(ctx, &unreachable)
		}
		t.Reset(e.heartbeatInterval())
	}
}

func (e *Executor) heartbeat(ctx context.Context, unreachable *int) {
	cctx, cancel := context.WithTimeout(ctx, min(e.opts.CallTimeout, max(e.heartbeatInterval(), time.Second)))
	defer cancel()
	held := e.heldLeases()
	sent := time.Now()
	reply, err := e.conn.Heartbeat(cctx, HeartbeatParams{WorkerID: e.opts.WorkerID, Running: held, Breakers: e.Breakers()})
	switch {
	case err == nil:
		*unreachable = 0
		e.noteRenewed(sent)
		signal(e.renewed)
		e.applyHeartbeat(reply, held)
	case ctx.Err() != nil:
	case errors.Is(err, ErrWorkerInactive):
		e.log.Warn("server declared this worker offline; stopping its jobs and registering again", zap.Error(err))
		e.loseLeases()
		e.reregister()
	case errors.Is(err, ErrUnknownWorker):
		e.log.Warn("server does not know this worker; registering again", zap.Error(err))
		e.reregister()
	default:
		*unreachable++
		e.log.Warn("heartbeat failed", zap.Int("consecutive", *unreachable), zap.Error(err))
		if errors.Is(err, ErrUnreachable) && *unreachable >= 2 {
			// The stream may be silently dead on the same connection.
			e.resetStream()
		}
	}
}

// applyHeartbeat acts on the server's answer to a heartbeat that listed held. The jobs to cancel
// are named by id: only the attempts the heartbeat listed are cancelled, never a newer attempt of
// the same job that arrived meanwhile.
func (e *Executor) applyHeartbeat(r HeartbeatReply, held []Lease) {
	if len(r.CancelJobIDs) > 0 {
		attempts := make(map[string]int, len(held))
		for _, l := range held {
			attempts[l.JobID] = l.Attempt
		}
		e.cancelByServer(r.CancelJobIDs, attempts)
	}
	switch r.Command {
	case CommandDrain:
		e.startDrain("operator drain command")
	case CommandShutdown:
		e.startDrain("operator shutdown command")
		e.requestShutdown()
	case CommandNone:
		e.endDrain()
	}
}

// endDrain takes jobs again after the operator resumed a drained worker; a worker told to shut
// down stays drained.
func (e *Executor) endDrain() {
	select {
	case <-e.shutdownReq:
		return
	default:
	}
	if e.draining.CompareAndSwap(true, false) {
		e.log.Info("worker resumed: taking jobs again")
		signal(e.undrained)
	}
}
