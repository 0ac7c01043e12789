package apiserver

import (
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/jq-dev/jq/api/apierr"
	"github.com/jq-dev/jq/queue"
)

// errCompressedWithoutEncoding is what a request gets whose envelope says "compressed" while the
// request named no message encoding (docs/security.md, "Bounded and fenced").
var errCompressedWithoutEncoding = errors.New(
	"malformed request: a message has the compressed flag set, but the request names no message encoding " +
		"(grpc-encoding or connect-content-encoding); send the flag 0 or name the encoding")

// flagCompressed is bit 0 of an envelope's flags byte: gRPC's Compressed-Flag, Connect's and
// gRPC-Web's compressed bit.
const flagCompressed = 0x01

// checkEnvelopes refuses, as INVALID_ARGUMENT, an enveloped request message (gRPC, gRPC-Web,
// Connect streaming) whose compressed flag is set while the request negotiated no compression.
// gRPC's PROTOCOL-HTTP2 says "If the Message-Encoding header is omitted then the Compressed-Flag
// must be 0": the sender broke the protocol, and connect-go answers that with INTERNAL (as
// grpc-go does), which reads as a server fault — a 500 on Connect, an alert on error rates. jq
// answers every other malformed request INVALID_ARGUMENT, so this one too. connect-go decides
// it while decoding, before any interceptor, so the check sits in front of it and reads the
// envelope prefixes as the body passes: a *connect.Error from the body is passed on as it is.
func checkEnvelopes(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody && enveloped(r.Header) && !compressed(r.Header) {
			r.Body = &envelopeCheck{ReadCloser: r.Body}
		}
		next.ServeHTTP(w, r)
	})
}

// enveloped reports whether the request's messages are length-prefixed envelopes.
func enveloped(h http.Header) bool {
	ct := strings.ToLower(h.Get("Content-Type"))
	return strings.HasPrefix(ct, "application/grpc") || strings.HasPrefix(ct, "application/connect+")
}

// compressed reports whether the request named a message encoding other than identity.
func compressed(h http.Header) bool {
	for _, k := range []string{"Grpc-Encoding", "Connect-Content-Encoding"} {
		if v := strings.TrimSpace(h.Get(k)); v != "" && !strings.EqualFold(v, "identity") {
			return true
		}
	}
	return false
}

// envelopeCheck passes a body of envelopes through, reading each 5-byte prefix (flags, then a
// big-endian length) before handing it on, and fails instead of passing a compressed one.
type envelopeCheck struct {
	io.ReadCloser
	prefix [5]byte
	queued []byte // the part of the current prefix not yet handed on
	left   uint32 // message bytes of the current envelope not yet handed on
	err    error
}

func (e *envelopeCheck) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if len(e.queued) == 0 && e.left == 0 {
		// At an envelope boundary: read the whole prefix (connect reads it whole too).
		n, err := io.ReadFull(e.ReadCloser, e.prefix[:])
		switch {
		case n == 0:
			return 0, err // io.EOF at a boundary: the stream ended cleanly
		case err != nil:
			e.queued = e.prefix[:n] // a truncated prefix: connect reports it
		case e.prefix[0]&flagCompressed != 0:
			e.err = apierr.New(queue.ErrInvalidArgument, errCompressedWithoutEncoding.Error())
			return 0, e.err
		default:
			e.queued = e.prefix[:]
			e.left = binary.BigEndian.Uint32(e.prefix[1:])
		}
	}
	if len(e.queued) > 0 {
		n := copy(p, e.queued)
		e.queued = e.queued[n:]
		return n, nil
	}
	if uint64(len(p)) > uint64(e.left) {
		p = p[:e.left]
	}
	n, err := e.ReadCloser.Read(p)
	e.left -= uint32(n) //nolint:gosec // n ≤ len(p) ≤ e.left
	return n, err
}
