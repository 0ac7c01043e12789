package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxPayloadPages is how many pages carrying payloads (ListJobs or PeekQueue with
// include_payloads) one server builds and encodes at once when Limits.MaxPayloadPages is 0.
const DefaultMaxPayloadPages = 4

// payloadPageWait is how long a page with payloads waits for its turn before RESOURCE_EXHAUSTED.
const payloadPageWait = 10 * time.Second

// payloadCarrier is a request that may ask for payloads in its page.
type payloadCarrier interface{ GetIncludePayloads() bool }

// pageBound bounds the pages with payloads being built and encoded at once. Each holds up to
// server.max_page_bytes of payloads, and encoding one takes about ten times that: 16 at once took
// a server from 224 to 665 MB (issue 22, attack 7), and on this machine over 1 GB. A page's turn
// starts before the handler and ends when its response has been encoded (boundCodec), which
// connect does after the interceptors return.
type pageBound struct {
	n       int
	sem     chan struct{}
	pending sync.Map // response message → its release
}

func newPageBound(n int) *pageBound {
	if n <= 0 {
		n = DefaultMaxPayloadPages
	}
	return &pageBound{n: n, sem: make(chan struct{}, n)}
}

// interceptor takes a turn for each request with include_payloads; pages without payloads are
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
			t := time.NewTimer(payloadPageWait)
			defer t.Stop()
			select {
			case b.sem <- struct{}{}:
			case <-t.C:
				return nil, connect.NewError(connect.CodeResourceExhausted,
					fmt.Errorf("%d pages with payloads are being built on this server, the most at once; retry later or list without include_payloads", b.n))
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting for a turn to build a page with payloads: %w", ctx.Err())
			}
			var once sync.Once
			release := func() { once.Do(func() { <-b.sem }) }
			resp, err := next(ctx, req)
			if err != nil || resp == nil {
				release()
				return resp, err
			}
			b.pending.Store(resp.Any(), release)
			// Should no wrapped codec encode it, the turn ends with the request.
			context.AfterFunc(ctx, func() {
				b.pending.Delete(resp.Any())
				release()
			})
			return resp, nil
		}
	}
}

// codec wraps a server codec so that encoding a held page ends its turn.
func (b *pageBound) codec(c connect.Codec) connect.Codec { return boundCodec{Codec: c, b: b} }

type boundCodec struct {
	connect.Codec
	b *pageBound
}

func (c boundCodec) Marshal(msg any) ([]byte, error) {
	out, err := c.Codec.Marshal(msg)
	if r, ok := c.b.pending.LoadAndDelete(msg); ok {
		r.(func())()
	}
	return out, err
}

// protoCodec is connect's binary protobuf codec (application/proto, gRPC), here so that it can be
// wrapped like the others.
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

// IsBinary forwards the wrapped codec's answer (connect base64s binary GET messages).
func (c boundCodec) IsBinary() bool {
	if b, ok := c.Codec.(interface{ IsBinary() bool }); ok {
		return b.IsBinary()
	}
	return false
}
