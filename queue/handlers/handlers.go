// Package handlers holds jq's built-in job handlers, usable from the plain
// binary and from applications that embed a worker: noop and sleep (the
// workhorses of tests and benchmarks), exec (run a program, SPEC §6; off
// unless enabled with an allow-list of programs), file (checksum a file under
// allowed roots), http (POST the job to an allowed URL) and synthetic (seed
// 003's jobs: work for a while, return output of a given size). docs/handlers.md
// describes each one's payload, result and failures.
//
// Payloads are JSON objects decoded strictly: an unknown field, a wrong type
// or trailing data is a permanent failure naming the problem, because
// retrying a malformed job cannot help. An empty payload means "all
// defaults".
package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/jq-dev/jq/queue"
)

// Job types of the built-in handlers.
const (
	TypeNoop  = "noop"
	TypeSleep = "sleep"
	TypeExec  = "exec"
	TypeFile  = "file"
	TypeHTTP  = "http"
)

// Options configure the built-in handlers; the zero value registers them all
// with exec, file and http switched off (their jobs are dead-lettered at once
// with a message saying why).
type Options struct {
	// Exec: nil leaves exec disabled (ExecDisabled); otherwise ExecWith(*Exec).
	Exec *ExecOptions
	// File configures the file handler; without Roots it fails every job
	// with ErrFileDisabled.
	File FileOptions
	// HTTP configures the http handler; without Allow it fails every job
	// with ErrHTTPDisabled.
	HTTP HTTPOptions
	// Synthetic configures the synthetic handler (seed 003's jobs).
	Synthetic SyntheticOptions
}

// Register adds noop, sleep, synthetic, exec, file and http to mux.
func Register(mux *queue.Mux, opts Options) {
	mux.Register(TypeNoop, Noop())
	mux.Register(TypeSleep, Sleep())
	mux.Register(TypeSynthetic, Synthetic(opts.Synthetic))
	if opts.Exec != nil {
		mux.Register(TypeExec, ExecWith(*opts.Exec))
	} else {
		mux.Register(TypeExec, ExecDisabled())
	}
	mux.Register(TypeFile, FileWith(opts.File))
	mux.Register(TypeHTTP, HTTPWith(opts.HTTP))
}

// Noop succeeds at once with an empty result, whatever the payload.
func Noop() queue.Handler {
	return queue.HandlerFunc(func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
}

// decodePayload decodes a JSON object, or a MessagePack map (msgpack.go), strictly into v; an
// empty or "null" payload leaves v as it is. Every error is permanent.
func decodePayload(typ string, payload []byte, v any) error {
	if isMsgPackMap(payload) {
		var err error
		if payload, err = msgPackAsJSON(typ, payload); err != nil {
			return err
		}
	}
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return queue.Permanent(fmt.Errorf("%s: invalid payload: %w", typ, err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return queue.Permanent(fmt.Errorf("%s: invalid payload: trailing data after the JSON object", typ))
	}
	return nil
}
