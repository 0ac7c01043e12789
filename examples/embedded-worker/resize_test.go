package main

import (
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
)

func writePNG(t *testing.T, w, h int) string {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{R: uint8(x), G: uint8(y), B: 200, A: 255})
		}
	}
	path := filepath.Join(t.TempDir(), "in.png")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, png.Encode(f, img))
	require.NoError(t, f.Close())
	return path
}

func resizeJob(t *testing.T, p any) *queue.Job {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	return &queue.Job{ID: "job-1", Type: TypeResize, Payload: b}
}

func TestResize(t *testing.T) {
	t.Parallel()
	src := writePNG(t, 40, 20)
	out, err := Resize().Handle(t.Context(), resizeJob(t, ResizePayload{Src: src, Width: 10}))
	require.NoError(t, err)
	var res ResizeResult
	require.NoError(t, json.Unmarshal(out, &res))
	require.Equal(t, filepath.Join(filepath.Dir(src), "in_10x5.png"), res.Dst)
	require.Equal(t, 10, res.Width)
	require.Equal(t, 5, res.Height)

	f, err := os.Open(res.Dst)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, 10, 5), img.Bounds())

	// A retry (at-least-once delivery) gives the same file.
	again, err := Resize().Handle(t.Context(), resizeJob(t, ResizePayload{Src: src, Width: 10}))
	require.NoError(t, err)
	require.JSONEq(t, string(out), string(again))

	dst := filepath.Join(t.TempDir(), "custom.png")
	out, err = Resize().Handle(t.Context(), resizeJob(t, ResizePayload{Src: src, Dst: dst, Height: 4}))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, &res))
	require.Equal(t, ResizeResult{Dst: dst, Width: 8, Height: 4, Bytes: res.Bytes}, res)
}

func TestResizeFailures(t *testing.T) {
	t.Parallel()
	src := writePNG(t, 4, 4)
	notImage := filepath.Join(t.TempDir(), "x.png")
	require.NoError(t, os.WriteFile(notImage, []byte("not an image"), 0o600))
	for name, payload := range map[string]string{
		"bad json":      `{"src": 1}`,
		"unknown field": `{"src": "a.png", "width": 1, "scale": 2}`,
		"no size":       `{"src": "` + src + `"}`,
		"negative":      `{"src": "` + src + `", "width": -1}`,
		"missing file":  `{"src": "/nonexistent/in.png", "width": 1}`,
		"not an image":  `{"src": "` + notImage + `", "width": 1}`,
	} {
		_, err := Resize().Handle(t.Context(), &queue.Job{Type: TypeResize, Payload: []byte(payload)})
		require.Error(t, err, name)
		require.True(t, queue.IsPermanent(err), name)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Resize().Handle(ctx, resizeJob(t, ResizePayload{Src: src, Width: 2}))
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, queue.IsPermanent(err))
}
