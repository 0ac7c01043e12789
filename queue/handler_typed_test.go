package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

type greetArgs struct {
	Name  string `json:"name"`
	Times int    `json:"times"`
}

func ExampleHandlerOf() {
	mux := queue.NewMux()
	mux.Register("greet", queue.HandlerOf(func(_ context.Context, _ *queue.Job, a greetArgs) (map[string]string, error) {
		return map[string]string{"greeting": "hello " + a.Name}, nil
	}))
	out, err := mux.Handle(context.Background(), &queue.Job{Type: "greet", Payload: []byte(`{"name": "Ada"}`)})
	fmt.Println(string(out), err)
	// Output: {"greeting":"hello Ada"} <nil>
}

func TestHandlerOf(t *testing.T) {
	t.Parallel()
	h := queue.HandlerOf(func(_ context.Context, _ *queue.Job, a greetArgs) (greetArgs, error) {
		if a.Times < 0 {
			return a, errors.New("negative")
		}
		a.Times++
		return a, nil
	})
	run := func(payload string) ([]byte, error) {
		return h.Handle(t.Context(), &queue.Job{ID: "j1", Type: "greet", Payload: []byte(payload)})
	}

	out, err := run(`{"name": "Ada", "times": 1}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"name": "Ada", "times": 2}`, string(out))

	out, err = run("") // empty: the zero value
	require.NoError(t, err)
	require.JSONEq(t, `{"name": "", "times": 1}`, string(out))

	for name, payload := range map[string]string{
		"unknown field": `{"name": "Ada", "colour": "red"}`,
		"wrong type":    `{"name": 1}`,
		"trailing data": `{"name": "Ada"} {}`,
		"not json":      `name=Ada`,
	} {
		_, err := run(payload)
		require.Error(t, err, name)
		require.True(t, queue.IsPermanent(err), "%s: a payload that does not decode is permanent: %v", name, err)
		require.ErrorIs(t, err, queue.ErrBadPayload, name)
		require.Contains(t, err.Error(), "j1", name)
	}

	// The handler's own error is returned as it is: retryable unless it says otherwise.
	_, err = run(`{"times": -1}`)
	require.EqualError(t, err, "negative")
	require.False(t, queue.IsPermanent(err))
}

func TestHandlerOfResults(t *testing.T) {
	t.Parallel()
	job := &queue.Job{Payload: []byte(`{}`)}
	raw, err := queue.HandlerOf(func(context.Context, *queue.Job, struct{}) ([]byte, error) {
		return []byte("as is"), nil
	}).Handle(t.Context(), job)
	require.NoError(t, err)
	require.Equal(t, "as is", string(raw))

	raw, err = queue.HandlerOf(func(context.Context, *queue.Job, struct{}) (json.RawMessage, error) {
		return json.RawMessage(`[1]`), nil
	}).Handle(t.Context(), job)
	require.NoError(t, err)
	require.Equal(t, "[1]", string(raw))

	raw, err = queue.HandlerOf(func(context.Context, *queue.Job, struct{}) (any, error) {
		return nil, nil
	}).Handle(t.Context(), job)
	require.NoError(t, err)
	require.Empty(t, raw)

	_, err = queue.HandlerOf(func(context.Context, *queue.Job, struct{}) (any, error) {
		return func() {}, nil // not encodable
	}).Handle(t.Context(), job)
	require.True(t, queue.IsPermanent(err))
}
