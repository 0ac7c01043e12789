package archtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/archtest"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	return root
}

// load lists every package of the module and its dependencies with one `go list -deps`; overlay
// (file → source) adds or replaces files, as `go list -overlay` does, without touching the tree.
func load(t *testing.T, root string, overlay map[string]string) []archtest.Package {
	t.Helper()
	args := []string{"list", "-e", "-deps", "-json=ImportPath,Standard,Imports,Dir,GoFiles,Error"}
	replace := map[string]string{} // absolute path in the tree → file holding its source
	if len(overlay) > 0 {
		dir := t.TempDir()
		for rel, src := range overlay {
			f := filepath.Join(dir, strconv.Itoa(len(replace))+".go")
			require.NoError(t, os.WriteFile(f, []byte(src), 0o600))
			replace[filepath.Join(root, filepath.FromSlash(rel))] = f
		}
		b, err := json.Marshal(map[string]any{"Replace": replace})
		require.NoError(t, err)
		cfg := filepath.Join(dir, "overlay.json")
		require.NoError(t, os.WriteFile(cfg, b, 0o600))
		args = append(args, "-overlay", cfg)
	}
	cmd := exec.Command("go", append(args, "./...")...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())

	var pkgs []archtest.Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			archtest.Package
			Dir     string
			GoFiles []string
			Error   *struct{ Err string }
		}
		require.NoError(t, dec.Decode(&p))
		if len(overlay) == 0 && p.Error != nil {
			require.Failf(t, "go list", "%s: %s", p.ImportPath, p.Error.Err)
		}
		if p.ImportPath == archtest.Module+"/roles" {
			p.Files = fileImports(t, root, p.Dir, p.GoFiles, replace)
		}
		pkgs = append(pkgs, p.Package)
	}
	require.Greater(t, len(pkgs), 100, "go list returned too few packages; the check would prove nothing")
	return pkgs
}

// fileImports parses the imports of each file (module-relative path → import paths).
func fileImports(t *testing.T, root, dir string, files []string, replace map[string]string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		path := filepath.Join(dir, name)
		src := path
		if r, ok := replace[path]; ok {
			src = r
		}
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, path, b, parser.ImportsOnly)
		require.NoError(t, err)
		rel, err := filepath.Rel(root, path)
		require.NoError(t, err)
		imps := []string{}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			imps = append(imps, p)
		}
		out[filepath.ToSlash(rel)] = imps
	}
	return out
}

// TestImportTable checks every edge of the module against the table.
func TestImportTable(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	if v := archtest.Check(archtest.Table, load(t, root, nil)); len(v) > 0 {
		t.Fatalf("the import rules are broken (internal/archtest/table.go):\n%s", strings.Join(v, "\n"))
	}
}

// mutation adds one file that breaks one rule.
type mutation struct {
	file, pkg, imp string
	want           string // a fragment of the one violation it must cause
}

func (m mutation) source() string {
	return fmt.Sprintf("package %s\n\nimport _ %q\n", m.pkg, m.imp)
}

