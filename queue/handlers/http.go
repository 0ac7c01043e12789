package handlers

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/jq-dev/jq/queue"
)

// Content types of the http handler's request body.
const (
	ContentTypeJSON    = "application/json"
	ContentTypeMsgpack = "application/msgpack"
)

// Headers the http handler sets on every request.
const (
	HeaderSignature = "X-Jq-Signature" // t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">; with a signing secret only
	HeaderJobID     = "X-Jq-Job-Id"
	HeaderAttempt   = "X-Jq-Attempt"
)

// Errors of the http handler's gate; all are permanent failures.
var (
	// ErrHTTPDisabled: the worker has no worker.http.allow; see [HTTPWith].
	ErrHTTPDisabled = errors.New("http: worker.http.allow is empty")
	// ErrHTTPNotAllowed: the job's URL, or a redirect's, does not start with
	// an entry of worker.http.allow.
	ErrHTTPNotAllowed = errors.New("not in worker.http.allow")
)

// HTTPPayload is the payload of the http handler.
type HTTPPayload struct {
	// URL receives the POST; required, an absolute http(s) URL that starts
	// with an entry of HTTPOptions.Allow (see [URLPrefix]). Without user
	// information; a fragment is dropped.
	URL string `json:"url"`
	// Body is any JSON value; it becomes the envelope's "payload" (absent:
	// null).
	Body json.RawMessage `json:"body,omitempty"`
	// Headers are added to the request. They may not set Host,
	// Content-Type, Content-Length, Transfer-Encoding, Connection, TE,
	// Upgrade, Trailer or any X-Jq-* header.
	Headers map[string]string `json:"headers,omitempty"`
	// ContentType encodes the envelope: application/json (the default) or
	// application/msgpack (MessagePack, maps with string keys).
	ContentType string `json:"content_type,omitempty"`
}

// HTTPEnvelope is the request body the http handler POSTs: the attempt
// being executed and the payload's body.
type HTTPEnvelope struct {
	ID      string `json:"id" msgpack:"id"`
	Attempt int    `json:"attempt" msgpack:"attempt"`
	Type    string `json:"type" msgpack:"type"`
	Queue   string `json:"queue" msgpack:"queue"`
	// Payload is HTTPPayload.Body: raw JSON in JSON, the same value in
	// MessagePack.
	Payload any `json:"payload" msgpack:"payload"`
}

// HTTPOptions configure the http handler.
type HTTPOptions struct {
	// Allow lists the URL prefixes requests may go to (worker.http.allow);
	// see [URLPrefix]. Empty: every job fails permanently with
	// ErrHTTPDisabled.
	Allow []string
	// SigningSecret, when set, signs every request (HeaderSignature); see
	// docs/handlers.md for the receiver's check. Never logged.
	SigningSecret string
	// MaxResponseBytes bounds a 2xx response's body, which becomes the
	// result; a longer one fails the job permanently with reason
	// output_too_large. Default 256 KiB (the server's result limit).
	MaxResponseBytes int
	// Transport sends the requests; nil: the handler's own, with dial, TLS
	// handshake and idle timeouts (the job's context bounds the whole call).
	Transport http.RoundTripper
	// Now is the clock that dates signatures and HTTP-date Retry-After
	// values; nil: time.Now.
	Now func() time.Time
}

// HTTPWith returns the http handler: it POSTs the job's [HTTPEnvelope] to the
// payload's URL when that starts with an entry of opts.Allow, in the job's
// context (its timeout), and follows redirects only to allowed URLs.
//
//   - 2xx: success; the response body is the result.
//   - 408, 429, 5xx, a transport error or the context's end: a retryable
//     failure. On 429 and 503 a Retry-After (seconds or an HTTP date) becomes
//     [queue.RetryAfter]: the retry waits at least that long.
//   - any other status (4xx, an unfollowed 3xx): a permanent failure naming
//     the status and the first line of the body.
//   - a URL or redirect outside the allow-list, a bad payload, a 2xx body over
//     MaxResponseBytes: a permanent failure, the URL refused before any
//     request is made.
func HTTPWith(opts HTTPOptions) queue.Handler {
	allow := make([]URLPrefix, 0, len(opts.Allow))
	for _, a := range opts.Allow {
		p, err := ParseURLPrefix(a)
		if err != nil {
			continue // config validation reports it; an unparsable entry allows nothing
		}
		allow = append(allow, p)
	}
	if len(allow) == 0 {
		return queue.HandlerFunc(func(context.Context, *queue.Job) ([]byte, error) {
			return nil, queue.Permanent(ErrHTTPDisabled)
		})
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = defaultMaxOutput
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Transport == nil {
		opts.Transport = newHTTPTransport()
	}
	h := &httpHandler{opts: opts, allow: allow}
	h.client = &http.Client{
		Transport: opts.Transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			if !h.allowed(req.URL.String()) {
				return fmt.Errorf("redirect to %s: %w", redact(req.URL.String()), errRedirectRefused)
			}
			return nil
		},
	}
	return h
}

