// Package console is jq's web console: server-rendered pages over the jq API, embedded in the
// binary (web/), served by the server component on ui.port (docs/console.md).
//
// The console holds no privilege of its own. Every page and action is one or more calls of the
// public API (jq.v1), made in-process through the API's own http.Handler with the signed-in
// user's credential (the token they entered, or their TLS client certificate), so the API's
// authentication, role table, ownership checks, rate limits and metrics apply exactly as to the
// CLI. The console asks the authenticator only who the user is, to hide the buttons their roles
// may not use; the API still decides.
//
// Sessions are sealed cookies (AES-GCM under a key made at start, so a restart or another
// replica signs the user out) holding the token and an expiry; they are HttpOnly and
// SameSite=Strict, and Secure when the console is served over TLS. Every action is a POST that
// must carry the session's CSRF token (an HMAC of the session cookie) and, when the browser
// sends one, an Origin of the console itself. Pages are html/template, so job types, labels,
// payloads and errors render as text; a Content-Security-Policy admits only the console's own
// script and style. Nothing secret and no payload ever goes into a URL.
package console
