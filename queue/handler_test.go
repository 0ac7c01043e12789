package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

func ExampleMux() {
	mux := queue.NewMux()
	mux.RegisterFunc("greet", func(ctx context.Context, job *queue.Job) ([]byte, error) {
		info, _ := queue.JobInfoFromContext(ctx)
		return fmt.Appendf(nil, "hello %s (attempt %d)", job.Payload, info.Attempt), nil
	})

	ctx := queue.WithJobInfo(context.Background(), queue.JobInfo{ID: "j1", Attempt: 2, Queue: "default", Type: "greet"})
	out, err := mux.Handle(ctx, &queue.Job{ID: "j1", Type: "greet", Payload: []byte("world")})
	fmt.Println(string(out), err)

	_, err = mux.Handle(ctx, &queue.Job{ID: "j2", Type: "resize"})
	fmt.Println(err)
	fmt.Println(errors.Is(err, queue.ErrUnknownJobType), queue.IsPermanent(err))
	// Output:
	// hello world (attempt 2) <nil>
	// unknown job type "resize" (this worker handles: greet)
	// true true
}

func ExamplePermanent() {
	errBadInput := errors.New("bad input")
	err := fmt.Errorf("decode payload: %w", queue.Permanent(errBadInput))
	fmt.Println(err)
	fmt.Println(queue.IsPermanent(err), errors.Is(err, errBadInput))
	fmt.Println(queue.IsPermanent(errBadInput), queue.Permanent(nil) == nil)
	// Output:
	// decode payload: bad input
	// true true
	// false true
}

func TestMuxRegisterLookupTypes(t *testing.T) {
	t.Parallel()
	var m queue.Mux // the zero value is usable
	require.Empty(t, m.Types())
	_, ok := m.Lookup("noop")
	require.False(t, ok)

	noop := queue.HandlerFunc(func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	m.Register("noop", noop)
	m.RegisterFunc("b", func(context.Context, *queue.Job) ([]byte, error) { return []byte("b"), nil })
	m.RegisterFunc("a", func(context.Context, *queue.Job) ([]byte, error) { return []byte("a"), nil })
	require.Equal(t, []string{"a", "b", "noop"}, m.Types())

	h, ok := m.Lookup("b")
	require.True(t, ok)
	out, err := h.Handle(t.Context(), &queue.Job{Type: "b"})
	require.NoError(t, err)
	require.Equal(t, "b", string(out))

	out, err = m.Handle(t.Context(), &queue.Job{Type: "a"})
	require.NoError(t, err)
	require.Equal(t, "a", string(out))

	var _ queue.Handler = &m
}

func TestMuxRegisterPanics(t *testing.T) {
	t.Parallel()
	noop := queue.HandlerFunc(func(context.Context, *queue.Job) ([]byte, error) { return nil, nil })
	m := queue.NewMux()
	m.Register("x", noop)
	require.PanicsWithValue(t, `queue: Mux.Register: job type "x" registered twice`, func() { m.Register("x", noop) })
	require.Panics(t, func() { m.Register("", noop) })
	require.Panics(t, func() { m.Register("y", nil) })
	require.Panics(t, func() { m.RegisterFunc("z", nil) })
}

func TestMuxUnknownType(t *testing.T) {
	t.Parallel()
	m := queue.NewMux()
	_, err := m.Handle(t.Context(), &queue.Job{Type: "missing"})
	require.ErrorIs(t, err, queue.ErrUnknownJobType)
	require.True(t, queue.IsPermanent(err))
	require.Contains(t, err.Error(), `"missing"`)
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	require.NoError(t, queue.Permanent(nil))
	base := errors.New("boom")
	p := queue.Permanent(base)
	require.Equal(t, "boom", p.Error())
	require.ErrorIs(t, p, base)
	require.True(t, queue.IsPermanent(p))
	require.True(t, queue.IsPermanent(fmt.Errorf("outer: %w", p)))
	require.True(t, queue.IsPermanent(errors.Join(errors.New("other"), p)))
	require.False(t, queue.IsPermanent(base))
	require.False(t, queue.IsPermanent(nil))
	require.False(t, queue.IsPermanent(errors.New(strings.Repeat("permanent", 2))))
}

func TestJobInfoContext(t *testing.T) {
	t.Parallel()
	_, ok := queue.JobInfoFromContext(t.Context())
	require.False(t, ok)
	want := queue.JobInfo{ID: "id", Attempt: 3, Queue: "q", Type: "t"}
	got, ok := queue.JobInfoFromContext(queue.WithJobInfo(t.Context(), want))
	require.True(t, ok)
	require.Equal(t, want, got)
}
