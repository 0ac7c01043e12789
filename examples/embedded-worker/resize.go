package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"

	_ "image/gif"  // decoders for image.Decode
	_ "image/jpeg" // decoders for image.Decode

	"github.com/jq-dev/jq/queue"
)

// TypeResize is the job type of the resize handler.
const TypeResize = "resize"

// ResizePayload is what a resize job carries.
type ResizePayload struct {
	// Src is the image to read (PNG, JPEG or GIF).
	Src string `json:"src"`
	// Dst is where to write the PNG (default: next to Src, named
	// <name>_<width>x<height>.png).
	Dst string `json:"dst,omitempty"`
	// Width and Height of the result; when one is 0 it follows the aspect
	// ratio.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
}

// ResizeResult is the job's result.
type ResizeResult struct {
	Dst    string `json:"dst"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Bytes  int    `json:"bytes"`
}

const maxSide = 10000

// Resize scales an image (nearest neighbour) and writes it as PNG. It is
// idempotent, as jq handlers must be (delivery is at least once): the output
// name depends only on the payload, and a retry overwrites it atomically.
// Bad payloads and unreadable images fail permanently; a cancelled job stops
// between rows.
func Resize() queue.Handler {
	return queue.HandlerFunc(func(ctx context.Context, job *queue.Job) ([]byte, error) {
		var p ResizePayload
		dec := json.NewDecoder(bytes.NewReader(job.Payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return nil, queue.Permanent(fmt.Errorf("resize: invalid payload: %w", err))
		}
		if p.Src == "" || (p.Width <= 0 && p.Height <= 0) || p.Width < 0 || p.Height < 0 || p.Width > maxSide || p.Height > maxSide {
			return nil, queue.Permanent(errors.New(`resize: invalid payload: need "src" and a positive "width" or "height" (at most 10000)`))
		}
		f, err := os.Open(p.Src)
		if err != nil {
			return nil, queue.Permanent(fmt.Errorf("resize: %w", err))
		}
		src, _, err := image.Decode(f)
		_ = f.Close()
		if err != nil {
			return nil, queue.Permanent(fmt.Errorf("resize: decode %s: %w", p.Src, err))
		}
		w, h := targetSize(src.Bounds().Dx(), src.Bounds().Dy(), p.Width, p.Height)
		dst, err := scale(ctx, src, w, h)
		if err != nil {
			return nil, err
		}
		out := p.Dst
		if out == "" {
			base := strings.TrimSuffix(filepath.Base(p.Src), filepath.Ext(p.Src))
			out = filepath.Join(filepath.Dir(p.Src), fmt.Sprintf("%s_%dx%d.png", base, w, h))
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, dst); err != nil {
			return nil, fmt.Errorf("resize: encode: %w", err)
		}
		if err := writeAtomic(out, buf.Bytes()); err != nil {
			return nil, fmt.Errorf("resize: %w", err)
		}
		return json.Marshal(ResizeResult{Dst: out, Width: w, Height: h, Bytes: buf.Len()})
	})
}

// targetSize fills in a missing side from the aspect ratio (at least 1).
func targetSize(sw, sh, w, h int) (int, int) {
	switch {
	case w == 0:
		w = max(1, sw*h/max(sh, 1))
	case h == 0:
		h = max(1, sh*w/max(sw, 1))
	}
	return w, h
}

func scale(ctx context.Context, src image.Image, w, h int) (*image.NRGBA, error) {
	b := src.Bounds()
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("resize: %w", context.Cause(ctx))
		}
		sy := b.Min.Y + y*b.Dy()/h
		for x := range w {
			dst.Set(x, y, src.At(b.Min.X+x*b.Dx()/w, sy))
		}
	}
	return dst, nil
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".resize-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
