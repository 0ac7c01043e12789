//go:build !unix

package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/jq-dev/jq/queue"
)

// ExecPayload is the payload of the exec handler (unix only).
type ExecPayload struct {
	Argv  []string          `json:"argv"`
	Stdin string            `json:"stdin,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	Dir   string            `json:"dir,omitempty"`
}

// ExecOptions tune the exec handler (unix only).
type ExecOptions struct {
	Allow           []string
	EnvAllow        []string
	MaxOutputBytes  int
	StderrTailBytes int
	WaitDelay       time.Duration
	PATH            string
}

// ExecWith fails every job permanently: process groups are a unix feature.
func ExecWith(ExecOptions) queue.Handler {
	return queue.HandlerFunc(func(context.Context, *queue.Job) ([]byte, error) {
		return nil, queue.Permanent(errors.New("exec: not supported on this platform"))
	})
}
