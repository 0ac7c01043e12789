//go:build linux

package handlers_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/handlers"
)

// fileJob is a file job for path.
func fileJob(t *testing.T, path string) *queue.Job {
	t.Helper()
	b, err := json.Marshal(handlers.FilePayload{Path: path})
	require.NoError(t, err)
	return job(handlers.TypeFile, string(b))
}

// write creates dir/rel with content, and its directories.
func write(t *testing.T, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o640))
	return p
}

// realDir is t.TempDir with symbolic links resolved (the result reports resolved paths).
func realDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return d
}

func fileResult(t *testing.T, out []byte) handlers.FileResult {
	t.Helper()
	var r handlers.FileResult
	require.NoError(t, json.Unmarshal(out, &r), string(out))
	return r
}

// sha256sum runs the real sha256sum binary on path.
func sha256sum(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command(bin(t, "sha256sum"), path).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))[0]
}

func TestFileChecksumMatchesSha256sum(t *testing.T) {
	t.Parallel()
	root := realDir(t)
	content := strings.Repeat("jq file handler\n", 40000) // 640 KB: several buffers
	p := write(t, root, "in/data.txt", content)
	h := handlers.FileWith(handlers.FileOptions{Roots: []string{root}, BufferSize: 4096})
	out, err := h.Handle(t.Context(), job(handlers.TypeFile, `{"path": "`+p+`", "size": 3}`))
	require.NoError(t, err)
	r := fileResult(t, out)
	require.Equal(t, sha256sum(t, p), r.SHA256)
	require.Equal(t, int64(len(content)), r.Size, "the actual size, not the payload's")
	require.Equal(t, p, r.Path)
	require.Equal(t, "text/plain; charset=utf-8", r.MIME)
	require.Empty(t, r.MovedTo)
	require.FileExists(t, p, "no done_dir: the file stays")

	png := write(t, root, "img.bin", "\x89PNG\r\n\x1a\n"+strings.Repeat("\x00", 100))
	out, err = h.Handle(t.Context(), fileJob(t, png))
	require.NoError(t, err)
	require.Equal(t, "image/png", fileResult(t, out).MIME)

	empty := write(t, root, "empty", "")
	out, err = h.Handle(t.Context(), fileJob(t, empty))
	require.NoError(t, err)
	require.Equal(t, sha256sum(t, empty), fileResult(t, out).SHA256)
}

func TestFileOutsideRoots(t *testing.T) {
	t.Parallel()
	base := realDir(t)
	root := filepath.Join(base, "data")
	inside := write(t, root, "ok.txt", "ok")
	outside := write(t, base, "secret.txt", "secret")
	sibling := write(t, base, "data2/x.txt", "prefix trick") // /…/data2 is not within /…/data
	require.NoError(t, os.Symlink(outside, filepath.Join(root, "link")))
	require.NoError(t, os.Symlink(base, filepath.Join(root, "up")))
	h := handlers.FileWith(handlers.FileOptions{Roots: []string{root}})

	_, err := h.Handle(t.Context(), fileJob(t, inside))
	require.NoError(t, err)
	for name, path := range map[string]string{
		"outside":          outside,
		"dot-dot":          root + "/../secret.txt",
		"symlink to file":  filepath.Join(root, "link"),
		"symlink to dir":   filepath.Join(root, "up", "secret.txt"),
		"sibling prefix":   sibling,
		"missing outside":  filepath.Join(base, "nothing-here"),
		"root's parent":    base,
		"through dot-dots": filepath.Join(root, "a", "..", "..", "data2", "x.txt"),
	} {
		_, err := h.Handle(t.Context(), fileJob(t, path))
		require.ErrorIs(t, err, handlers.ErrFileOutsideRoots, name)
		require.True(t, queue.IsPermanent(err), name)
		require.NotContains(t, err.Error(), "\n", name)
		require.Contains(t, err.Error(), "is outside worker.file.roots", name)
	}

	// A symbolic link to a file inside the root is fine; the result names the target.
	require.NoError(t, os.Symlink(inside, filepath.Join(root, "alias")))
	out, err := h.Handle(t.Context(), fileJob(t, filepath.Join(root, "alias")))
	require.NoError(t, err)
	require.Equal(t, inside, fileResult(t, out).Path)

	// A root given through a symbolic link is resolved too.
	linkRoot := filepath.Join(base, "rootlink")
	require.NoError(t, os.Symlink(root, linkRoot))
	out, err = handlers.FileWith(handlers.FileOptions{Roots: []string{linkRoot}}).Handle(t.Context(), fileJob(t, filepath.Join(linkRoot, "ok.txt")))
	require.NoError(t, err)
	require.Equal(t, inside, fileResult(t, out).Path)
}

