package server

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
)

// DefaultMaxPayloadPages is how many pages carrying payloads (ListJobs or PeekQueue with
// include_payloads) one server builds at once when Limits.MaxPayloadPages is 0.
const DefaultMaxPayloadPages = 4

// payloadPageWait is how long a page with payloads waits for its turn before RESOURCE_EXHAUSTED.
const payloadPageWait = 10 * time.Second

// payloadCarrier is a request that may ask for payloads in its page.
type payloadCarrier interface{ GetIncludePayloads() bool }

// payloadPageInterceptor bounds the pages with payloads built at once. Each may hold
// server.max_page_bytes of payloads and their copies: 16 at once took a server from 224 to 665
// MB (issue 22, attack 7); a 59-byte request asks for a 4 MiB answer. The others wait their
// turn, within their deadline and payloadPageWait; pages without payloads are not held back.
func payloadPageInterceptor(n int) connect.UnaryInterceptorFunc {
	if n <= 0 {
		n = DefaultMaxPayloadPages
	}
	sem := make(chan struct{}, n)
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
			case sem <- struct{}{}:
			case <-t.C:
				return nil, connect.NewError(connect.CodeResourceExhausted,
					fmt.Errorf("%d pages with payloads are being built on this server, the most at once; retry later or list without include_payloads", n))
			case <-ctx.Done():
				return nil, fmt.Errorf("waiting for a turn to build a page with payloads: %w", ctx.Err())
			}
			defer func() { <-sem }()
			return next(ctx, req)
		}
	}
}
