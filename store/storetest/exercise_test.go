package storetest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/store"
)

// entryPoints are the package's only exported functions that run tests.
var entryPoints = []string{"Exercise", "ExerciseDispatcher"}

// TestExerciseRunsEverySuite: every function of the package shaped func(*testing.T, Factory) is a
// suite, and Exercise's table runs each of them once; no suite is exported, so a backend cannot run
// one without the others.
func TestExerciseRunsEverySuite(t *testing.T) {
	t.Parallel()
	declared, exported, err := scanSuites(os.DirFS("."))
	require.NoError(t, err)
	require.NotEmpty(t, declared, "the scan found no suite: it is broken")
	require.NoError(t, checkSuites(declared, exported, wiredSuites(storeSuites)))
}

// The guard fails when a suite is taken out of Exercise's table, when a suite is declared and not
// wired, and when a suite is exported.
func TestExerciseGuardFails(t *testing.T) {
	t.Parallel()
	declared, exported, err := scanSuites(os.DirFS("."))
	require.NoError(t, err)

	without := slices.DeleteFunc(slices.Clone(storeSuites), func(s suite) bool { return s.name == "RecoveryStore" })
	require.ErrorContains(t, checkSuites(declared, exported, wiredSuites(without)),
		"recoverySuite is a suite Exercise does not run")

	twice := append(slices.Clone(storeSuites), storeSuites[0])
	require.ErrorContains(t, checkSuites(declared, exported, wiredSuites(twice)), "pingSuite runs 2 times")

	for file, want := range map[string]string{
		"extra.go":    "fooSuite is a suite Exercise does not run",
		"exported.go": "RunFoo is exported",
	} {
		src := map[string]string{
			"extra.go":    "package storetest\n\nimport \"testing\"\n\nfunc fooSuite(t *testing.T, f Factory) {}\n",
			"exported.go": "package storetest\n\nimport \"testing\"\n\nfunc RunFoo(t *testing.T, newStore NewStoreFunc) {}\n",
		}[file]
		fsys := overlay(t, os.DirFS("."), file, src)
		declared, exported, err := scanSuites(fsys)
		require.NoError(t, err)
		require.ErrorContains(t, checkSuites(declared, exported, wiredSuites(storeSuites)), want, file)
	}
}

// TestEveryBackendExercised: a package of store/ that implements store.Store calls Exercise from
// exactly one of its tests, and one that implements store.Dispatcher ExerciseDispatcher.
func TestEveryBackendExercised(t *testing.T) {
	t.Parallel()
	found, err := checkBackends(os.DirFS(".."))
	require.NoError(t, err)
	// The scan recognises the backends there are today; a new one is checked without being listed.
	require.Subset(t, found["Exercise"], []string{"postgres", "sqlite"}, "the scan no longer recognises a store")
	require.Subset(t, found["ExerciseDispatcher"], []string{"memory", "redis"}, "the scan no longer recognises a dispatcher")
}

// The backend guard fails for a store whose tests do not call Exercise, or call it twice.
func TestEveryBackendExercisedFails(t *testing.T) {
	t.Parallel()
	var impl strings.Builder
	impl.WriteString("package fake\n\ntype Store struct{}\n\n")
	for m := range reflect.TypeFor[store.Store]().Methods() {
		fmt.Fprintf(&impl, "func (*Store) %s() {}\n", m.Name)
	}
	call := "\tstoretest.Exercise(t, nil)\n"
	for calls, want := range map[int]string{0: "fake implements store.Store and calls storetest.Exercise 0 times", 1: "", 2: "2 times"} {
		fsys := fstest.MapFS{
			"fake/store.go":      {Data: []byte(impl.String())},
			"fake/store_test.go": {Data: []byte("package fake_test\n\nfunc TestStore(t *testing.T) {\n" + strings.Repeat(call, calls) + "}\n")},
		}
		found, err := checkBackends(fsys)
		if want == "" {
			require.NoError(t, err)
			require.Equal(t, []string{"fake"}, found["Exercise"])
			continue
		}
		require.ErrorContains(t, err, want)
	}
}

