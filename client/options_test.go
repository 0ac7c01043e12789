package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/client"
	"github.com/jq-dev/jq/queue"
)

func TestJobSpec(t *testing.T) {
	t.Parallel()
	job := client.Job{Queue: "q", Type: "t", Payload: map[string]int{"n": 1}, Options: []client.Option{client.Priority(9)}}
	spec, err := job.JobSpec(client.Priority(1), client.MaxRetries(0), client.Timeout(time.Minute), client.TTL(time.Hour),
		client.IdempotencyKey("k"), client.KeepResult(), client.Delay(time.Hour))
	require.NoError(t, err)
	require.Equal(t, "q", spec.GetQueue())
	require.JSONEq(t, `{"n": 1}`, string(spec.GetPayload()))
	require.EqualValues(t, 9, spec.GetPriority(), "the job's own options come last")
	require.NotNil(t, spec.MaxRetries)
	require.Zero(t, spec.GetMaxRetries())
	require.Equal(t, time.Minute, spec.GetTimeout().AsDuration())
	require.Equal(t, time.Hour, spec.GetTtl().AsDuration())
	require.Equal(t, "k", spec.GetIdempotencyKey())
	require.True(t, spec.GetKeepResult())
	require.WithinDuration(t, time.Now().Add(time.Hour), spec.GetRunAt().AsTime(), time.Minute)

	// Unset options stay unset: the server's and the queue's defaults apply.
	spec, err = client.Job{Queue: "q", Type: "t"}.JobSpec()
	require.NoError(t, err)
	require.Nil(t, spec.MaxRetries)
	require.Nil(t, spec.GetTtl())
	require.Nil(t, spec.GetTimeout())
	require.Nil(t, spec.GetRunAt())
	require.Empty(t, spec.GetPayload())

	// RunAt and Delay: the last one wins.
	at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	spec, err = client.Job{}.JobSpec(client.Delay(time.Hour), client.RunAt(at))
	require.NoError(t, err)
	require.Equal(t, at, spec.GetRunAt().AsTime())
	spec, err = client.Job{}.JobSpec(client.RunAt(at), client.Delay(0))
	require.NoError(t, err)
	require.Nil(t, spec.GetRunAt())
}

func TestEncodePayload(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   any
		want string
	}{
		{nil, ""},
		{[]byte("raw \x00 bytes"), "raw \x00 bytes"},
		{json.RawMessage(`{"a":1}`), `{"a":1}`},
		{"text", `"text"`},
		{struct {
			X int `json:"x"`
		}{1}, `{"x":1}`},
	} {
		b, err := client.EncodePayload(tt.in)
		require.NoError(t, err)
		require.Equal(t, tt.want, string(b), "%T", tt.in)
	}
	_, err := client.EncodePayload(make(chan int))
	require.ErrorIs(t, err, queue.ErrInvalidArgument)
}

func TestErrorUnwrap(t *testing.T) {
	t.Parallel()
	ce := connect.NewError(connect.CodeNotFound, errors.New("job not found: x"))
	var err error = &client.Error{Op: "get job", Sentinel: queue.ErrJobNotFound, Err: ce}
	err = fmt.Errorf("outer: %w", err)
	require.ErrorIs(t, err, queue.ErrJobNotFound)
	var got *connect.Error
	require.ErrorAs(t, err, &got)
	require.Equal(t, connect.CodeNotFound, got.Code())
	require.Equal(t, "outer: get job: job not found: x", err.Error())
}
