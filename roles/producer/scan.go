package producer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// file is one candidate found by a scan.
type file struct {
	path     string // absolute, cleaned: what the job's payload names
	rel      string // relative to the scan directory, with forward slashes (what globs match)
	size     int64
	mtimeNS  int64
	priority int32
	key      string // idempotency key: one job per file version
}

// matcher decides which files a scan takes (producer.include_globs / exclude_globs, doublestar
// syntax: ** matches any number of directories) and their priority.
type matcher struct {
	include, exclude []string
	highExts         map[string]bool // lower case, with the dot
	high, normal     int32
}

func newMatcher(include, exclude, highExts []string, high, normal int) (*matcher, error) {
	for _, g := range append(append([]string(nil), include...), exclude...) {
		if !doublestar.ValidatePattern(g) {
			return nil, fmt.Errorf("invalid glob %q", g)
		}
	}
	m := &matcher{include: include, exclude: exclude, highExts: map[string]bool{},
		high: int32(high), normal: int32(normal)} //nolint:gosec // validated 0..9
	for _, e := range highExts {
		e = strings.ToLower(e)
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		m.highExts[e] = true
	}
	return m, nil
}

// takes reports whether a file at rel is scanned: it matches an include glob and no exclude glob.
func (m *matcher) takes(rel string) bool {
	return matchAny(m.include, rel) && !matchAny(m.exclude, rel)
}

// skipsDir reports whether a whole directory is excluded ("**/node_modules" or
// "**/node_modules/**" style patterns), so the scan does not descend into it.
func (m *matcher) skipsDir(rel string) bool {
	return matchAny(m.exclude, rel) || matchAny(m.exclude, rel+"/")
}

func (m *matcher) priority(rel string) int32 {
	if m.highExts[strings.ToLower(filepath.Ext(rel))] {
		return m.high
	}
	return m.normal
}

func matchAny(globs []string, rel string) bool {
	for _, g := range globs {
		if ok, _ := doublestar.Match(g, rel); ok {
			return true
		}
	}
	return false
}

// scanStats counts one pass.
type scanStats struct {
	seen    int // regular files that matched the globs
	skipped int // vanished or unreadable (a warning each)
}

// scan walks dir and returns the files the matcher takes, in lexical order. Files that vanish or
// cannot be read, and directories that cannot be listed, are reported to warn and skipped; only a
// scan directory that cannot be read at all is an error. Symbolic links and other non-regular
// files are not followed or taken. hashContent adds the file's SHA-256 to its idempotency key
// (a file rewritten with the same size and modification time is then a new version too).
func scan(ctx context.Context, dir string, m *matcher, hashContent bool, warn func(path string, err error)) ([]file, scanStats, error) {
	var (
		out []file
		st  scanStats
	)
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, st, fmt.Errorf("scan directory %q: %w", dir, err)
	}
	info, err := os.Stat(root)
	if err != nil {
		return nil, st, fmt.Errorf("scan directory: %w", err)
	}
	if !info.IsDir() {
		return nil, st, fmt.Errorf("scan directory %s is not a directory", root)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			if path == root {
				return err
			}
			warn(path, err)
			st.skipped++
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if path == root {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			if m.skipsDir(rel) {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !m.takes(rel) {
			return nil
		}
		st.seen++
		f, err := readFile(path, rel, hashContent)
		if err != nil {
			warn(path, err)
			st.skipped++
			return nil
		}
		f.priority = m.priority(rel)
		out = append(out, f)
		return nil
	})
	if err != nil {
		return nil, st, fmt.Errorf("scan %s: %w", root, err)
	}
	return out, st, nil
}

// readFile stats a file and makes sure it can be read (a worker will have to); with hashContent
// it reads it whole.
func readFile(path, rel string, hashContent bool) (file, error) {
	fh, err := os.Open(path)
	if err != nil {
		return file{}, err
	}
	defer fh.Close()
	info, err := fh.Stat()
	if err != nil {
		return file{}, err
	}
	if !info.Mode().IsRegular() {
		return file{}, errors.New("not a regular file any more")
	}
	f := file{path: path, rel: rel, size: info.Size(), mtimeNS: info.ModTime().UnixNano()}
	var content string
	if hashContent {
		h := sha256.New()
		if _, err := io.Copy(h, fh); err != nil {
			return file{}, err
		}
		content = hex.EncodeToString(h.Sum(nil))
	} else if _, err := fh.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		return file{}, err // e.g. a directory's permissions allow the open but not the read
	}
	f.key = versionKey(f.path, f.size, f.mtimeNS, content)
	return f, nil
}

// versionKey is the idempotency key of one version of a file: the same path, size and
// modification time (and content hash, when hashed) give the same key, on every run and in every
// producer, so the server creates one job per file version.
func versionKey(path string, size, mtimeNS int64, contentHash string) string {
	h := sha256.New()
	for _, part := range []string{path, strconv.FormatInt(size, 10), strconv.FormatInt(mtimeNS, 10), contentHash} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return "file:" + hex.EncodeToString(h.Sum(nil))
}
