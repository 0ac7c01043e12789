package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/jq-dev/jq/queue"
)

// Errors of the file handler's gate; both are permanent failures.
var (
	// ErrFileDisabled: the worker has no worker.file.roots; see [FileWith].
	ErrFileDisabled = errors.New("file: worker.file.roots is empty")
	// ErrFileOutsideRoots: the job's path does not resolve to a place inside
	// one of the roots (worker.file.roots).
	ErrFileOutsideRoots = errors.New("outside worker.file.roots")
)

// FilePayload is the payload of the file handler.
type FilePayload struct {
	// Path is the file to check; required, absolute. After symbolic links
	// and ".." are resolved it must lie inside one of FileOptions.Roots.
	Path string `json:"path"`
	// Size is the size the submitter expects, in bytes (optional). A
	// different actual size is not a failure (the file may have changed): the
	// result reports the actual one.
	Size *int64 `json:"size,omitempty"`
}

// FileResult is the result of the file handler (JSON).
type FileResult struct {
	// Path is the file read: the payload's path with symbolic links and ".."
	// resolved.
	Path string `json:"path"`
	// Size is the number of bytes read, which SHA256 covers.
	Size int64 `json:"size"`
	// SHA256 is the lower-case hex SHA-256 of the content.
	SHA256 string `json:"sha256"`
	// MIME is net/http.DetectContentType of the first 512 bytes: decided by
	// the content alone, the same on every host (mime.TypeByExtension would
	// depend on the host's mime.types files and trust the name).
	MIME string `json:"mime"`
	// MovedTo is where the file was moved (FileOptions.DoneDir); empty when
	// it was not.
	MovedTo string `json:"moved_to,omitempty"`
}

// FileOptions configure the file handler.
type FileOptions struct {
	// Roots are the directories whose files the handler may read
	// (worker.file.roots). Empty: every job fails permanently with
	// ErrFileDisabled.
	Roots []string
	// DoneDir, when set, receives each file checked successfully, at its
	// path relative to its root (worker.file.done_dir).
	DoneDir string
	// FailedDir, when set, receives each file inside the roots whose job
	// failed permanently (not a regular file, unreadable), likewise
	// (worker.file.failed_dir).
	FailedDir string
	// BufferSize is the read buffer, the handler's only allocation that grows
	// with nothing: a file of any size is hashed in it. Default 256 KiB.
	BufferSize int
}

const defaultFileBuffer = 256 << 10

// sniffLen is what http.DetectContentType looks at.
const sniffLen = 512

// FileWith returns the file handler. For a path inside one of opts.Roots it
// streams the file once through SHA-256 in a fixed buffer (bounded memory,
// whatever the size; the job's context is checked between reads) and
// returns a [FileResult]. A path outside the roots — also through ".." or a
// symbolic link — a missing file, something other than a regular file and a
// bad payload are permanent failures; a read error is retryable.
//
// Then, with DoneDir (success) or FailedDir (permanent failure of a file that
// exists inside a root) set, the file is moved there at its path relative to
// its root: renamed (hard link then unlink) when on the same file system,
// else copied and removed. An existing file is never overwritten: the name
// gets a suffix (".1", ".2", …), except that an identical file already at the
// destination on success (a previous attempt moved it but failed to remove
// the source) is taken as the move done.
func FileWith(opts FileOptions) queue.Handler {
	if len(opts.Roots) == 0 {
		return queue.HandlerFunc(func(context.Context, *queue.Job) ([]byte, error) {
			return nil, queue.Permanent(ErrFileDisabled)
		})
	}
	if opts.BufferSize <= 0 {
		opts.BufferSize = defaultFileBuffer
	}
	return &fileHandler{opts: opts}
}

type fileHandler struct{ opts FileOptions }

// located is a job's file resolved inside a root.
type located struct {
	root string // the root, absolute with symbolic links resolved
	rel  string // the file's path relative to root: no "..", no symbolic link
	real string // filepath.Join(root, rel)
}

