package apiserver_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/jq-dev/jq/api/auth"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/queue/engine"
)

// Seed 003 §8: every non-OK response is logged with timestamp, method, code, message, job id and
// caller identity (the principal); a flood is cut by the rate limit and the cut lines counted.
func TestErrorLogEveryNonOKResponse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, eng := runEngine(ctx, t, engine.Options{})
	tok, err := auth.NewToken()
	require.NoError(t, err)
	a, err := auth.New(auth.Options{Tokens: []auth.TokenEntry{{Name: "ingest", Roles: []auth.Role{auth.RoleProducer}, SHA256: auth.HashToken(tok)}}})
	require.NoError(t, err)
	core, logs := observer.New(zapcore.InfoLevel)
	now := time.Now()
	var clock atomic.Int64 // seconds past now: the limiter refills only when the test says so
	var dropped atomic.Int64
	addr := serveAddr(t, apiserver.Options{
		Store: st, Engine: eng, Log: zap.New(core), Auth: a, Limits: apiserver.Limits{MaxPayloadBytes: 1 << 20},
		ErrorLog: apiserver.ErrorLog{PerSec: 1, Burst: 3, Dropped: func() { dropped.Add(1) },
			Now: func() time.Time { return now.Add(time.Duration(clock.Load()) * time.Second) }},
	})
	cl, err := rpcclient.New(rpcclient.Options{Addr: addr, Token: tok})
	require.NoError(t, err)
	defer cl.Close()
	failed := func() []observer.LoggedEntry { return logs.FilterMessage("non-ok response").All() }

	// OK responses are not logged.
	_, err = cl.Admin.GetVersion(ctx, connect.NewRequest(&jqv1.GetVersionRequest{}))
	require.NoError(t, err)
	require.Empty(t, failed())

	missing := uuid.NewString()
	_, err = cl.Jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: missing}))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
	require.Len(t, failed(), 1)
	e := failed()[0]
	require.False(t, e.Time.IsZero(), "timestamp")
	require.Equal(t, zapcore.InfoLevel, e.Level)
	f := e.ContextMap()
	require.Equal(t, "/jq.v1.JobService/GetJob", f["method"])
	require.Equal(t, "not_found", f["grpc_code"])
	require.Contains(t, f["error_message"], "not found")
	require.Equal(t, missing, f["job_id"])
	require.Equal(t, "token:ingest", f["caller"], "the principal")

	// A flood: the burst left is 2 lines, the rest is counted, not written.
	for range 50 {
		_, err = cl.Jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: "not-a-uuid"}))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	}
	require.Len(t, failed(), 3)
	require.Equal(t, int64(48), dropped.Load())
	// A second later one more line is allowed; it says how many were left out before it.
	clock.Add(1)
	_, err = cl.Jobs.GetJob(ctx, connect.NewRequest(&jqv1.GetJobRequest{JobId: missing}))
	require.Error(t, err)
	all := failed()
	require.Len(t, all, 4)
	require.Equal(t, int64(48), all[3].ContextMap()["dropped_before"])
}
