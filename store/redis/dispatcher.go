package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/store"
)

// Config configures a Dispatcher.
type Config struct {
	// Client is the connection (single node, Sentinel failover or Cluster).
	// The caller owns it and closes it after the Dispatcher's last use. Set
	// ContextTimeoutEnabled in its options so that a context's deadline bounds
	// each command; otherwise go-redis waits for ReadTimeout instead.
	Client goredis.UniversalClient
	// KeyPrefix heads every key ("<prefix>:{<queue>}:…"); empty means
	// DefaultKeyPrefix. It must not contain '{' or '}' (they would break the
	// per-queue hash tag). Tests use a prefix of their own.
	KeyPrefix string
}

// Dispatcher is a store.Dispatcher on Redis. It is safe for concurrent use.
type Dispatcher struct {
	client goredis.UniversalClient
	keys   keys
}

var _ store.Dispatcher = (*Dispatcher)(nil)

// New checks cfg, pings the server and loads the scripts, so an unreachable
// or script-less server fails here rather than on the first dispatch.
func New(ctx context.Context, cfg Config) (*Dispatcher, error) {
	if cfg.Client == nil {
		return nil, errors.New("redis: config: Client is nil")
	}
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redis: config: key prefix %q must not contain '{' or '}'", prefix)
	}
	d := &Dispatcher{client: cfg.Client, keys: keys{prefix: prefix}}
	if err := d.Ping(ctx); err != nil {
		return nil, err
	}
	for _, s := range allScripts {
		if err := s.Load(ctx, d.client).Err(); err != nil {
			return nil, wrap(ctx, "load scripts", err)
		}
	}
	return d, nil
}

// Ping checks the connection.
func (d *Dispatcher) Ping(ctx context.Context) error {
	return wrap(ctx, "ping", d.client.Ping(ctx).Err())
}

// ReadyPush takes each job's lock and adds the jobs whose lock it got to the
// queue's ready set, in one script. It returns how many locks it took; a job
// whose lock had expired while it still waited in the ready set is counted
// again but not duplicated. The whole batch is refused with
// queue.ErrInvalidArgument when any job is malformed.
func (d *Dispatcher) ReadyPush(ctx context.Context, p store.ReadyPushParams) (int, error) {
	if err := validateQueue(p.Queue); err != nil {
		return 0, err
	}
	if p.LockTTL <= 0 {
		return 0, invalid("lock TTL %v must be positive", p.LockTTL)
	}
	if len(p.Jobs) == 0 {
		return 0, nil
	}
	keys := make([]string, 1, len(p.Jobs)+1)
	keys[0] = d.keys.ready(p.Queue)
	args := make([]any, 1, 2*len(p.Jobs)+1)
	args[0] = lockTTLMillis(p.LockTTL)
	lockBase := d.keys.lock(p.Queue, "")
	for _, j := range p.Jobs {
		if j.ID == "" {
			return 0, invalid("empty job id")
		}
		score, err := readyScore(j.Priority, j.CreatedAt)
		if err != nil {
			return 0, fmt.Errorf("job %s: %w", j.ID, err)
		}
		keys = append(keys, lockBase+j.ID)
		args = append(args, score, j.ID)
	}
	n, err := readyPushScript.Run(ctx, d.client, keys, args...).Int()
	if err != nil {
		return 0, wrap(ctx, "ready push", err)
	}
	return n, nil
}

// ReadyLen is the number of jobs in the queue's ready set.
func (d *Dispatcher) ReadyLen(ctx context.Context, queueName string) (int64, error) {
	if err := validateQueue(queueName); err != nil {
		return 0, err
	}
	n, err := d.client.ZCard(ctx, d.keys.ready(queueName)).Result()
	if err != nil {
		return 0, wrap(ctx, "ready len", err)
	}
	return n, nil
}

// Claim moves up to p.Max jobs from the ready set into the worker's in-flight
// list in one script and returns their ids, highest priority then oldest
// first. An empty ready set gives an empty slice.
func (d *Dispatcher) Claim(ctx context.Context, p store.ClaimParams) ([]string, error) {
	if err := validateQueueWorker(p.Queue, p.WorkerID); err != nil {
		return nil, err
	}
	if p.Max <= 0 {
		return nil, invalid("max %d must be positive", p.Max)
	}
	keys := []string{d.keys.ready(p.Queue), d.keys.inflight(p.Queue, p.WorkerID)}
	ids, err := claimScript.Run(ctx, d.client, keys, p.Max).StringSlice()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, wrap(ctx, "claim", err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// InflightRemove removes the ids from the worker's in-flight list and releases
// the locks of the ids that were in it. Ids not in the list are ignored and
// their locks left alone: a call naming a worker that no longer holds a job
// must not unlock it for whoever holds it now.
func (d *Dispatcher) InflightRemove(ctx context.Context, p store.InflightParams) error {
	if err := validateQueueWorker(p.Queue, p.WorkerID); err != nil {
		return err
	}
	if len(p.IDs) == 0 {
		return nil
	}
	for _, id := range p.IDs {
		if id == "" {
			return invalid("empty job id")
		}
	}
	keys := make([]string, 1, len(p.IDs)+1)
	keys[0] = d.keys.inflight(p.Queue, p.WorkerID)
	keys = d.keys.locks(keys, p.Queue, p.IDs)
	args := make([]any, len(p.IDs))
	for i, id := range p.IDs {
		args[i] = id
	}
	if err := inflightRemoveScript.Run(ctx, d.client, keys, args...).Err(); err != nil {
		return wrap(ctx, "inflight remove", err)
	}
	return nil
}

// InflightList returns the ids in the worker's in-flight list, oldest claim
// first.
func (d *Dispatcher) InflightList(ctx context.Context, queueName, workerID string) ([]string, error) {
	if err := validateQueueWorker(queueName, workerID); err != nil {
		return nil, err
	}
	ids, err := d.client.LRange(ctx, d.keys.inflight(queueName, workerID), 0, -1).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, wrap(ctx, "inflight list", err)
	}
	if ids == nil {
		ids = []string{}
	}
	return ids, nil
}

// lockTTLMillis rounds a positive TTL up to whole milliseconds (PX takes
// milliseconds, and 0 is an error).
func lockTTLMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{queue.ErrInvalidArgument}, args...)...)
}

func validateQueue(queueName string) error {
	return queue.ValidateQueueName(queueName)
}

func validateQueueWorker(queueName, workerID string) error {
	if err := validateQueue(queueName); err != nil {
		return err
	}
	if workerID == "" {
		return invalid("empty worker id")
	}
	return nil
}

// wrap prefixes err with the operation and, when ctx has ended, makes the
// context's error part of the chain. go-redis v9.23 mostly does so itself, but
// not for every path (a socket timeout that fires a hair before the context's
// timer, or a client without ContextTimeoutEnabled that waited ReadTimeout),
// and callers rely on errors.Is(err, context.DeadlineExceeded).
func wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	ctxErr := ctx.Err()
	if ctxErr == nil {
		if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
			ctxErr = context.DeadlineExceeded // the socket timed out a hair before the context's timer
		}
	}
	if ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("redis: %s: %w: %w", op, ctxErr, err)
	}
	return fmt.Errorf("redis: %s: %w", op, err)
}
