package apiserver

import (
	"io"
	"net/http"
	"strings"
)

// explainRefusals gives the bodiless 415 and 405 answers of connect-go a one-line text body, so
// `curl -d '{}' host/jq.v1.JobService/GetJob` without a Content-Type says what to send instead
// of answering with nothing.
func explainRefusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&explainWriter{ResponseWriter: w, method: r.Method}, r)
	})
}

type explainWriter struct {
	http.ResponseWriter
	method  string
	written bool // a header went out
}

func (w *explainWriter) WriteHeader(code int) {
	if w.written {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.written = true
	var msg string
	switch code {
	case http.StatusUnsupportedMediaType:
		msg = "unsupported or missing Content-Type: send application/json or application/proto (Connect), application/msgpack, or a gRPC / gRPC-Web content type"
		if accept := w.Header().Get("Accept-Post"); accept != "" {
			msg += " (accepted: " + strings.ReplaceAll(accept, "\n", " ") + ")"
		}
	case http.StatusMethodNotAllowed:
		msg = "method " + w.method + " not allowed: call RPCs with POST"
		if allow := w.Header().Get("Allow"); allow != "" {
			msg = "method " + w.method + " not allowed: use " + allow
		}
	default:
		w.ResponseWriter.WriteHeader(code)
		return
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.ResponseWriter.WriteHeader(code)
		_, _ = io.WriteString(w.ResponseWriter, msg+"\n")
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *explainWriter) Write(b []byte) (int, error) {
	w.written = true
	return w.ResponseWriter.Write(b)
}

// Flush and Unwrap keep streaming responses and http.ResponseController working through the wrapper.
func (w *explainWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *explainWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
