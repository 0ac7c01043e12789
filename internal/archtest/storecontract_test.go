package archtest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Package store is the contract between the engine and the backends, and nothing else: what the SQL
// stores share in their SQL (the list query, the claim's steps, page cutting) lives in
// store/internal/sqlstore, and a limit only the API applies lives in the API. So every exported
// name of store is one of:
//   - an interface;
//   - a type of the contract: named in the signature or the documentation of an interface's method,
//     in the signature of a Validate method, or in a field of such a type (transitively);
//   - a function that checks arguments (Validate…, Valid…, Parse…) or builds a …Params;
//   - a limit the contract's validation or its documentation names (Max…, Min…, Default…, used
//     in the package's code or an interface's documentation), or one of contractValues.
//
// Nothing whose name speaks of SQL is allowed under any of these.

// contractValues are the exported values of store that are neither limits nor checks.
var contractValues = []string{
	"AnyAttempt",  // JobTransitionParams.Attempt: no attempt check
	"DepthStates", // the states a DepthSnapshot counts
}

var (
	limitName = regexp.MustCompile(`^(Max|Min|Default)[A-Z]`)
	checkName = regexp.MustCompile(`^(Validate|Valid|Parse)[A-Z]`)
)

// storeExportProblems returns one line per exported name of the package made of files (name →
// source) that breaks the rule above.
func storeExportProblems(t *testing.T, files map[string]string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f, err := parser.ParseFile(fset, name, files[name], parser.ParseComments)
		require.NoError(t, err)
		parsed = append(parsed, f)
	}

	types := map[string]*ast.TypeSpec{}
	values := map[string]*ast.Ident{} // exported consts and vars
	var funcs []*ast.FuncDecl
	for _, f := range parsed {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						types[s.Name.Name] = s
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								values[n.Name] = n
							}
						}
					}
				}
			case *ast.FuncDecl:
				funcs = append(funcs, d)
			}
		}
	}

	// The contract's types: reachable from the interfaces' methods and the Validate methods.
	contract := map[string]bool{}
	var reach func(n ast.Node)
	reach = func(n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok || contract[id.Name] {
				return true
			}
			if ts, ok := types[id.Name]; ok {
				contract[id.Name] = true
				reach(ts.Type)
			}
			return true
		})
	}
	var interfaceDocs strings.Builder
	for name, ts := range types {
		if it, ok := ts.Type.(*ast.InterfaceType); ok {
			contract[name] = true
			reach(it)
			for _, m := range it.Methods.List {
				interfaceDocs.WriteString(m.Doc.Text())
			}
		}
	}
	for _, fd := range funcs {
		if fd.Recv != nil && fd.Name.Name == "Validate" {
			reach(fd.Type)
		}
	}
	for name, ts := range types { // an error type a method's documentation names
		if !contract[name] && regexp.MustCompile(`\b`+name+`\b`).MatchString(interfaceDocs.String()) {
			contract[name] = true
			reach(ts.Type)
		}
	}

	// Identifiers used in code, apart from their own declaration.
	used := map[string]bool{}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && values[id.Name] != id {
				used[id.Name] = true
			}
			return true
		})
	}

	var out []string
	bad := func(name, why string) { out = append(out, "store."+name+": "+why) }
	for name, ts := range types {
		switch {
		case !ts.Name.IsExported():
		case strings.Contains(name, "SQL"):
			bad(name, "SQL belongs to the SQL stores (store/internal/sqlstore)")
		case !contract[name]:
			bad(name, "a type no interface method, Validate method or contract type names")
		}
	}
	for _, fd := range funcs {
		name := fd.Name.Name
		if fd.Recv != nil || !fd.Name.IsExported() {
			continue
		}
		buildsParams := false
		if fd.Type.Results != nil {
			for _, r := range fd.Type.Results.List {
				if id, ok := r.Type.(*ast.Ident); ok && strings.HasSuffix(id.Name, "Params") {
					buildsParams = true
				}
			}
		}
		switch {
		case strings.Contains(name, "SQL"):
			bad(name, "SQL belongs to the SQL stores (store/internal/sqlstore)")
		case !checkName.MatchString(name) && !buildsParams:
			bad(name, "a function that neither checks arguments nor builds a …Params")
		}
	}
	for name := range values {
		switch {
		case strings.Contains(name, "SQL"):
			bad(name, "SQL belongs to the SQL stores (store/internal/sqlstore)")
		case slices.Contains(contractValues, name):
		case !limitName.MatchString(name):
			bad(name, "a value that is not a limit of the contract (nor in contractValues)")
		case !used[name] && !regexp.MustCompile(`\b`+name+`\b`).MatchString(interfaceDocs.String()):
			bad(name, "a limit neither the package's validation nor an interface's documentation uses "+
				"(an API default belongs to the API)")
		}
	}
	slices.Sort(out)
	return out
}

// storeFiles reads the non-test Go files of package store.
func storeFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "store")
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	files := map[string]string{}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		b, err := os.ReadFile(n)
		require.NoError(t, err)
		files[filepath.Base(n)] = string(b)
	}
	require.Greater(t, len(files), 10, "too few files of package store: the check would prove nothing")
	return files
}

// TestStoreExportsOnlyTheContract checks the exported names of package store.
func TestStoreExportsOnlyTheContract(t *testing.T) {
	t.Parallel()
	if p := storeExportProblems(t, storeFiles(t)); len(p) > 0 {
		t.Fatalf("package store exports more than the contract (see internal/archtest/storecontract_test.go):\n%s",
			strings.Join(p, "\n"))
	}
}

// TestStoreContractRuleCanFail adds to the real package, in memory, one name of each kind the rule
// keeps out, and requires each to be reported, alone.
func TestStoreContractRuleCanFail(t *testing.T) {
	t.Parallel()
	files := storeFiles(t)
	files["zz_mut.go"] = `package store

import "github.com/jq-dev/jq/queue"

// SQL the stores share.
func StateFilterSQL(states []queue.State) string { return "" }

// The step arithmetic of a claim.
type ClaimStep struct{ Limit int }

// A page cut.
func PageCut(sizes []int64, maxBytes int) int { return 0 }

// An API's default page size.
const DefaultPageSize = 50

// A SQL fragment.
const JobColumnsSQL = "id, queue"
`
	require.Equal(t, []string{
		"store.ClaimStep: a type no interface method, Validate method or contract type names",
		"store.DefaultPageSize: a limit neither the package's validation nor an interface's documentation uses (an API default belongs to the API)",
		"store.JobColumnsSQL: SQL belongs to the SQL stores (store/internal/sqlstore)",
		"store.PageCut: a function that neither checks arguments nor builds a …Params",
		"store.StateFilterSQL: SQL belongs to the SQL stores (store/internal/sqlstore)",
	}, storeExportProblems(t, files))
}
