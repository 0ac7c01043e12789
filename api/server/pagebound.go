package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/semaphore"
	"google.golang.org/protobuf/proto"

	"github.com/jq-dev/jq/api/apierr"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// DefaultMaxPayloadPages is how many full pages carrying payloads (ListJobs or PeekQueue with
// include_payloads) one server holds at once when Limits.PayloadPageBudget is 0: the budget is
// this many times the page byte budget (server.max_page_bytes).
const DefaultMaxPayloadPages = 4

// payloadPageWait is how long a page with payloads waits for its turn before RESOURCE_EXHAUSTED.
const payloadPageWait = 10 * time.Second

// payloadPageWriteTimeout bounds the writing of a page with payloads: a client that does not read
// its response cannot hold its share of the budget for longer.
const payloadPageWriteTimeout = 30 * time.Second

// payloadCarrier is a request that may ask for payloads in its page.
type payloadCarrier interface{ GetIncludePayloads() bool }

// jobsCarrier is a response that carries a page of jobs.
type jobsCarrier interface{ GetJobs() []*jqv1.Job }

// pageBound bounds the payload bytes of the pages being built, encoded and written at once (16
// pages of 4 MiB at once took a server from 224 to 665 MB). A page takes its
// share of the budget before the handler reads anything — a whole page's worth, since its size is
// not known yet — gives back what its rows turned out not to need as soon as the handler returns,
// and keeps the rest until its response has been written (the request's end; a client that does
// not read is cut off after payloadPageWriteTimeout). What a page costs beyond its payload bytes
// is a small multiple of them: the rows as read, the encoding (about its size, api/codec) and the
// copy connect writes from.
type pageBound struct {
	page int64               // what a page takes before its size is known
	size int64               // the budget
	sem  *semaphore.Weighted // first come, first served: a large page is not overtaken by small ones
}

func newPageBound(budget, page int64) *pageBound {
	if budget < page {
		budget = page
	}
	return &pageBound{page: page, size: budget, sem: semaphore.NewWeighted(budget)}
}

// interceptor takes a share for each request with include_payloads; pages without payloads are
// not held back. The others wait their turn, within their deadline and payloadPageWait.
func (b *pageBound) interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if req.Spec().IsClient {
				return next(ctx, req)
			}
			if c, ok := req.Any().(payloadCarrier); !ok || !c.GetIncludePayloads() {
				return next(ctx, req)
			}
			wctx, cancel := context.WithTimeout(ctx, payloadPageWait)
			err := b.sem.Acquire(wctx, b.page)
			cancel()
			switch {
			case err != nil && ctx.Err() != nil:
				return nil, fmt.Errorf("waiting for a turn to build a page with payloads: %w", ctx.Err())
			case err != nil:
				return nil, apierr.New(apierr.ErrPagesBusy,
					fmt.Sprintf("pages with %d MiB of payloads are being sent by this server, the most at once; retry later or list without include_payloads", b.size>>20))
			}
			resp, err := next(ctx, req)
			if err != nil || resp == nil {
				b.sem.Release(b.page)
				return resp, err
			}
			keep := b.page
			if jc, ok := resp.Any().(jobsCarrier); ok {
				keep = min(keep, dataBytes(jc.GetJobs()))
			}
			b.sem.Release(b.page - keep)
			var once sync.Once
			release := func() { once.Do(func() { b.sem.Release(keep) }) }
			if end, ok := ctx.Value(requestEndKey{}).(*requestEnd); ok {
				// A writer that cannot take a deadline (an in-process caller's buffer) is not slow.
				_ = end.rc.SetWriteDeadline(time.Now().Add(payloadPageWriteTimeout))
				end.add(release) // when ServeHTTP returns: the response written, or failed
			}
			context.AfterFunc(ctx, release) // should the request end without the middleware
			return resp, nil
		}
	}
}

// dataBytes is what a page's jobs carry in payloads and results.
func dataBytes(jobs []*jqv1.Job) int64 {
	var n int64
	for _, j := range jobs {
		n += int64(len(j.GetPayload()) + len(j.GetResult().GetData()))
	}
	return n
}

// requestEnd is what the interceptors see of the HTTP exchange, which connect hides from them:
// its http.ResponseController (a page with payloads bounds its write) and the functions to run
// when ServeHTTP returns (its share of the budget, whatever the request's context).
type requestEnd struct {
	rc *http.ResponseController

	mu  sync.Mutex
	fns []func()
}

type requestEndKey struct{}

func (e *requestEnd) add(f func()) {
	e.mu.Lock()
	e.fns = append(e.fns, f)
	e.mu.Unlock()
}

func (e *requestEnd) run() {
	e.mu.Lock()
	fns := e.fns
	e.fns = nil
	e.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// withRequestEnd gives the interceptors the request's requestEnd.
func withRequestEnd(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		end := &requestEnd{rc: http.NewResponseController(w)}
		defer end.run()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestEndKey{}, end)))
	})
}

// protoCodec is connect's binary protobuf codec (application/proto, gRPC), registered beside the
// JSON and MessagePack codecs.
type protoCodec struct{}

func (protoCodec) Name() string   { return "proto" }
func (protoCodec) IsBinary() bool { return true }

func (protoCodec) Marshal(msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", msg)
	}
	return proto.Marshal(m)
}

func (protoCodec) Unmarshal(data []byte, msg any) error {
	m, ok := msg.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", msg)
	}
	return proto.Unmarshal(data, m)
}
