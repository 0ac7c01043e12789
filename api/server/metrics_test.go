package apiserver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

// The metrics interceptor labels a call with the code the client gets, wherever it sits in the chain.
func TestWireCode(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		nil: "ok",
		fmt.Errorf("get: %w", queue.ErrJobNotFound):                      "not_found",
		connect.NewError(connect.CodeResourceExhausted, errors.New("x")): "resource_exhausted",
		context.Canceled:               "canceled",
		errors.New("connection reset"): "unavailable", // toConnect hides internals
	} {
		require.Equal(t, want, wireCode("/p", err), "%v", err)
	}
}
