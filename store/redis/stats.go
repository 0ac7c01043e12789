package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jq-dev/jq/store"
)

// scanCount is the COUNT hint of each SCAN page: large enough for few round
// trips, small enough that no single call holds the server noticeably.
const scanCount = 1000

// Counts returns the total in-flight entries of each queue, in the order given.
// The in-flight sets, whose worker ids are not known here, are found with SCAN
// MATCH on their key pattern (walked page by page on every master, never KEYS)
// and measured with pipelined ZCARDs. Sets of queues not asked for are ignored.
func (d *Dispatcher) Counts(ctx context.Context, queues []string) ([]store.DispatchCounts, error) {
	out := make([]store.DispatchCounts, len(queues))
	index := make(map[string]int, len(queues))
	for i, q := range queues {
		if err := validateQueue(q); err != nil {
			return nil, err
		}
		out[i].Queue = q
		index[q] = i
	}
	if len(queues) == 0 {
		return out, nil
	}

	var mu sync.Mutex
	scan := func(ctx context.Context, c goredis.Cmdable) error {
		pattern := keys{prefix: globEscape(d.keys.prefix)}.inflight("*", "*")
		var cursor uint64
		for {
			found, next, err := c.Scan(ctx, cursor, pattern, scanCount).Result()
			if err != nil {
				return err
			}
			if err := d.addInflight(ctx, c, found, index, out, &mu); err != nil {
				return err
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	var err error
	if cc, ok := d.client.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, d.client)
	}
	if err != nil {
		return nil, wrap(ctx, "counts", err)
	}
	return out, nil
}

// addInflight adds the sizes of the in-flight sets among found to their
// queues' counts.
func (d *Dispatcher) addInflight(ctx context.Context, c goredis.Cmdable, found []string, index map[string]int,
	out []store.DispatchCounts, mu *sync.Mutex) error {
	type item struct {
		i   int
		cmd *goredis.IntCmd
	}
	var items []item
	pipe := c.Pipeline()
	for _, k := range found {
		q, ok := d.inflightQueue(k)
		if !ok {
			continue
		}
		if i, ok := index[q]; ok {
			items = append(items, item{i: i, cmd: pipe.ZCard(ctx, k)})
		}
	}
	if len(items) == 0 {
		return nil
	}
	// A set emptied between SCAN and ZCARD counts 0; a key of another type
	// (not ours) is skipped rather than failing the whole call.
	_, _ = pipe.Exec(ctx)
	mu.Lock()
	defer mu.Unlock()
	for _, it := range items {
		n, err := it.cmd.Result()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if isConnError(err) {
				return err
			}
			continue
		}
		out[it.i].Inflight += n
	}
	return nil
}

// inflightQueue returns the queue of an in-flight set key, checking that the
// key is exactly what keys.inflight builds for it.
func (d *Dispatcher) inflightQueue(key string) (string, bool) {
	head := d.keys.prefix + ":{"
	rest, ok := strings.CutPrefix(key, head)
	if !ok {
		return "", false
	}
	q, _, ok := strings.Cut(rest, "}")
	if !ok || validateQueue(q) != nil {
		return "", false
	}
	if !strings.HasPrefix(key, d.keys.inflight(q, "")) || len(key) == len(d.keys.inflight(q, "")) {
		return "", false
	}
	return q, true
}

// isConnError tells a transport failure (which fails the call) from a reply
// error about one key (which does not).
func isConnError(err error) bool {
	var re goredis.Error
	return !errors.As(err, &re)
}

// globEscape quotes the glob metacharacters of SCAN MATCH in s.
func globEscape(s string) string {
	var sb strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			sb.WriteByte('\\')
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
