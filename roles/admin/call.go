package admin

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/client"
)

// How a command talks to the server: the job calls the Go client wraps (submit, get, wait, cancel,
// retry) go through its methods, so the CLI and applications share one error mapping and one wait
// policy; every other call goes through call, with the generated stubs underneath, and its error
// through client.CallError. Either way a request is bounded by --timeout, errors.Is matches the
// sentinel the server's reason names (api/apierr) and errors.As finds the *connect.Error: exitCode,
// errorLine and every hint decide on the sentinels, never on a status code.

// call sends req to the server through one method of the API, named by its method expression
// (jqv1connect.QueueServiceClient.PauseQueue), under the command's deadline (--timeout), and
// returns the server's answer. The caller maps the error (named, failed) for its subject.
func call[S, Req, Resp any](re *runEnv, method func(S, context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), req *Req) (*Resp, error) {
	cl, err := re.Client()
	if err != nil {
		return nil, err
	}
	svc := service[S](cl.API())
	return request(re.ctx, re.globals.Timeout, func(ctx context.Context, r *connect.Request[Req]) (*connect.Response[Resp], error) {
		return method(svc, ctx, r)
	}, req)
}

// request sends req through rpc, a method of a service client, bounded by timeout, and returns
// the answer: call's core, for the loops (events tail, bench) that hold a service client of their
// own and a context other than the command's.
func request[Req, Resp any](ctx context.Context, timeout time.Duration, rpc func(context.Context, *connect.Request[Req]) (*connect.Response[Resp], error), req *Req) (*Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := rpc(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, client.CallError("", err)
	}
	return resp.Msg, nil
}

// service is the stub of a whose interface is S: one of the jqv1connect …ServiceClient
// interfaces, as the method expressions given to call name them.
func service[S any](a *rpcclient.Client) S {
	var s S
	switch p := any(&s).(type) {
	case *jqv1connect.JobServiceClient:
		*p = a.Jobs
	case *jqv1connect.QueueServiceClient:
		*p = a.Queues
	case *jqv1connect.WorkerServiceClient:
		*p = a.Workers
	case *jqv1connect.AdminServiceClient:
		*p = a.Admin
	case *jqv1connect.ScheduleServiceClient:
		*p = a.Schedules
	case *jqv1connect.ConstraintServiceClient:
		*p = a.Constraints
	default:
		panic(fmt.Sprintf("admin: %T does not point to a service of the jq API", &s)) // a call site's mistake: every command's test catches it
	}
	return s
}