const (
	maxRedirects = 10
	// errorBodyBytes is how much of a failed response's body is read for
	// its first line; errorLineBytes how much of that line the error keeps.
	errorBodyBytes = 4 << 10
	errorLineBytes = 200
)

var errRedirectRefused = errors.New("not in worker.http.allow")

// newHTTPTransport is the handler's transport: the default one's proxy and
// HTTP/2 settings with bounded dialling, handshakes and idle connections.
func newHTTPTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

type httpHandler struct {
	opts   HTTPOptions
	allow  []URLPrefix
	client *http.Client
}

// headerNameRE is an RFC 9110 field name (token).
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// reservedHeaders are set by the handler or by the transport.
var reservedHeaders = map[string]bool{
	"Host": true, "Content-Type": true, "Content-Length": true, "Transfer-Encoding": true,
	"Connection": true, "Te": true, "Upgrade": true, "Trailer": true,
}

func (h *httpHandler) Handle(ctx context.Context, job *queue.Job) ([]byte, error) {
	var p HTTPPayload
	if err := decodePayload(TypeHTTP, job.Payload, &p); err != nil {
		return nil, err
	}
	target, err := h.checkPayload(&p)
	if err != nil {
		return nil, err
	}
	env := envelope(ctx, job)
	body, err := encodeEnvelope(env, p.Body, p.ContentType)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, queue.Permanent(fmt.Errorf("http: invalid payload: %w", err))
	}
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", p.ContentType)
	req.Header.Set("User-Agent", "jq-worker")
	req.Header.Set(HeaderJobID, env.ID)
	req.Header.Set(HeaderAttempt, strconv.Itoa(env.Attempt))
	if h.opts.SigningSecret != "" {
		req.Header.Set(HeaderSignature, Sign(h.opts.SigningSecret, h.opts.Now(), body))
	}

	where := "POST " + redact(target)
	resp, err := h.client.Do(req)
	if err != nil {
		if errors.Is(err, errRedirectRefused) {
			return nil, queue.Permanent(fmt.Errorf("http: %s: %w", where, unwrapURLError(err)))
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("http: %s: %w", where, context.Cause(ctx))
		}
		return nil, fmt.Errorf("http: %s: %w", where, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		out, err := io.ReadAll(io.LimitReader(resp.Body, int64(h.opts.MaxResponseBytes)+1))
		if err != nil {
			return nil, fmt.Errorf("http: %s: reading the response: %w", where, err)
		}
		if len(out) > h.opts.MaxResponseBytes {
			return nil, queue.Permanent(fmt.Errorf("http: %s: %w: the response body exceeded %d bytes",
				where, queue.ErrOutputTooLarge, h.opts.MaxResponseBytes))
		}
		return out, nil
	}
	herr := fmt.Errorf("http: %s: %s%s", where, resp.Status, firstLine(resp.Body))
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), h.opts.Now()); ok {
			return nil, queue.RetryAfter(herr, d)
		}
		return nil, herr
	case code == http.StatusRequestTimeout || code >= 500:
		return nil, herr
	default:
		return nil, queue.Permanent(herr)
	}
}

