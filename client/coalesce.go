package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
)

// submitSlots is how many submit calls one client keeps on the wire at once. A Submit that finds
// them all busy waits for the next free one and goes out with every other Submit waiting then, in
// one SubmitJobs call: at a steady rate of single submits from many goroutines each call carries
// the submits of about one round trip, and the server's cost of a call (HTTP/2, decoding, the
// group commit) is shared by them. A lone Submit goes out at once, as its own SubmitJob.
const submitSlots = 2

// coalescer gathers concurrent Submit calls of one client (see submitSlots).
type coalescer struct {
	api  *rpcclient.Client
	prop propagation.TextMapPropagator // nil: no tracing, no trace context to carry per job

	mu      sync.Mutex
	waiting []*pendingSubmit
	busy    int // slots in use
}

type pendingSubmit struct {
	ctx  context.Context
	spec *jqv1.JobSpec
	done chan submitResult // buffered: the sender never blocks on a caller that left
}

type submitResult struct {
	s   Submitted
	err error // the call's error as the RPC returned it (CallError is applied by Submit)
}

func newCoalescer(api *rpcclient.Client, opts rpcclient.Options) *coalescer {
	c := &coalescer{api: api}
	if opts.TracerProvider != nil {
		c.prop = opts.Propagator
		if c.prop == nil {
			c.prop = propagation.TraceContext{}
		}
	}
	return c
}

// submit sends spec now when a slot is free, else with the next batch, and waits for its result
// or for ctx. A caller that leaves before its submit was sent never sends it.
func (c *coalescer) submit(ctx context.Context, spec *jqv1.JobSpec) (Submitted, error) {
	p := &pendingSubmit{ctx: ctx, spec: spec, done: make(chan submitResult, 1)}
	c.mu.Lock()
	if c.busy < submitSlots {
		c.busy++
		c.mu.Unlock()
		go c.run([]*pendingSubmit{p})
	} else {
		c.waiting = append(c.waiting, p)
		c.mu.Unlock()
	}
	select {
	case r := <-p.done:
		return r.s, r.err
	case <-ctx.Done():
		return Submitted{}, context.Cause(ctx)
	}
}

// run holds a slot: it sends batch, then whatever waits, until nothing does.
func (c *coalescer) run(batch []*pendingSubmit) {
	for len(batch) > 0 {
		c.send(batch)
		c.mu.Lock()
		n := min(len(c.waiting), MaxBatch)
		batch = c.waiting[:n:n]
		c.waiting = c.waiting[n:]
		if n == 0 {
			c.waiting = nil
			c.busy--
		}
		c.mu.Unlock()
	}
}

// send submits a batch: one SubmitJob for a lone job (with its caller's context, as an uncoalesced
// call), else one SubmitJobs. SubmitJobs is atomic, so when the server refused the whole batch for
// a reason it decides before writing anything (neverApplied), the batch is sent again in halves
// until the refused jobs are alone and get their own answers; any other error may hide a commit and
// is every caller's answer, as it would have been for a single call.
func (c *coalescer) send(batch []*pendingSubmit) {
	live := batch[:0]
	for _, p := range batch {
		if p.ctx.Err() != nil {
			p.done <- submitResult{err: context.Cause(p.ctx)} // the caller has left; nothing sent
			continue
		}
		live = append(live, p)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		p := live[0]
		resp, err := c.api.Jobs.SubmitJob(p.ctx, connect.NewRequest(&jqv1.SubmitJobRequest{Job: p.spec}))
		if err != nil {
			p.done <- submitResult{err: err}
			return
		}
		p.done <- submitResult{s: Submitted{ID: resp.Msg.GetJobId(), Existing: resp.Msg.GetExisting()}}
		return
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	specs := make([]*jqv1.JobSpec, len(live))
	for i, p := range live {
		specs[i] = c.traced(p)
	}
	resp, err := c.api.Jobs.SubmitJobs(ctx, connect.NewRequest(&jqv1.SubmitJobsRequest{Jobs: specs}))
	if err == nil && len(resp.Msg.GetResults()) == len(live) {
		for i, r := range resp.Msg.GetResults() {
			live[i].done <- submitResult{s: Submitted{ID: r.GetJobId(), Existing: r.GetExisting()}}
		}
		return
	}
	if err != nil && neverApplied(err) {
		// Halves until each refused job is alone: k refused jobs cost about 2k·log2(n) calls.
		half := len(live) / 2
		c.send(live[:half:half])
		c.send(live[half:])
		return
	}
	if err == nil {
		err = connect.NewError(connect.CodeInternal, errors.New("the server answered a batch of submits with a different number of results"))
	}
	for _, p := range live {
		p.done <- submitResult{err: err}
	}
}

// batchContext is the context of a batch: no caller's cancellation (another caller's job must not
// fail because one left), the latest deadline of its callers, and the first caller's values.
func batchContext(batch []*pendingSubmit) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, p := range batch {
		d, ok := p.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.WithoutCancel(batch[0].ctx))
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), latest)
}

// traced returns the spec of p carrying its caller's trace context when tracing is on and the
// spec names none: the batch's call carries only one caller's context in its headers.
func (c *coalescer) traced(p *pendingSubmit) *jqv1.JobSpec {
	if c.prop == nil || len(p.spec.GetTraceContext()) > 0 || !trace.SpanContextFromContext(p.ctx).IsValid() {
		return p.spec
	}
	carrier := propagation.MapCarrier{}
	c.prop.Inject(p.ctx, carrier)
	if len(carrier) > 0 {
		p.spec.TraceContext = carrier // the spec is Submit's own
	}
	return p.spec
}

// neverApplied reports errors that a server returns before it writes anything: the request was
// refused as a whole (validation, an unknown queue, authorisation, an idempotency conflict).
func neverApplied(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition,
		connect.CodeAlreadyExists, connect.CodePermissionDenied, connect.CodeUnauthenticated,
		connect.CodeResourceExhausted, connect.CodeOutOfRange:
		return true
	}
	return false
}
