package console

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// sessionCookie holds the sealed session. Its name carries no prefix: __Host- needs HTTPS, and the
// console is often served over plain HTTP on loopback.
const sessionCookie = "jq_console"

// maxCookieBytes bounds what is unsealed: a token is far shorter.
const maxCookieBytes = 4096

// session is what the sealed cookie holds.
type session struct {
	ID      string `json:"i"`           // random: names the session for sign-out (revocations)
	Token   string `json:"t,omitempty"` // "" when signed in by certificate, or authentication is off
	Expires int64  `json:"e"`           // unix seconds
}

// sealer seals and opens session cookies and derives their CSRF tokens, with keys made at start.
type sealer struct {
	aead    cipher.AEAD
	csrfKey []byte
}

func newSealer() (*sealer, error) {
	key := make([]byte, 32)
	csrfKey := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if _, err := rand.Read(csrfKey); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead, csrfKey: csrfKey}, nil
}

func (s *sealer) seal(v session) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(sessionCookie))), nil
}

var errBadSession = errors.New("session cookie is not valid (signed out, expired, or the server restarted)")

func (s *sealer) open(value string, now time.Time) (session, error) {
	var v session
	if len(value) > maxCookieBytes {
		return v, errBadSession
	}
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return v, errBadSession
	}
	ns := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:ns], raw[ns:], []byte(sessionCookie))
	if err != nil {
		return v, errBadSession
	}
	if err := json.Unmarshal(plain, &v); err != nil || now.Unix() >= v.Expires {
		return session{}, errBadSession
	}
	return v, nil
}

// csrf is the token every action of the session must carry: an HMAC of the sealed cookie, so it
// changes with each session and a page of another origin, which cannot read the console's pages,
// cannot know it.
func (s *sealer) csrf(cookieValue string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte(cookieValue))
	return hex.EncodeToString(m.Sum(nil))
}

func (s *sealer) csrfOK(cookieValue, got string) bool {
	want := s.csrf(cookieValue)
	return len(got) == len(want) && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (c *Console) setSession(w http.ResponseWriter, v session) (string, error) {
	if v.ID == "" {
		id := make([]byte, 16)
		if _, err := rand.Read(id); err != nil {
			return "", fmt.Errorf("session id: %w", err)
		}
		v.ID = hex.EncodeToString(id)
	}
	value, err := c.sealer.Load().seal(v)
	if err != nil {
		return "", fmt.Errorf("seal session: %w", err)
	}
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // Secure follows the listener (set over TLS); a plain-HTTP console on loopback must still get its cookie
		Name: sessionCookie, Value: value, Path: "/", HttpOnly: true, Secure: c.secure,
		SameSite: http.SameSiteStrictMode, Expires: time.Unix(v.Expires, 0),
	})
	return value, nil
}

// endSession revokes the request's session, so that a copy of its cookie opens nothing either,
// and clears the cookie.
func (c *Console) endSession(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		if sess, err := c.sealer.Load().open(ck.Value, c.now()); err == nil && !c.revoked.revoke(sess.ID, sess.Expires, c.now()) {
			s, err := newSealer()
			if err != nil {
				c.log.Error("console session keys not renewed: a signed-out session stays valid until it expires", zap.Error(err))
			} else {
				c.sealer.Store(s)
				c.log.Warn("console session keys renewed: too many signed-out sessions to keep; every user signs in again")
			}
		}
	}
	c.clearSession(w)
}

func (c *Console) clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, Secure: c.secure, //nolint:gosec // Secure follows the listener (set over TLS); a plain-HTTP console on loopback must still get its cookie
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// sameOrigin refuses a POST from another site, by the standard library's cross-origin
// protection: the browser's Sec-Fetch-Site, or without it an Origin whose host is not the
// request's Host. A request with neither (a non-browser client) still needs the CSRF token. The
// Host itself, and any Origin, are checked against the console's names before this, by the
// listener (internal/hostcheck): a page that reached the console under its own name by DNS
// rebinding is same-origin to the browser.
func (c *Console) sameOrigin(r *http.Request) bool {
	return c.cop.Check(r) == nil
}