// scanSuites returns the suites the package's files declare (functions shaped
// func(*testing.T, Factory)) and its exported functions that take a *testing.T first, other than
// the entry points.
func scanSuites(fsys fs.FS) (suites, exported []string, err error) {
	files, err := parseDir(fsys, ".", false)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil {
				continue
			}
			params := paramTypes(fn.Type)
			if slices.Contains(entryPoints, fn.Name.Name) || len(params) == 0 || !isSelector(params[0], "*", "testing", "T") {
				continue
			}
			if len(params) == 2 && isIdent(params[1], "Factory") {
				suites = append(suites, fn.Name.Name)
			}
			if fn.Name.IsExported() {
				exported = append(exported, fn.Name.Name)
			}
		}
	}
	return suites, exported, nil
}

// wiredSuites returns the names of the functions a table runs.
func wiredSuites(suites []suite) []string {
	names := make([]string, len(suites))
	for i, s := range suites {
		full := runtime.FuncForPC(reflect.ValueOf(s.run).Pointer()).Name()
		names[i] = full[strings.LastIndex(full, ".")+1:]
	}
	return names
}

func checkSuites(declared, exported, wired []string) error {
	var errs []string
	for _, d := range declared {
		switch n := count(wired, d); n {
		case 0:
			errs = append(errs, d+" is a suite Exercise does not run: add it to storeSuites")
		case 1:
		default:
			errs = append(errs, fmt.Sprintf("%s runs %d times in storeSuites", d, n))
		}
	}
	for _, w := range wired {
		if !slices.Contains(declared, w) {
			errs = append(errs, w+" is in storeSuites but not a top-level func(*testing.T, Factory) of the package")
		}
	}
	for _, e := range exported {
		errs = append(errs, e+" is exported: a backend could run it alone; run it from Exercise instead")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// checkBackends finds the packages of fsys (store/) that implement store.Store or store.Dispatcher
// — a type declaring every method of the interface — and requires each to call the entry point from
// exactly one place in its tests. It returns the packages found, by entry point.
func checkBackends(fsys fs.FS) (map[string][]string, error) {
	contracts := []struct {
		iface reflect.Type
		entry string
	}{
		{reflect.TypeFor[store.Store](), "Exercise"},
		{reflect.TypeFor[store.Dispatcher](), "ExerciseDispatcher"},
	}
	dirs, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	found := map[string][]string{}
	var errs []string
	for _, dir := range dirs {
		// storewrap is no backend but the decorator over each: every backend's factory wraps its
		// store, so every Exercise runs through it.
		if !dir.IsDir() || dir.Name() == "storetest" || dir.Name() == "storewrap" || dir.Name() == "testdata" {
			continue
		}
		src, err := parseDir(fsys, dir.Name(), false)
		if err != nil {
			return nil, err
		}
		tests, err := parseDir(fsys, dir.Name(), true)
		if err != nil {
			return nil, err
		}
		methods := methodsByType(src)
		for _, c := range contracts {
			if !implements(methods, c.iface) {
				continue
			}
			found[c.entry] = append(found[c.entry], dir.Name())
			if n := countCalls(tests, "storetest", c.entry); n != 1 {
				errs = append(errs, fmt.Sprintf("%s implements %v and calls storetest.%s %d times in its tests, not once",
					dir.Name(), c.iface, c.entry, n))
			}
		}
	}
	if len(errs) > 0 {
		return found, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return found, nil
}

// parseDir parses the Go files of dir: its tests, or the others.
func parseDir(fsys fs.FS, dir string, tests bool) ([]*ast.File, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") != tests {
			continue
		}
		data, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path.Join(dir, name), data, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func paramTypes(ft *ast.FuncType) []ast.Expr {
	var out []ast.Expr
	for _, f := range ft.Params.List {
		for range max(1, len(f.Names)) {
			out = append(out, f.Type)
		}
	}
	return out
}

// isSelector reports whether e is pkg.Name, behind a pointer when ptr is "*".
func isSelector(e ast.Expr, ptr, pkg, name string) bool {
	if ptr == "*" {
		star, ok := e.(*ast.StarExpr)
		if !ok {
			return false
		}
		e = star.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	return ok && isIdent(sel.X, pkg) && sel.Sel.Name == name
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// methodsByType returns the names of the methods the files declare, by receiver type.
func methodsByType(files []*ast.File) map[string][]string {
	out := map[string][]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			switch r := recv.(type) {
			case *ast.IndexExpr:
				recv = r.X
			case *ast.IndexListExpr:
				recv = r.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				out[id.Name] = append(out[id.Name], fn.Name.Name)
			}
		}
	}
	return out
}

// implements reports whether one of the types declares every method of iface (by name: the
// compiler checks the signatures where the backend is used).
func implements(methods map[string][]string, iface reflect.Type) bool {
	for _, ms := range methods {
		all := true
		for m := range iface.Methods() {
			all = all && slices.Contains(ms, m.Name)
		}
		if all {
			return true
		}
	}
	return false
}

func countCalls(files []*ast.File, pkg, name string) int {
	n := 0
	for _, f := range files {
		ast.Inspect(f, func(node ast.Node) bool {
			if call, ok := node.(*ast.CallExpr); ok && isSelector(call.Fun, "", pkg, name) {
				n++
			}
			return true
		})
	}
	return n
}

func count[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// overlay returns the files of fsys's root with one file added.
func overlay(t *testing.T, fsys fs.FS, name, src string) fs.FS {
	t.Helper()
	out := fstest.MapFS{name: {Data: []byte(src)}}
	entries, err := fs.ReadDir(fsys, ".")
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := fs.ReadFile(fsys, e.Name())
		require.NoError(t, err)
		out[e.Name()] = &fstest.MapFile{Data: data}
	}
	return out
}

// onlyStore has the method set of store.Store and of no optional interface.
type onlyStore struct{ store.Store }

// A store without an optional interface fails the suites needing it unless its factory declares the
// lack, which skips them; a declaration the store does not need fails.
func TestPlanSuites(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[onlyStore]()
	fates := func(plan []planned) map[string]string {
		out := map[string]string{}
		for _, p := range plan {
			out[p.name] = "run"
			if p.skip != "" {
				out[p.name] = "skip"
			}
			if p.fail != "" {
				out[p.name] = "fail"
			}
		}
		return out
	}

	plan, err := planSuites(storeSuites, typ, nil)
	require.NoError(t, err)
	got := fates(plan)
	require.Equal(t, "run", got["Queue"])
	require.Equal(t, "fail", got["DispatchStore"])
	require.Equal(t, "fail", got["ConstraintStore"])
	require.Contains(t, plan[slices.IndexFunc(plan, func(p planned) bool { return p.name == "DepthStore" })].fail,
		"does not implement store.DepthStore, which suite DepthStore needs")

	all := []reflect.Type{dispatchStore, recoveryStore, operatorStore, progressStore, retentionStore, outboxStore,
		eventFeed, scheduleStore, adminStore, depthStore, constraintStore}
	plan, err = planSuites(storeSuites, typ, all)
	require.NoError(t, err)
	got = fates(plan)
	require.Equal(t, "run", got["WorkerLimit"])
	require.Equal(t, "skip", got["DispatchStore"])
	require.Equal(t, "skip", got["AdminStore"])
	require.NotContains(t, slices.Collect(maps.Values(got)), "fail")

	_, err = planSuites(storeSuites, typ, []reflect.Type{iface[store.QueueStore]()})
	require.ErrorContains(t, err, "lacks store.QueueStore, which it implements")
}
