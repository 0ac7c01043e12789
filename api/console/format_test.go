package console

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

func TestShowPayloads(t *testing.T) {
	t.Parallel()
	require.Equal(t, shown{}, show(nil))

	s := show([]byte(`{"b":[1,2],"a":"x"}`))
	require.Equal(t, "JSON", s.Format)
	require.Equal(t, "{\n  \"b\": [\n    1,\n    2\n  ],\n  \"a\": \"x\"\n}", s.Text)

	mp, err := msgpack.Marshal(map[string]any{"to": "a@example.com", "n": 3, "raw": []byte{0xff, 0x00}})
	require.NoError(t, err)
	s = show(mp)
	require.Equal(t, "MessagePack", s.Format)
	require.JSONEq(t, `{"to":"a@example.com","n":3,"raw":"ff00"}`, s.Text)

	s = show(append(mp, 0x01)) // trailing bytes: not one MessagePack value
	require.NotEqual(t, "MessagePack", s.Format)

	s = show([]byte("plain <b>text</b>"))
	require.Equal(t, "text", s.Format)
	require.Equal(t, "plain <b>text</b>", s.Text, "escaping is the template's job")

	s = show([]byte{0x00, 0xff, 0xfe})
	require.Equal(t, "binary", s.Format)
	require.Contains(t, s.Text, "00 ff fe")

	big := make([]byte, 2*maxShownBytes)
	for i := range big {
		big[i] = 'a'
	}
	s = show(big)
	require.True(t, s.Cut)
	require.Len(t, s.Text, maxShownBytes)
	require.Equal(t, 2*maxShownBytes, s.Size)
}

func TestTraceID(t *testing.T) {
	t.Parallel()
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736",
		traceID(map[string]string{"traceparent": "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"}))
	for _, bad := range []string{"", "00-xyz-00f067aa0ba902b7-01", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "garbage"} {
		require.Empty(t, traceID(map[string]string{"traceparent": bad}), bad)
	}
}

func TestBackStaysOnTheConsole(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/dead?queue=a": "/dead?queue=a", "//evil.example": "/f", "/\\evil.example": "/f",
		"https://evil.example": "/f", "": "/f", "/x\r\nSet-Cookie: a=b": "/f",
	} {
		got := backOf(in)
		if got == "" {
			got = "/f"
		}
		require.Equal(t, want, got, in)
	}
}