// checkPayload validates p, filling its defaults, and returns the URL to
// POST to (normalized: dot segments removed, no fragment).
func (h *httpHandler) checkPayload(p *HTTPPayload) (string, error) {
	if p.URL == "" {
		return "", queue.Permanent(errors.New(`http: invalid payload: "url" is required`))
	}
	switch p.ContentType {
	case "":
		p.ContentType = ContentTypeJSON
	case ContentTypeJSON, ContentTypeMsgpack:
	default:
		return "", queue.Permanent(fmt.Errorf("http: invalid payload: content_type must be %q or %q, got %q",
			ContentTypeJSON, ContentTypeMsgpack, p.ContentType))
	}
	for k, v := range p.Headers {
		ck := http.CanonicalHeaderKey(k)
		switch {
		case !headerNameRE.MatchString(k):
			return "", queue.Permanent(fmt.Errorf("http: invalid payload: bad header name %q", k))
		case strings.ContainsAny(v, "\r\n\x00"):
			return "", queue.Permanent(fmt.Errorf("http: invalid payload: header %s: the value contains CR, LF or NUL", ck))
		case reservedHeaders[ck] || strings.HasPrefix(ck, "X-Jq-"):
			return "", queue.Permanent(fmt.Errorf("http: invalid payload: header %s is set by the handler", ck))
		}
	}
	u, err := normalizeURL(p.URL)
	if err != nil {
		return "", queue.Permanent(fmt.Errorf("http: invalid payload: %w", err))
	}
	target := u.String()
	if !h.allowed(target) {
		return "", queue.Permanent(fmt.Errorf("http: %s is %w", redact(target), ErrHTTPNotAllowed))
	}
	return target, nil
}

// allowed reports whether raw (an absolute URL) starts with an allow-list
// entry.
func (h *httpHandler) allowed(raw string) bool {
	u, err := normalizeURL(raw)
	if err != nil {
		return false
	}
	for _, p := range h.allow {
		if p.Match(u) {
			return true
		}
	}
	return false
}

// envelope is the attempt's HTTPEnvelope without its payload: the job info
// the executor put in ctx, the job's own fields without it.
func envelope(ctx context.Context, job *queue.Job) HTTPEnvelope {
	env := HTTPEnvelope{ID: job.ID, Attempt: job.Attempt, Type: job.Type, Queue: job.Queue}
	if info, ok := queue.JobInfoFromContext(ctx); ok {
		env.ID, env.Attempt, env.Type, env.Queue = info.ID, info.Attempt, info.Type, info.Queue
	}
	return env
}

// encodeEnvelope encodes env with body as its payload.
func encodeEnvelope(env HTTPEnvelope, body json.RawMessage, contentType string) ([]byte, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		body = json.RawMessage("null")
	}
	if contentType == ContentTypeJSON {
		env.Payload = body
		out, err := json.Marshal(env)
		if err != nil {
			return nil, queue.Permanent(fmt.Errorf("http: invalid payload: body: %w", err))
		}
		return out, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, queue.Permanent(fmt.Errorf("http: invalid payload: body: %w", err))
	}
	env.Payload = msgpackValue(v)
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetSortMapKeys(true) // the same job encodes to the same bytes: a stable signature
	enc.SetCustomStructTag("msgpack")
	if err := enc.Encode(env); err != nil {
		return nil, queue.Permanent(fmt.Errorf("http: encode MessagePack: %w", err))
	}
	return buf.Bytes(), nil
}

// msgpackValue turns decoded JSON into MessagePack-friendly values: a number
// becomes an integer when it is one that fits in 64 bits, else a float64.
func msgpackValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if u, err := strconv.ParseUint(x.String(), 10, 64); err == nil {
			return u
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = msgpackValue(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = msgpackValue(e)
		}
		return x
	}
	return v
}

// Sign returns the X-Jq-Signature value of body signed with secret at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<unix seconds>.<body>")>".
// A receiver recomputes v1 from the t it received and the raw body, compares
// in constant time and refuses a t too far from its clock (a replay).
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// parseRetryAfter reads a Retry-After value, delay-seconds or an HTTP date,
// as a delay from now; a date in the past is 0.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(maxRetryAfterSecs))) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(min(at.Sub(now), maxRetryAfterSecs*time.Second), 0), true
}

// maxRetryAfterSecs keeps a huge Retry-After from overflowing a Duration; the
// server cuts it to 24 hours anyway.
const maxRetryAfterSecs = 7 * 24 * 3600

// firstLine is ": " and the first line of a failed response's body, at most
// errorLineBytes of valid UTF-8, or "" for an empty body.
func firstLine(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, errorBodyBytes))
	line, _, _ := bytes.Cut(b, []byte("\n"))
	line = bytes.TrimSpace(line)
	if len(line) > errorLineBytes {
		line = line[:errorLineBytes]
		for len(line) > 0 && !utf8.Valid(line) {
			line = line[:len(line)-1]
		}
		line = append(line, "…"...)
	}
	if len(line) == 0 {
		return ""
	}
	return ": " + strings.ToValidUTF8(string(line), "\uFFFD")
}

// unwrapURLError drops *url.Error's "Post \"<url>\": " prefix: the message
// names the request already, without its query.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