func (h *fileHandler) Handle(ctx context.Context, job *queue.Job) ([]byte, error) {
	var p FilePayload
	if err := decodePayload(TypeFile, job.Payload, &p); err != nil {
		return nil, err
	}
	switch {
	case p.Path == "":
		return nil, queue.Permanent(errors.New(`file: invalid payload: "path" is required`))
	case !filepath.IsAbs(p.Path):
		return nil, queue.Permanent(fmt.Errorf("file: invalid payload: path %q must be absolute", p.Path))
	case strings.ContainsRune(p.Path, 0):
		return nil, queue.Permanent(errors.New("file: invalid payload: path contains a NUL byte"))
	case p.Size != nil && *p.Size < 0:
		return nil, queue.Permanent(fmt.Errorf("file: invalid payload: size must be 0 or more, got %d", *p.Size))
	}
	loc, err := h.locate(p.Path)
	if err != nil {
		return nil, err
	}
	res, err := h.check(ctx, loc)
	if err != nil {
		if queue.IsPermanent(err) && h.opts.FailedDir != "" {
			if _, merr := moveFile(loc.real, filepath.Join(h.opts.FailedDir, loc.rel), nil); merr != nil && !errors.Is(merr, fs.ErrNotExist) {
				err = fmt.Errorf("%w (and moving it to worker.file.failed_dir failed: %w)", err, merr)
			}
		}
		return nil, err
	}
	if h.opts.DoneDir != "" {
		moved, err := moveFile(loc.real, filepath.Join(h.opts.DoneDir, loc.rel), res)
		if err != nil {
			// Retryable: the next attempt hashes again and finishes the move.
			return nil, fmt.Errorf("file: checked %s but could not move it to worker.file.done_dir: %w", loc.real, err)
		}
		res.MovedTo = moved
	}
	return json.Marshal(res)
}

// locate resolves path (filepath.Abs, filepath.EvalSymlinks) and finds the
// root that contains it, the roots resolved the same way. A path that does not
// exist is only reported as missing when its cleaned form lies inside a root,
// so a job cannot probe for files elsewhere.
func (h *fileHandler) locate(path string) (located, error) {
	roots := h.roots()
	abs, err := filepath.Abs(path)
	if err != nil {
		return located{}, queue.Permanent(fmt.Errorf("file: %s: %w", path, err))
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			for _, r := range roots {
				_, inGiven := within(r.given, abs)
				_, inReal := within(r.real, abs)
				if inGiven || inReal {
					return located{}, queue.Permanent(fmt.Errorf("file: %s: %w", path, unwrapPath(err)))
				}
			}
			return located{}, queue.Permanent(fmt.Errorf("file: %s is %w", path, ErrFileOutsideRoots))
		}
		return located{}, fmt.Errorf("file: %s: %w", path, err)
	}
	for _, r := range roots {
		if r.real == "" {
			continue
		}
		if rel, ok := within(r.real, resolved); ok {
			return located{root: r.real, rel: rel, real: filepath.Join(r.real, rel)}, nil
		}
	}
	return located{}, queue.Permanent(fmt.Errorf("file: %s is %w", path, ErrFileOutsideRoots))
}

type root struct {
	given string // filepath.Abs of the configured root
	real  string // and with symbolic links resolved; "" when that failed (missing root)
}

// roots resolves the configured roots at every job: a root created or
// re-pointed after the worker started counts as it is now.
func (h *fileHandler) roots() []root {
	out := make([]root, 0, len(h.opts.Roots))
	for _, r := range h.opts.Roots {
		abs, err := filepath.Abs(r)
		if err != nil {
			continue
		}
		resolved, _ := filepath.EvalSymlinks(abs)
		out = append(out, root{given: abs, real: resolved})
	}
	return out
}

