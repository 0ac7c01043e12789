package client

import (
	"github.com/jq-dev/jq/api/rpcclient"
)

// Options select the server, the transport security and the credentials: Addr (host:port, a URL,
// or a comma-separated list of replicas), Token, CAFile, CertFile and KeyFile (TLS and mTLS).
// They are the transport's options (rpcclient.Options), documented there.
type Options = rpcclient.Options

// Client calls a jq server. It is safe for concurrent use; make one and share it: concurrent
// Submit calls of one client share their round trips (see [Client.Submit]).
type Client struct {
	api    *rpcclient.Client
	submit *coalescer // nil: every Submit is its own call (custom interceptors may read its context)
}

// New builds a client. It does not dial until the first call, so a server that is down is an
// error of that call ([ErrUnavailable]), not of New; New fails on options it cannot use (an empty
// address, unreadable TLS files, a token with white space).
func New(opts Options) (*Client, error) {
	c, err := rpcclient.New(opts)
	if err != nil {
		return nil, err
	}
	cl := &Client{api: c}
	if len(opts.Interceptors) == 0 {
		cl.submit = newCoalescer(c, opts)
	}
	return cl, nil
}

// Close releases the client's idle connections. Calls made after Close dial again.
func (c *Client) Close() { c.api.Close() }

// API is the transport underneath: the generated service clients for the calls this package does
// not wrap, and the connection a worker runs on (workerconn.New(c.API())).
func (c *Client) API() *rpcclient.Client { return c.api }