func TestFileFailures(t *testing.T) {
	t.Parallel()
	root := realDir(t)
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(root, "dir"), 0o750))
	h := handlers.FileWith(handlers.FileOptions{Roots: []string{root}})
	for payload, want := range map[string]string{
		`{"path": "` + root + `/vanished.txt"}`:  "vanished.txt: no such file or directory",
		`{"path": "` + root + `/fifo"}`:          "is not a regular file (a named pipe)",
		`{"path": "` + root + `/dir"}`:           "is not a regular file (a directory)",
		`{"path": "relative/x"}`:                 "must be absolute",
		`{}`:                                     `"path" is required`,
		`{"path": "/x", "sha": "1"}`:             `unknown field "sha"`,
		`{"path": "` + root + `/a", "size": -1}`: "size must be 0 or more",
		`{"path": 1}`:                            "cannot unmarshal",
	} {
		_, err := h.Handle(t.Context(), job(handlers.TypeFile, payload))
		require.ErrorContains(t, err, want, payload)
		require.True(t, queue.IsPermanent(err), payload)
		require.True(t, strings.HasPrefix(err.Error(), "file: "), err.Error())
		require.NotContains(t, err.Error(), "\n")
	}
}

func TestFileDisabled(t *testing.T) {
	t.Parallel()
	_, err := handlers.FileWith(handlers.FileOptions{}).Handle(t.Context(), fileJob(t, "/etc/passwd"))
	require.EqualError(t, err, "file: worker.file.roots is empty")
	require.ErrorIs(t, err, handlers.ErrFileDisabled)
	require.True(t, queue.IsPermanent(err))
}

func TestFileCancelled(t *testing.T) {
	t.Parallel()
	root := realDir(t)
	p := filepath.Join(root, "big")
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Truncate(p, 1<<30))
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("job cancelled")
	cancel(cause)
	_, err = handlers.FileWith(handlers.FileOptions{Roots: []string{root}}).Handle(ctx, fileJob(t, p))
	require.ErrorIs(t, err, cause)
	require.False(t, queue.IsPermanent(err), "the executor decides what a cancelled job is")
}

// TestFileLargeBoundedMemory hashes a 1 GiB sparse file and checks that the
// handler allocated a small constant, not the file. Not parallel: the
// allocation counters are the whole process's.
func TestFileLargeBoundedMemory(t *testing.T) {
	root := realDir(t)
	p := filepath.Join(root, "sparse.img")
	f, err := os.Create(p)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.Truncate(p, 1<<30))
	h := handlers.FileWith(handlers.FileOptions{Roots: []string{root}})

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := h.Handle(t.Context(), fileJob(t, p))
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	r := fileResult(t, out)
	require.Equal(t, int64(1<<30), r.Size)
	// sha256sum of 1 GiB of zero bytes (computed once with the real binary).
	require.Equal(t, "49bc20df15e412a64472421e13fe86ff1c5165e18b2afccf160d4dc19fe68a14", r.SHA256)
	require.Equal(t, "application/octet-stream", r.MIME)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d bytes to hash 1 GiB", allocated)
	require.Less(t, allocated, uint64(4<<20), "bounded memory: a fixed buffer, not the file")
}