// within returns path relative to dir when path is dir itself or below it.
// Both are absolute and clean; the test is on whole path elements, so /data2
// is not within /data.
func within(dir, path string) (string, bool) {
	if dir == "" {
		return "", false
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// unwrapPath drops a *fs.PathError's own copy of the path (the message names
// the job's path already).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// check opens the located file through an os.Root of its root, so that a
// symbolic link swapped in after locate cannot lead outside it, and hashes it.
func (h *fileHandler) check(ctx context.Context, loc located) (*FileResult, error) {
	r, err := os.OpenRoot(loc.root)
	if err != nil {
		return nil, fmt.Errorf("file: open root %s: %w", loc.root, err)
	}
	defer r.Close()
	// Non-blocking: opening a FIFO for reading would otherwise wait for a
	// writer, forever. It makes no difference to a regular file.
	f, err := r.OpenFile(loc.rel, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, queue.Permanent(fmt.Errorf("file: %s: %w", loc.real, unwrapPath(err)))
		}
		return nil, fmt.Errorf("file: %s: %w", loc.real, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("file: %s: %w", loc.real, err)
	}
	if !st.Mode().IsRegular() {
		return nil, queue.Permanent(fmt.Errorf("file: %s is not a regular file (%s)", loc.real, fileKind(st.Mode())))
	}
	buf := make([]byte, h.opts.BufferSize)
	sum, size, head, err := hashReader(ctx, f, buf)
	if err != nil {
		return nil, fmt.Errorf("file: %s: %w", loc.real, err)
	}
	return &FileResult{
		Path: loc.real, Size: size, SHA256: hex.EncodeToString(sum), MIME: http.DetectContentType(head),
	}, nil
}

// hashReader streams r through SHA-256 in buf, checking ctx before every
// read; it returns the digest, the bytes read and up to sniffLen leading
// bytes (kept in buf's own first read when possible). A cancelled context
// returns its cause.
func hashReader(ctx context.Context, r io.Reader, buf []byte) (sum []byte, size int64, head []byte, err error) {
	h := sha256.New()
	var sniff [sniffLen]byte
	n := 0
	for {
		if ctx.Err() != nil {
			return nil, 0, nil, context.Cause(ctx)
		}
		k, rerr := r.Read(buf)
		if k > 0 {
			if n < sniffLen {
				n += copy(sniff[n:], buf[:k])
			}
			_, _ = h.Write(buf[:k]) // a hash.Hash never fails
			size += int64(k)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return nil, 0, nil, rerr
		}
	}
	return h.Sum(nil), size, append([]byte(nil), sniff[:n]...), nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

// maxSuffix bounds the names tried for a move before giving up.
const maxSuffix = 1000

// moveFile moves src to dst, or to dst.N (N = 1, 2, …) when dst exists,
// creating dst's directory; it returns where the file went. It never replaces
// an existing file: a hard link (atomic, fails if the name exists) then the
// removal of src when both are on one file system, else an exclusive create,
// a copy and the removal of src. When want is set (the success path) and dst
// already holds exactly that content, src is only removed.
func moveFile(src, dst string, want *FileResult) (string, error) {
	st, err := os.Lstat(src)
	if err != nil {
		return "", err
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s is a directory: not moved", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return "", err
	}
	for i := 0; i <= maxSuffix; i++ {
		name := dst
		if i > 0 {
			name = fmt.Sprintf("%s.%d", dst, i)
		}
		if want != nil && sameContent(name, want) {
			return name, os.Remove(src)
		}
		err := os.Link(src, name)
		if err == nil {
			return name, os.Remove(src)
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		// Another file system (EXDEV), or one without hard links: copy.
		err = copyFile(src, name, st.Mode().Perm())
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		return name, os.Remove(src)
	}
	return "", fmt.Errorf("%s and %d suffixed names already exist", dst, maxSuffix)
}

// sameContent reports whether name is a regular file with want's size and
// SHA-256.
func sameContent(name string, want *FileResult) bool {
	f, err := os.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() != want.Size {
		return false
	}
	sum, _, _, err := hashReader(context.Background(), f, make([]byte, defaultFileBuffer))
	return err == nil && hex.EncodeToString(sum) == want.SHA256
}

// copyFile copies src to a new file dst (O_EXCL: an existing dst is
// fs.ErrExist, untouched), synced before it counts; a failed copy is removed.
func copyFile(src, dst string, perm fs.FileMode) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(dst)
		}
	}()
	if _, err := io.CopyBuffer(out, in, make([]byte, defaultFileBuffer)); err != nil {
		return err
	}
	return out.Sync()
}
