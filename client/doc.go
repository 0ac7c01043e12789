// Package client is the Go client of jq: submit jobs, wait for them, fetch their results, cancel
// and retry them, with typed arguments, functional options and errors that match the sentinels of
// package queue.
//
//	c, err := client.New(client.Options{Addr: "localhost:50051", Token: os.Getenv("JQ_TOKEN")})
//	if err != nil { … }
//	defer c.Close()
//
//	sub, err := client.SubmitArgs(ctx, c, "emails", "email.send", SendEmail{To: "a@example.com"},
//		client.Priority(5), client.MaxRetries(3), client.IdempotencyKey("welcome-42"), client.KeepResult())
//	job, err := c.Wait(ctx, sub.ID) // DONE or DEAD_LETTERED
//	res, found, err := c.Result(ctx, sub.ID, false) // res.Data on success; res.Reason, res.Error on failure
//
// Errors of the server come back as *Error: errors.Is matches the sentinel the server named with the
// error's reason (a google.rpc.ErrorInfo detail; the table is package api/apierr and docs/api.md):
// [queue.ErrJobNotFound], [queue.ErrQueueNotFound], [queue.ErrInvalidArgument],
// [queue.ErrIdempotencyConflict], [queue.ErrIllegalTransition], [queue.ErrPermissionDenied],
// [queue.ErrUnauthenticated], …; every UNAVAILABLE also matches [ErrUnavailable], and errors.As still
// finds the *connect.Error. [CallError] maps the error of a call made through [Client.API] the same way.
//
// A worker (queue/executor) runs on the same connection: workerconn.New(c.API()). To insert a
// job inside an application's own Postgres transaction, see package client/jqpgx.
//
// The package wraps github.com/jq-dev/jq/api/rpcclient, the transport (gRPC over HTTP/2, TLS or
// mTLS, bearer tokens, failover between replicas) and the generated stubs; [Client.API] reaches
// them for the calls not wrapped here (queues, workers, admin).
package client
