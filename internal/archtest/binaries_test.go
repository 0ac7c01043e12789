package archtest_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// maxBinaryBytes is the size above which a committed file must be text: a build output committed by
// mistake (a 26.6 MB benchmark binary was, twice) stays in the history of every clone for good.
const maxBinaryBytes = 1 << 20

// isText reports whether the file at path reads as text, by git's rule (no NUL byte in its first
// 8,000 bytes) and as UTF-8 there.
func isText(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	head := make([]byte, 8000)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, err
	}
	head = head[:n]
	if bytes.IndexByte(head, 0) >= 0 {
		return false, nil
	}
	// The cut may split a multi-byte rune at the end.
	for i := 0; i < utf8.UTFMax && len(head) > 0 && !utf8.Valid(head); i++ {
		head = head[:len(head)-1]
	}
	return utf8.Valid(head), nil
}

// largeBinaries returns the files of files (relative to root) that are over maxBinaryBytes and not
// text.
func largeBinaries(root string, files []string) ([]string, error) {
	var out []string
	for _, rel := range files {
		path := filepath.Join(root, rel)
		fi, err := os.Lstat(path)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() || fi.Size() <= maxBinaryBytes {
			continue
		}
		text, err := isText(path)
		if err != nil {
			return nil, err
		}
		if !text {
			out = append(out, fmt.Sprintf("%s: %d bytes, not text: a build output? (.gitignore it; git rm --cached)", rel, fi.Size()))
		}
	}
	return out, nil
}

// TestNoLargeBinariesCommitted: no file git tracks (the index: what is committed or staged) is a
// binary over 1 MiB.
func TestNoLargeBinariesCommitted(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git work tree: nothing is committed here")
	}
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	files := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	require.NotEmpty(t, files)
	bad, err := largeBinaries(root, files)
	require.NoError(t, err)
	require.Empty(t, bad)
}

// TestLargeBinaryGuardCanFail: a binary over the limit is reported; text over it, a binary under it
// and a missing file are not.
func TestLargeBinaryGuardCanFail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, data []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	big := make([]byte, maxBinaryBytes+1)
	_, err := rand.Read(big)
	require.NoError(t, err)
	big[10] = 0
	write("compare", big)
	elf := append([]byte("\x7fELF"), bytes.Repeat([]byte("x"), maxBinaryBytes)...)
	elf[5] = 0
	write("jq", elf)
	write("plot.png", append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0xff, 0xfe}, maxBinaryBytes/2+1)...))
	write("large.sql", []byte(strings.Repeat("INSERT INTO jobs VALUES ('é');\n", maxBinaryBytes/30+1)))
	write("small.bin", big[:1024])

	bad, err := largeBinaries(dir, []string{"compare", "jq", "plot.png", "large.sql", "small.bin", "deleted"})
	require.NoError(t, err)
	require.Len(t, bad, 3, "%v", bad)
	for i, name := range []string{"compare", "jq", "plot.png"} {
		require.True(t, strings.HasPrefix(bad[i], name+": "), bad[i])
	}
}
