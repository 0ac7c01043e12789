package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/auth"
)

//go:embed web
var webFS embed.FS

// Options configure the console.
type Options struct {
	// API is the jq API's handler (api/server.New); every page and action calls it in-process with
	// the user's credential. Required.
	API http.Handler
	// Auth is the API's authenticator, asked only who a user is (to hide the buttons their roles
	// may not use) and to check a token at sign-in; nil: authentication is off, and the console is
	// open like the API.
	Auth *auth.Authenticator
	Log  *zap.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// TracingURL links a job's trace id ("{trace_id}" is replaced); "": no link (ui.tracing_url).
	TracingURL string
	// Secure marks the session cookie Secure: set it when the console is served over TLS.
	Secure bool
	// SessionTTL is how long a sign-in lasts (0: 12 hours).
	SessionTTL time.Duration
}

// Console serves the web console.
type Console struct {
	api        clients
	auth       *auth.Authenticator
	log        *zap.Logger
	now        func() time.Time
	tracingURL string
	secure     bool
	ttl        time.Duration
	sealer     atomic.Pointer[sealer] // replaced when revocations overflow: every session ends
	signIns    *signInLimiter
	cop        *http.CrossOriginProtection
	revoked    revocations
	pages      *pages
	mux        *http.ServeMux
}

// callTimeout bounds each API call a page makes.
const callTimeout = 10 * time.Second

// New builds the console.
func New(opts Options) (*Console, error) {
	if opts.API == nil {
		return nil, errors.New("console: the API handler is required")
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	s, err := newSealer()
	if err != nil {
		return nil, fmt.Errorf("console: session keys: %w", err)
	}
	p, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	c := &Console{
		api: newClients(opts.API), auth: opts.Auth, log: opts.Log, now: opts.Now, tracingURL: opts.TracingURL,
		secure: opts.Secure, ttl: opts.SessionTTL, signIns: newSignInLimiter(), cop: http.NewCrossOriginProtection(), pages: p, mux: http.NewServeMux(),
	}
	c.sealer.Store(s)
	static, err := fs.Sub(webFS, "web/static")
	if err != nil {
		return nil, err
	}
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", staticHandler(static)))
	c.mux.HandleFunc("GET /login", c.loginPage)
	c.mux.HandleFunc("POST /login", c.login)
	c.mux.HandleFunc("POST /logout", c.action(c.logout))
	c.mux.HandleFunc("GET /{$}", c.page(c.overview))
	c.mux.HandleFunc("GET /queues/{name}", c.page(c.queuePage))
	c.mux.HandleFunc("GET /jobs", c.page(c.jobsPage))
	c.mux.HandleFunc("GET /jobs/{id}", c.page(c.jobPage))
	c.mux.HandleFunc("GET /dead", c.page(c.deadPage))
	c.mux.HandleFunc("GET /scheduled", c.page(c.scheduledPage))
	c.mux.HandleFunc("GET /bulk-count", c.page(c.bulkCount))
	c.mux.HandleFunc("GET /workers", c.page(c.workersPage))
	c.mux.HandleFunc("GET /schedules", c.page(c.schedulesPage))
	c.mux.HandleFunc("GET /schedules/{name}", c.page(c.schedulePage))
	c.mux.HandleFunc("GET /constraints", c.page(c.constraintsPage))
	c.mux.HandleFunc("GET /constraints/{name}", c.page(c.constraintPage))
	for name, act := range c.actions() {
		c.mux.HandleFunc("POST /actions/"+name, c.action(act))
	}
	return c, nil
}

// ServeHTTP serves the console, with headers that keep its pages out of other sites' frames and
// out of caches, and admit only its own script and style.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

func staticHandler(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// user is the signed-in caller of one request.
type user struct {
	cred      credential
	principal *auth.Principal // nil: authentication is off
	csrf      string
}

// can reports whether the user's roles allow procedure; the API decides again on the call.
func (u *user) can(procedure string) bool {
	return u.principal == nil || auth.Allowed(u.principal, procedure)
}

func (u *user) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(withCredential(r.Context(), u.cred), callTimeout)
}

// signedIn reads the session. With authentication off a visitor without one gets an anonymous
// session at once: it carries the CSRF token the actions need.
func (c *Console) signedIn(w http.ResponseWriter, r *http.Request) (*user, bool) {
	now := c.now()
	value := ""
	var sess session
	ck, err := r.Cookie(sessionCookie)
	if err == nil {
		if sess, err = c.sealer.Load().open(ck.Value, now); err == nil && !c.revoked.has(sess.ID) {
			value = ck.Value
		}
	}
	if value == "" {
		if c.auth != nil {
			return nil, false
		}
		sess = session{Expires: now.Add(c.ttl).Unix()}
		if value, err = c.setSession(w, sess); err != nil {
			c.log.Error("console session not created", zap.Error(err))
			return nil, false
		}
	}
	u := &user{cred: credential{token: sess.Token, tls: r.TLS, remoteAddr: r.RemoteAddr}, csrf: c.sealer.Load().csrf(value)}
	if c.auth != nil {
		h := http.Header{}
		if sess.Token != "" {
			h.Set("Authorization", "Bearer "+sess.Token)
		}
		p, d := c.auth.Authenticate(h, r.TLS)
		if d != nil {
			return nil, false
		}
		u.principal = p
	}
	return u, true
}

// isLive reports a live refresh: the page's script asks for its live part only.
func isLive(r *http.Request) bool { return r.Header.Get("X-JQ-Live") == "1" }

// page wraps a page handler: it needs a session (else the sign-in page; a live refresh gets 401).
func (c *Console) page(fn func(w http.ResponseWriter, r *http.Request, u *user)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		u, ok := c.signedIn(w, r)
		if !ok {
			if isLive(r) {
				http.Error(w, "signed out", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		fn(w, r, u)
	}
}

// action wraps an action: a POST from the console's own origin, with the session's CSRF token and
// the confirmation the page's dialog adds. It changes nothing otherwise.
func (c *Console) action(fn func(w http.ResponseWriter, r *http.Request, u *user)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if !c.sameOrigin(r) {
			http.Error(w, "refused: the request comes from another site", http.StatusForbidden)
			return
		}
		u, ok := c.signedIn(w, r)
		if !ok {
			http.Error(w, "refused: sign in first", http.StatusUnauthorized)
			return
		}
		ck, _ := r.Cookie(sessionCookie)
		if ck == nil || !c.sealer.Load().csrfOK(ck.Value, r.PostFormValue("csrf")) {
			http.Error(w, "refused: missing or wrong CSRF token; reload the page and try again", http.StatusForbidden)
			return
		}
		fn(w, r, u)
	}
}

// httpStatus is the page status for an API error.
func httpStatus(err error) int {
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	default:
		return http.StatusBadGateway
	}
}

// errorLine is the one line an API error shows as: its code and message.
func errorLine(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code().String() + ": " + ce.Message()
	}
	return err.Error()
}
