package producer

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func write(t *testing.T, root, rel, content string) string {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestScanGlobsAndPriorities(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, rel := range []string{"a.txt", "b.PDF", "sub/c.docx", "sub/deep/d.txt", "sub/deep/e.tmp",
		".DS_Store", "sub/.DS_Store", "skip/x.txt", "skip/y/z.pdf", "other.log"} {
		write(t, root, rel, rel)
	}
	require.NoError(t, os.Symlink(filepath.Join(root, "a.txt"), filepath.Join(root, "link.txt")))
	m, err := newMatcher([]string{"**/*.txt", "**/*.pdf", "**/*.PDF", "**/*.docx", "**/*.tmp", "**/.DS_Store"},
		[]string{"**/*.tmp", "**/.DS_Store", "skip"}, []string{".pdf", "docx"}, 7, 2)
	require.NoError(t, err)
	var warned []string
	files, st, err := scan(context.Background(), root, m, false, func(p string, err error) { warned = append(warned, p) })
	require.NoError(t, err)
	got := map[string]int32{}
	for _, f := range files {
		got[f.rel] = f.priority
		require.True(t, filepath.IsAbs(f.path))
		require.Equal(t, filepath.Join(root, filepath.FromSlash(f.rel)), f.path)
	}
	require.Equal(t, map[string]int32{"a.txt": 2, "b.PDF": 7, "sub/c.docx": 7, "sub/deep/d.txt": 2}, got,
		"globs across directories, an excluded directory not entered, a symbolic link not taken, extensions case-insensitive")
	require.Equal(t, 4, st.seen)
	require.Zero(t, st.skipped)
	require.Empty(t, warned)
}

func TestScanRefusesABadDirectory(t *testing.T) {
	t.Parallel()
	m, err := newMatcher([]string{"**/*"}, nil, nil, 7, 0)
	require.NoError(t, err)
	_, _, err = scan(context.Background(), filepath.Join(t.TempDir(), "missing"), m, false, func(string, error) {})
	require.ErrorContains(t, err, "no such file or directory")
	f := write(t, t.TempDir(), "f", "x")
	_, _, err = scan(context.Background(), f, m, false, func(string, error) {})
	require.ErrorContains(t, err, "is not a directory")
	_, err = newMatcher([]string{"[a-"}, nil, nil, 7, 0)
	require.ErrorContains(t, err, `invalid glob "[a-"`)
}

// A file that vanishes between the directory listing and its open is skipped with a warning.
func TestReadFileVanished(t *testing.T) {
	t.Parallel()
	p := write(t, t.TempDir(), "gone.txt", "x")
	require.NoError(t, os.Remove(p))
	_, err := readFile(p, "gone.txt", false)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// The idempotency key names one version of a file: the same on every scan, another after any
// change of size or modification time (or of content, with hashContent).
func TestVersionKey(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	p := write(t, root, "f.txt", "hello")
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	require.NoError(t, os.Chtimes(p, mtime, mtime))
	a, err := readFile(p, "f.txt", false)
	require.NoError(t, err)
	b, err := readFile(p, "f.txt", false)
	require.NoError(t, err)
	require.Equal(t, a.key, b.key)
	require.Len(t, a.key, len("file:")+64)

	require.NoError(t, os.WriteFile(p, []byte("HELLO"), 0o644)) // same size, new mtime
	require.NoError(t, os.Chtimes(p, mtime, mtime))             // and the old mtime back
	c, err := readFile(p, "f.txt", false)
	require.NoError(t, err)
	require.Equal(t, a.key, c.key, "without content hashing, size and mtime are the version")
	hashedA, err := readFile(p, "f.txt", true)
	require.NoError(t, err)
	require.NotEqual(t, a.key, hashedA.key)
	require.NoError(t, os.WriteFile(p, []byte("hello"), 0o644))
	require.NoError(t, os.Chtimes(p, mtime, mtime))
	hashedB, err := readFile(p, "f.txt", true)
	require.NoError(t, err)
	require.NotEqual(t, hashedA.key, hashedB.key, "with content hashing, a rewrite is a new version")

	require.NoError(t, os.WriteFile(p, []byte("hello!"), 0o644))
	require.NoError(t, os.Chtimes(p, mtime, mtime))
	d, err := readFile(p, "f.txt", false)
	require.NoError(t, err)
	require.NotEqual(t, a.key, d.key, "a new size is a new version")
}