func TestFileMoveDone(t *testing.T) {
	t.Parallel()
	root, done := realDir(t), realDir(t)
	h := handlers.FileWith(handlers.FileOptions{Roots: []string{root}, DoneDir: done})

	p := write(t, root, "in/2030/a.csv", "one")
	out, err := h.Handle(t.Context(), fileJob(t, p))
	require.NoError(t, err)
	r := fileResult(t, out)
	require.Equal(t, filepath.Join(done, "in/2030/a.csv"), r.MovedTo, "the path relative to its root is kept")
	require.NoFileExists(t, p)
	got, err := os.ReadFile(r.MovedTo)
	require.NoError(t, err)
	require.Equal(t, "one", string(got))

	// A different file of the same name never replaces the first: it gets a suffix.
	p = write(t, root, "in/2030/a.csv", "two")
	out, err = h.Handle(t.Context(), fileJob(t, p))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(done, "in/2030/a.csv.1"), fileResult(t, out).MovedTo)
	got, err = os.ReadFile(filepath.Join(done, "in/2030/a.csv"))
	require.NoError(t, err)
	require.Equal(t, "one", string(got))

	// The same content again (an attempt that moved the file but died before removing it):
	// the move counts as done, nothing is duplicated.
	p = write(t, root, "in/2030/a.csv", "one")
	out, err = h.Handle(t.Context(), fileJob(t, p))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(done, "in/2030/a.csv"), fileResult(t, out).MovedTo)
	require.NoFileExists(t, p)
	require.NoFileExists(t, filepath.Join(done, "in/2030/a.csv.2"))
}

func TestFileMoveFailed(t *testing.T) {
	t.Parallel()
	root, done, failed := realDir(t), realDir(t), realDir(t)
	h := handlers.FileWith(handlers.FileOptions{Roots: []string{root}, DoneDir: done, FailedDir: failed})
	fifo := filepath.Join(root, "sub", "pipe")
	require.NoError(t, os.MkdirAll(filepath.Dir(fifo), 0o750))
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))

	_, err := h.Handle(t.Context(), fileJob(t, fifo))
	require.ErrorContains(t, err, "not a regular file")
	require.True(t, queue.IsPermanent(err))
	st, err := os.Lstat(filepath.Join(failed, "sub", "pipe"))
	require.NoError(t, err, "moved to failed_dir at its relative path")
	require.NotZero(t, st.Mode()&os.ModeNamedPipe)
	_, err = os.Lstat(fifo)
	require.ErrorIs(t, err, os.ErrNotExist)

	// Nothing is moved for a file outside the roots, nor for one that is not there.
	outside := write(t, realDir(t), "x", "x")
	_, err = h.Handle(t.Context(), fileJob(t, outside))
	require.ErrorIs(t, err, handlers.ErrFileOutsideRoots)
	require.FileExists(t, outside)
	entries, err := os.ReadDir(failed)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

// TestFileMoveAcrossDevices moves into /dev/shm (tmpfs) when it is another
// file system than the temporary directory: the hard link fails with EXDEV
// and the file is copied, then removed.
func TestFileMoveAcrossDevices(t *testing.T) {
	t.Parallel()
	root := realDir(t)
	done, err := os.MkdirTemp("/dev/shm", "jq-done-")
	if err != nil {
		t.Skip("no /dev/shm:", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(done) })
	var a, b syscall.Stat_t
	require.NoError(t, syscall.Stat(root, &a))
	require.NoError(t, syscall.Stat(done, &b))
	if a.Dev == b.Dev {
		t.Skip("/dev/shm is on the same file system as the temporary directory")
	}
	p := write(t, root, "d/f.bin", strings.Repeat("x", 300000))
	out, err := handlers.FileWith(handlers.FileOptions{Roots: []string{root}, DoneDir: done}).Handle(t.Context(), fileJob(t, p))
	require.NoError(t, err)
	r := fileResult(t, out)
	require.Equal(t, filepath.Join(done, "d/f.bin"), r.MovedTo)
	require.NoFileExists(t, p)
	require.Equal(t, r.SHA256, sha256sum(t, r.MovedTo))
}
