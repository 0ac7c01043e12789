package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Weighted dispatch (docs/flow-control.md). A queue with priority weights or a max_wait claims through the
// store's weighted path: the engine keeps a queue.LevelScheduler per queue, plans each claim's level
// quotas with it (store.JobClaimParams.Levels, with MaxWait for aging) and charges what the claim
// took. The store only executes the quotas.
//
// The scheduler's state is in memory, per server replica: with several replicas each shares its
// own claims in proportion, so the queue's dispatch as a whole is in proportion too (a sum of
// proportional shares), but the exact sequence is per replica. Sessions of one replica claim the
// same queue concurrently, each planning from the state it finds; only what was served is charged,
// so a plan two claims both took is corrected by the following ones. A queue without weights and
// without max_wait keeps the plain claim (strict priority): one statement, nothing planned.

// idleRecheck is how often the levels found without due jobs take part in the picks again
// (queue.LevelScheduler.Wake): how long a level whose jobs became due may wait for its share while
// the other levels keep every claim full.
const idleRecheck = time.Second

// queueSettingsTTL is how long the engine trusts a queue's weights and max_wait before reading them
// again: a queue deleted and created again with other settings is dispatched by them within it.
const queueSettingsTTL = 5 * time.Second

// QueueSettingsTTL is the bound within which a replica dispatches by a queue's changed weights and max_wait
// even when the change's announcement did not reach it.
const QueueSettingsTTL = queueSettingsTTL

// queueSettingsChanged prefixes the notification a replica sends after it changed a queue's
// settings ("queue-settings:<name>"): the others read them again at their next claim of the queue
// instead of at the end of queueSettingsTTL (queue names never hold ':').
const queueSettingsChanged = "queue-settings:"

// announceQueueSettings tells the other replicas queue q's settings changed. A lost notification
// only delays them to their next read, within queueSettingsTTL.
func (e *Engine) announceQueueSettings(ctx context.Context, q string) {
	if e.opts.Notifier == nil {
		return
	}
	if err := e.opts.Notifier.Notify(ctx, []string{queueSettingsChanged + q}); err != nil {
		e.log.Warn("telling the other replicas a queue changed failed; they read it again within the settings' refresh bound",
			zap.String("queue", q), zap.Error(err))
	}
}

// forgetQueueSettings makes the next claim of queue q read its settings again.
func (e *Engine) forgetQueueSettings(q string) {
	ls := e.levelStateOf(q)
	ls.mu.Lock()
	ls.read = time.Time{}
	ls.mu.Unlock()
}

// levelState is the weighted-dispatch state of one queue on this replica.
type levelState struct {
	mu      sync.Mutex
	read    time.Time // when the settings were read; zero: never
	maxWait time.Duration
	sched   *queue.LevelScheduler // nil: no weights
	woken   time.Time             // the last Wake of sched
}

func (e *Engine) levelStateOf(q string) *levelState {
	e.levelsMu.Lock()
	defer e.levelsMu.Unlock()
	if e.levels == nil {
		e.levels = map[string]*levelState{}
	}
	ls := e.levels[q]
	if ls == nil {
		ls = &levelState{}
		e.levels[q] = ls
	}
	return ls
}

// refreshSettings reads queue q's weights and max_wait into ls when they are older than
// queueSettingsTTL (or were forgotten). ls.mu is held.
func (e *Engine) refreshSettings(ctx context.Context, ls *levelState, q string) {
	// Freshness of a cached setting, not a rule of the domain: the monotonic wall clock.
	if !ls.read.IsZero() && time.Since(ls.read) <= queueSettingsTTL {
		return
	}
	ls.read = time.Now()
	got, err := e.opts.Store.QueueGet(ctx, q)
	switch {
	case errors.Is(err, queue.ErrQueueNotFound):
		ls.sched, ls.maxWait = nil, 0
	case err != nil:
		// Keep the settings read before; the claim goes on with them.
		e.log.Warn("reading queue settings failed", zap.String("queue", q), zap.Error(err))
	default:
		if !ls.sched.Same(got.PriorityWeights) {
			ls.sched = queue.NewLevelScheduler(got.PriorityWeights)
		}
		ls.maxWait = got.MaxWait
	}
}

// DispatchOrder returns the first n of queue q's due jobs (byLevel: each priority's, FIFO) in the
// order this replica's claims would take them now: queue.DispatchOrder with the queue's weights,
// aging bound and the replica's own weighted-dispatch state, the same the claims plan with.
func (e *Engine) DispatchOrder(ctx context.Context, q string, byLevel map[int][]*queue.Job, n int) []*queue.Job {
	ls := e.levelStateOf(q)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e.refreshSettings(ctx, ls, q)
	return queue.DispatchOrder(byLevel, ls.sched, ls.maxWait, e.now(), n)
}

// weigh sets p's weighted fields from its queue's settings and returns the state to charge with the
// claimed jobs, or nil when the queue dispatches in strict priority (p unchanged).
func (e *Engine) weigh(ctx context.Context, p *store.JobClaimParams) *levelState {
	ls := e.levelStateOf(p.Queue)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	e.refreshSettings(ctx, ls, p.Queue)
	if ls.sched == nil && ls.maxWait == 0 {
		return nil
	}
	p.MaxWait = ls.maxWait
	if ls.sched != nil {
		if time.Since(ls.woken) > idleRecheck {
			ls.sched.Wake()
			ls.woken = time.Now()
		}
		p.Levels = ls.sched.Plan(p.Limit)
	}
	return ls
}

// served charges the jobs a weighted claim p took, and marks idle the planned levels that were
// short of their quota for want of due jobs. The store gives a level at least min(its due jobs, its
// quota) (store.JobClaimParams), so a short level had fewer due — unless aged jobs took part of the
// limit: a full claim with a max_wait tells nothing.
func (ls *levelState) served(p store.JobClaimParams, jobs []*queue.Job) {
	if ls == nil {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.sched == nil {
		return
	}
	prios := make([]int, len(jobs))
	took := map[int]int{}
	for i, j := range jobs {
		prios[i] = j.Priority
		took[j.Priority]++
	}
	ls.sched.Served(prios...)
	if len(jobs) == p.Limit && p.MaxWait > 0 {
		return
	}
	for _, l := range p.Levels {
		if took[l.Priority] < l.Max {
			ls.sched.Idle(l.Priority)
		}
	}
}
