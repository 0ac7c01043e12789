package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
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
	d, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	if err := d.Prepare(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// Open checks cfg and returns a Dispatcher without contacting the server: for a
// caller that can run while Redis is down (the server dispatches from Postgres
// then) and calls Prepare itself. The scripts need no Prepare to work: each call
// falls back to EVAL when the server does not have them.
func Open(cfg Config) (*Dispatcher, error) {
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
	return &Dispatcher{client: cfg.Client, keys: keys{prefix: prefix}}, nil
}

// Prepare pings the server and loads the scripts. Unreachable tells an outage
// (worth waiting out) from a server that refuses this client.
func (d *Dispatcher) Prepare(ctx context.Context) error {
	if err := d.Ping(ctx); err != nil {
		return err
	}
	for _, s := range allScripts {
		if err := s.Load(ctx, d.client).Err(); err != nil {
			return wrap(ctx, "load scripts", err)
		}
	}
	return nil
}

// Unreachable reports whether err, from Prepare or any other call, says that
// Redis could not be reached or is not serving yet (refused, reset, timed out,
// unknown host; LOADING, MASTERDOWN, CLUSTERDOWN, TRYAGAIN) rather than that
// the configuration is wrong or a reachable server refused the client
// (authentication, an unknown command): the first passes, the others need an
// operator.
func Unreachable(err error) bool {
	var ne net.Error
	switch {
	case err == nil:
		return false
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, goredis.ErrPoolTimeout):
		return true
	}
	return goredis.IsLoadingError(err) || goredis.IsMasterDownError(err) ||
		goredis.IsClusterDownError(err) || goredis.IsTryAgainError(err)
}

// Ping checks the connection.
func (d *Dispatcher) Ping(ctx context.Context) error {
	return wrap(ctx, "ping", d.client.Ping(ctx).Err())
}

// InflightAdd records jobs Postgres just assigned to the worker: each enters the worker's
// in-flight set and takes its lock, in one script. The whole batch is refused with
// queue.ErrInvalidArgument when an id is empty.
func (d *Dispatcher) InflightAdd(ctx context.Context, p store.InflightAddParams) error {
	if err := validateQueueWorker(p.Queue, p.WorkerID); err != nil {
		return err
	}
	if p.LockTTL <= 0 {
		return invalid("lock TTL %v must be positive", p.LockTTL)
	}
	if len(p.IDs) == 0 {
		return nil
	}
	keys := make([]string, 1, len(p.IDs)+1)
	keys[0] = d.keys.inflight(p.Queue, p.WorkerID)
	args := make([]any, 2, len(p.IDs)+2)
	args[0], args[1] = lockTTLMillis(p.LockTTL), time.Now().UnixMilli()
	for _, id := range p.IDs {
		if id == "" {
			return invalid("empty job id")
		}
		args = append(args, id)
	}
	keys = d.keys.locks(keys, p.Queue, p.IDs)
	if err := inflightAddScript.Run(ctx, d.client, keys, args...).Err(); err != nil {
		return wrap(ctx, "inflight add", err)
	}
	return nil
}

// InflightRemove removes the ids from the worker's in-flight set and releases
// the locks of the ids that were in it. Ids not in the set are ignored and
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

// InflightList returns the ids in the worker's in-flight set, oldest assignment first.
func (d *Dispatcher) InflightList(ctx context.Context, queueName, workerID string) ([]string, error) {
	if err := validateQueueWorker(queueName, workerID); err != nil {
		return nil, err
	}
	ids, err := d.client.ZRange(ctx, d.keys.inflight(queueName, workerID), 0, -1).Result()
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
