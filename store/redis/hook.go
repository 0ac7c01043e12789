package redisstore

import (
	"context"
	"crypto/sha1" //nolint:gosec // Redis names scripts by SHA-1; no security role here
	"encoding/hex"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// OperationObserver receives the duration of every Redis round trip by operation: the command
// name in lower case ("zcard", "ping"), the name of the jq script for EVALSHA and EVAL
// (ScriptNames), or "pipeline" for a pipeline. err is the command's error; redis.Nil (a missing
// key) is not an error. It must be fast and safe for concurrent use.
type OperationObserver func(operation string, d time.Duration, err error)

// ScriptNames maps the SHA-1 of each script of this package to its name, the file name without
// .lua: "inflight_add", "inflight_remove".
var ScriptNames = map[string]string{
	inflightAddScript.Hash():    "inflight_add",
	inflightRemoveScript.Hash(): "inflight_remove",
}

// NewHook returns a go-redis hook that times every command and pipeline of the client it is added
// to (client.AddHook) and reports them to observe, for jq_redis_operation_duration_seconds.
func NewHook(observe OperationObserver) goredis.Hook {
	return hook{observe: observe}
}

type hook struct{ observe OperationObserver }

func (h hook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h hook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmd)
		h.observe(Operation(cmd), time.Since(start), realErr(err))
		return err
	}
}

func (h hook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		h.observe("pipeline", time.Since(start), realErr(err))
		return err
	}
}

func realErr(err error) error {
	if err == goredis.Nil { //nolint:errorlint // go-redis returns the sentinel itself
		return nil
	}
	return err
}

// Operation names a command for metrics: its name, or for EVALSHA/EVAL of a script of this
// package the script's name. Another script is "evalsha" or "eval", so the label set stays bounded.
func Operation(cmd goredis.Cmder) string {
	name := cmd.Name()
	args := cmd.Args()
	if len(args) < 2 {
		return name
	}
	switch name {
	case "evalsha", "evalsha_ro":
		if sha, ok := args[1].(string); ok {
			if s, ok := ScriptNames[sha]; ok {
				return s
			}
		}
	case "eval", "eval_ro":
		if src, ok := args[1].(string); ok {
			sum := sha1.Sum([]byte(src)) //nolint:gosec // see the import
			if s, ok := ScriptNames[hex.EncodeToString(sum[:])]; ok {
				return s
			}
		}
	}
	return name
}
