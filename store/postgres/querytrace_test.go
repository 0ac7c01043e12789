package postgres

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQueryName(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"-- name: job_ack_many\nWITH input AS (": "job_ack_many",
		"\n  -- name: x \r\nSELECT 1":            "x",
		"SELECT 1":                               UnnamedQuery,
		"-- a comment\nSELECT 1":                 UnnamedQuery,
		"-- name: ":                              UnnamedQuery,
		"":                                       UnnamedQuery,
	} {
		require.Equal(t, want, QueryName(sql), "%q", sql)
	}
}

// TestStatementsNamed: every sql… constant or variable of the package starts with a name comment (a fragment
// that is only ever appended to a named statement is exempt), and no two share a name.
func TestStatementsNamed(t *testing.T) {
	t.Parallel()
	fragments := map[string]bool{"sqlLeaseOutcomes": true, "sqlQueueInsert": true, "sqlAssignedEvents": true,
		"sqlFeedVisible": true, "sqlNewestEvent": true}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	consts := map[string]ast.Expr{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if i < len(vs.Values) {
						consts[id.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	names := map[string]string{}
	for c, expr := range consts {
		if !strings.HasPrefix(c, "sql") || fragments[c] {
			continue
		}
		name := QueryName(leading(t, consts, expr))
		require.NotEqual(t, UnnamedQuery, name, "%s has no leading -- name: comment", c)
		require.NotContains(t, names, name, "%s and %s share the name %q", c, names[name], name)
		names[name] = c
	}
	require.Greater(t, len(names), 40)
}

// leading returns the leftmost string literal of a constant expression (a concatenation), following
// the package's own constants and variables: the name comment comes first.
func leading(t *testing.T, consts map[string]ast.Expr, e ast.Expr) string {
	t.Helper()
	switch e := e.(type) {
	case *ast.BasicLit:
		s, err := strconv.Unquote(e.Value)
		require.NoError(t, err)
		return s
	case *ast.BinaryExpr:
		return leading(t, consts, e.X)
	case *ast.ParenExpr:
		return leading(t, consts, e.X)
	case *ast.CallExpr: // these builders write the name comment of their first argument
		if f, ok := e.Fun.(*ast.Ident); ok && (f.Name == "eventRangeSQL" || f.Name == "sqlConstraintCandidates" || f.Name == "claimVariant") {
			return "-- name: " + leading(t, consts, e.Args[0]) + "\n"
		}
	case *ast.Ident:
		if v, ok := consts[e.Name]; ok {
			return leading(t, consts, v)
		}
	}
	return ""
}
