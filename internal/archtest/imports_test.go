// Package archtest makes the import rules of docs/architecture.md executable:
// the domain depends on nothing, only roles/wire.go picks concrete backends,
// and the API layer never reaches a backend, not even transitively.
package archtest

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/jq-dev/jq"

// backends are the concrete store implementations and the drivers they wrap.
var backends = []string{
	module + "/store/postgres",
	module + "/store/redis",
	module + "/store/kafka",
	module + "/store/sqlite",
	module + "/store/memory",
	module + "/migrations",
	"github.com/jackc/pgx",
	"github.com/redis/go-redis",
	"github.com/segmentio/kafka-go",
	"github.com/golang-migrate/migrate",
}

func isBackend(path string) bool {
	for _, b := range backends {
		if path == b || strings.HasPrefix(path, b+"/") {
			return true
		}
	}
	return false
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	return root
}

// sourceFiles maps each non-test, non-generated .go file (relative path) to
// its imports.
func sourceFiles(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "tools" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out[filepath.ToSlash(rel)] = append(out[filepath.ToSlash(rel)], p)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func TestDomainImportsNothingOfTheProject(t *testing.T) {
	t.Parallel()
	require.Empty(t, domainViolations(sourceFiles(t, repoRoot(t))))
}

// domainViolations lists the imports package queue may not have: anything of the project, anything
// outside the standard library.
func domainViolations(files map[string][]string) []string {
	var out []string
	for file, imps := range files {
		if filepath.Dir(file) != "queue" {
			continue
		}
		for _, p := range imps {
			switch {
			case strings.HasPrefix(p, module):
				out = append(out, file+" imports "+p+": package queue must import nothing of the project")
			case strings.Contains(p, "."):
				out = append(out, file+" imports "+p+": package queue uses the standard library only")
			}
		}
	}
	return out
}

// allowedBackendImporters may import a concrete backend or driver directly.
func allowedBackendImporter(file string) bool {
	switch {
	case file == "roles/wire.go":
		return true
	case strings.HasPrefix(file, "store/"), strings.HasPrefix(file, "migrations/"):
		return true // the backends themselves (cross-backend imports are checked below)
	case strings.HasPrefix(file, "internal/testenv/"):
		return true // test infrastructure
	case strings.HasPrefix(file, "examples/"):
		return true // runnable programs are free to wire their own
	case strings.HasPrefix(file, "client/jqpgx/"):
		return true // the transactional insert into the application's own pgx transaction, by design
	}
	return false
}

func TestOnlyWireImportsBackends(t *testing.T) {
	t.Parallel()
	require.Empty(t, backendImportViolations(sourceFiles(t, repoRoot(t))))
}

// backendImportViolations lists the files that import a concrete backend without being allowed to.
func backendImportViolations(files map[string][]string) []string {
	var out []string
	for file, imps := range files {
		for _, p := range imps {
			if isBackend(p) && !allowedBackendImporter(file) {
				out = append(out, file+" imports backend "+p+"; only roles/wire.go may")
			}
		}
	}
	return out
}

// TestRulesCatchForbiddenImports mutates a copy of the tree: a file that breaks each rule is added
// to a temporary tree, and the rule must report it (a rule that cannot fail proves nothing).
func TestRulesCatchForbiddenImports(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	write := func(rel, src string) {
		path := filepath.Join(tmp, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	}
	write("queue/ok.go", "package queue\n\nimport \"errors\"\n\nvar _ = errors.New\n")
	write("roles/wire.go", "package roles\n\nimport _ \"github.com/jackc/pgx/v5\"\n")
	clean := sourceFiles(t, tmp)
	require.Empty(t, domainViolations(clean))
	require.Empty(t, backendImportViolations(clean))

	write("queue/bad.go", "package queue\n\nimport _ \""+module+"/store\"\n")
	write("api/server/bad.go", "package server\n\nimport _ \"github.com/redis/go-redis/v9\"\n")
	mutated := sourceFiles(t, tmp)
	require.Len(t, domainViolations(mutated), 1)
	require.Contains(t, domainViolations(mutated)[0], "queue/bad.go")
	require.Len(t, backendImportViolations(mutated), 1)
	require.Contains(t, backendImportViolations(mutated)[0], "api/server/bad.go")
}

func TestBackendsDoNotImportEachOther(t *testing.T) {
	t.Parallel()
	for file, imps := range sourceFiles(t, repoRoot(t)) {
		dir := filepath.Dir(file)
		if !strings.HasPrefix(dir, "store/") || dir == "store/storetest" {
			continue
		}
		for _, p := range imps {
			if strings.HasPrefix(p, module+"/store/") && p != module+"/store/"+strings.TrimPrefix(dir, "store/") {
				require.Failf(t, "backends import each other", "%s imports %s", file, p)
			}
		}
	}
}

// TestAPINeverReachesABackend checks the transitive closure, so a helper
// package cannot smuggle a driver into the API layer, nor into the Go client
// that applications import (only its client/jqpgx adds pgx, on purpose).
func TestAPINeverReachesABackend(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath", "./api/...", "./client", "./queue", "./store")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", exitErr(err))
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for dec.More() {
		var p struct{ ImportPath string }
		require.NoError(t, dec.Decode(&p))
		require.Falsef(t, isBackend(p.ImportPath), "api/, client, queue or store depends on backend %s", p.ImportPath)
		n++
	}
	require.Greater(t, n, 10, "go list returned too few packages; the check would prove nothing")
}

func exitErr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
