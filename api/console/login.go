package console

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/jq-dev/jq/api/auth"
)

// consoleProcedure names the console's sign-in in the API's refusal counts and logs.
const consoleProcedure = "console/login"

// loginData is the sign-in page.
type loginData struct {
	Err string
	// Cert is set when the browser presented a client certificate: it may sign in with it.
	Cert bool
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if c.auth == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c.render(w, r, nil, http.StatusOK, "login", view{Title: "Sign in", Data: &loginData{Cert: hasCert(r)}})
}

// login checks the token (or the client certificate) with the API's authenticator and starts a
// session. A wrong token is refused like a wrong token on the API: counted, logged (rate-limited)
// and answered UNAUTHENTICATED.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if !c.sameOrigin(r) {
		http.Error(w, "refused: the request comes from another site", http.StatusForbidden)
		return
	}
	if c.auth == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	src := host(r.RemoteAddr)
	giveBack, wait := c.signIns.attempt(src, c.now())
	if giveBack == nil {
		d := &auth.Denial{Code: connect.CodeResourceExhausted, Reason: auth.ReasonRateLimited, Msg: signInRefusal(src, wait)}
		c.auth.Refused("addr:"+src, consoleProcedure, d)
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		c.render(w, r, nil, http.StatusTooManyRequests, "login", view{Title: "Sign in",
			Data: &loginData{Err: "resource exhausted: " + d.Msg, Cert: hasCert(r)}})
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	h := http.Header{}
	if tok != "" {
		h.Set("Authorization", "Bearer "+tok)
	}
	_, d := c.auth.Authenticate(h, r.TLS)
	if d != nil {
		c.auth.Refused("addr:"+src, consoleProcedure, d)
		c.render(w, r, nil, http.StatusUnauthorized, "login", view{Title: "Sign in",
			Data: &loginData{Err: "unauthenticated: " + d.Msg, Cert: hasCert(r)}})
		return
	}
	giveBack()
	if _, err := c.setSession(w, session{Token: tok, Expires: c.now().Add(c.ttl).Unix()}); err != nil {
		http.Error(w, "internal error: session not created", http.StatusInternalServerError)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ *user) {
	c.endSession(w, r)
	to := "/login"
	if c.auth == nil {
		to = "/"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func hasCert(r *http.Request) bool { return r.TLS != nil && len(r.TLS.PeerCertificates) > 0 }

func host(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