// TestEveryRuleCanFail adds forbidden imports to the real tree through an overlay (the tree itself is
// not touched) and requires each to be reported, alone and by name: a rule that cannot fail proves
// nothing. All mutations share one `go list`.
func TestEveryRuleCanFail(t *testing.T) {
	t.Parallel()
	const m = archtest.Module + "/"
	mutations := []mutation{
		// queue imports nothing of the project (this one is also an import cycle: go list -e still lists it).
		{"queue/zz_mut.go", "queue", m + "store", "queue imports " + m + "store: not in its row"},
		// queue uses the standard library only.
		{"queue/zz_mut2.go", "queue", "go.uber.org/zap", "queue imports go.uber.org/zap: this layer uses the standard library only"},
		// store is interfaces over the domain.
		{"store/zz_mut.go", "store", "google.golang.org/protobuf/proto", "store imports google.golang.org/protobuf/proto: a third-party"},
		// queue/* never imports the API.
		{"queue/maintenance/zz_mut.go", "maintenance", m + "api/server", "queue/maintenance imports " + m + "api/server: not in its row"},
		{"queue/executor/zz_mut.go", "executor", m + "api/rpcclient", "queue/executor imports " + m + "api/rpcclient: not in its row"},
		{"queue/outbox/zz_mut.go", "outbox", m + "api", "queue/outbox imports " + m + "api: not in its row"},
		// queue/* never imports a backend.
		{"queue/engine/zz_mut.go", "engine", m + "store/redis", "queue/engine imports " + m + "store/redis: not in its row"},
		// Backends import only store and queue: not the engine, not each other, not another driver.
		{"store/postgres/zz_mut.go", "postgres", m + "queue/engine", "store/postgres imports " + m + "queue/engine: not in its row"},
		{"store/redis/zz_mut.go", "redis", m + "store/postgres", "store/redis imports " + m + "store/postgres: not in its row"},
		{"store/kafka/zz_mut.go", "kafka", "github.com/jackc/pgx/v5", "store/kafka imports github.com/jackc/pgx/v5: a driver"},
		// The API's server side never imports a backend or a driver.
		{"api/server/zz_mut.go", "server", m + "store/postgres", "api/server imports " + m + "store/postgres: not in its row"},
		{"api/server/zz_mut2.go", "server", "github.com/redis/go-redis/v9", "api/server imports github.com/redis/go-redis/v9: a driver"},
		// The console calls the API like a client: no store, no engine.
		{"api/console/zz_mut.go", "console", m + "queue/engine", "api/console imports " + m + "queue/engine: not in its row"},
		// In package roles only wire.go names a backend.
		{"roles/zz_mut.go", "roles", m + "store/postgres", "roles/zz_mut.go imports " + m + "store/postgres: in package roles only roles/wire.go"},
		// A role package stays on its side of the API.
		{"roles/worker/zz_mut.go", "worker", m + "store", "roles/worker imports " + m + "store: not in its row"},
		// A new package must be given a row.
		{"queue/newpart/zz_mut.go", "newpart", "errors", "queue/newpart has no row"},
	}
	overlay := map[string]string{}
	for _, mu := range mutations {
		overlay[mu.file] = mu.source()
	}
	root := repoRoot(t)
	got := archtest.Check(archtest.Table, load(t, root, overlay))

	var unexplained []string
	for _, v := range got {
		n := 0
		for _, mu := range mutations {
			if strings.Contains(v, mu.want) {
				n++
			}
		}
		// A backend added below a Sealed package also shows in the closure of its importers.
		for _, mu := range mutations {
			if strings.Contains(v, "depends on a backend") && strings.HasSuffix(v, " → "+mu.imp) {
				n++
			}
		}
		if n == 0 {
			unexplained = append(unexplained, v)
		}
	}
	require.Empty(t, unexplained, "violations no mutation caused")
	for _, mu := range mutations {
		n := 0
		for _, v := range got {
			if strings.Contains(v, mu.want) {
				n++
			}
		}
		require.Equal(t, 1, n, "adding %s to %s must be reported once (%q); got:\n%s", mu.imp, mu.file, mu.want, strings.Join(got, "\n"))
	}
}

// TestCheckOnAGraph runs Check on small graphs for what the overlay cannot add: a row without a
// package, a package in two rows, and a dependency on a backend through a third party.
func TestCheckOnAGraph(t *testing.T) {
	t.Parallel()
	m := archtest.Module + "/"
	std := archtest.Package{ImportPath: "errors", Standard: true}
	table := []archtest.Row{
		{Pkgs: []string{"queue"}, Third: []string{}},
		{Pkgs: []string{"api"}, May: []string{"queue"}},
		{Pkgs: []string{"gone"}},
		{Pkgs: []string{"soon"}, Planned: true},
	}
	got := archtest.Check(table, []archtest.Package{
		std,
		{ImportPath: m + "queue", Imports: []string{"errors"}},
		{ImportPath: m + "api", Imports: []string{m + "queue", "example.com/helper"}},
		{ImportPath: "example.com/helper", Imports: []string{"github.com/jackc/pgx/v5"}},
		{ImportPath: "github.com/jackc/pgx/v5"},
	})
	require.Equal(t, []string{
		"api depends on a backend: " + m + "api → example.com/helper → github.com/jackc/pgx/v5",
		"the import table's row [gone] matches no package: remove or fix it",
	}, got)

	twice := []archtest.Row{table[0], table[1], {Pkgs: []string{"api/..."}}}
	got = archtest.Check(twice, []archtest.Package{std, {ImportPath: m + "queue"}, {ImportPath: m + "api"}})
	require.Equal(t, []string{"api matches 2 rows of the import table; it must match one"}, got)
}
