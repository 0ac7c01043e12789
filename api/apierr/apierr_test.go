package apierr_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/api/apierr"
	"github.com/jq-dev/jq/queue"
)

// TestReasonsUnique: a reason names one row, and a sentinel has one row; a row's Err never
// matches another row's (errors.Is), so the first-match lookup has no row shadowing another.
func TestReasonsUnique(t *testing.T) {
	t.Parallel()
	upperSnake := regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)
	byReason := map[string]int{}
	for i, r := range apierr.Table {
		require.NotNil(t, r.Err, "row %d", i)
		require.Regexp(t, upperSnake, r.Reason, "row %d", i)
		require.NotZero(t, r.Code, "row %d (%s): OK is not an error", i, r.Reason)
		if j, dup := byReason[r.Reason]; dup {
			t.Errorf("rows %d and %d share the reason %s", j, i, r.Reason)
		}
		byReason[r.Reason] = i
		for j, o := range apierr.Table {
			if j != i && errors.Is(r.Err, o.Err) {
				t.Errorf("row %d (%s) matches row %d (%s)", i, r.Reason, j, o.Reason)
			}
		}
	}
}

// TestLookupAndReason: a wrapped sentinel finds its row; the row's connect error carries the reason
// and the message, and Sentinel reads the reason back.
func TestLookupAndReason(t *testing.T) {
	t.Parallel()
	for _, r := range apierr.Table {
		got, ok := apierr.Lookup(fmt.Errorf("context: %w", r.Err))
		require.True(t, ok, r.Reason)
		require.Equal(t, r.Reason, got.Reason)

		ce := r.Error("one line")
		require.Equal(t, r.Code, ce.Code())
		require.Equal(t, "one line", ce.Message())
		require.Equal(t, r.Reason, apierr.Reason(fmt.Errorf("call: %w", ce)))
		require.Equal(t, r.Err, apierr.Sentinel(ce)) //nolint:testifylint // the very sentinel, not a match

		got, ok = apierr.ByReason(r.Reason)
		require.True(t, ok)
		require.Equal(t, r.Err, got.Err) //nolint:testifylint // the very sentinel
	}
	_, ok := apierr.Lookup(errors.New("unexpected"))
	require.False(t, ok)
	require.Empty(t, apierr.Reason(connect.NewError(connect.CodeNotFound, errors.New("no detail"))))
	require.Nil(t, apierr.Sentinel(errors.New("not a connect error")))
	require.Equal(t, connect.CodeInternal, apierr.New(errors.New("no row"), "m").Code())
}

// notOnTheWire are the sentinels of package queue that never reach the API: a handler's own
// errors, judged by the worker and recorded as a job's failure, not returned by a call.
var notOnTheWire = map[string]bool{
	"ErrUnknownJobType": true,
	"ErrOutputTooLarge": true,
	"ErrBadPayload":     true,
}

// TestEveryQueueSentinelHasARow: every Err… variable of package queue is in the table (or listed
// in notOnTheWire), so a new sentinel cannot reach a client as an unexplained UNAVAILABLE.
func TestEveryQueueSentinelHasARow(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../queue/*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	require.Greater(t, len(names), 15, "the parse found the sentinels")
	mapped := map[string]bool{}
	for _, r := range apierr.Table {
		for name, s := range queueSentinels {
			if r.Err == s { //nolint:errorlint // the very sentinel
				mapped[name] = true
			}
		}
	}
	for _, n := range names {
		_, known := queueSentinels[n]
		require.True(t, known || notOnTheWire[n], "queue.%s: add it to queueSentinels in this test and a row to the table", n)
		require.True(t, mapped[n] || notOnTheWire[n], "queue.%s has no row in apierr.Table", n)
	}
}

var queueSentinels = map[string]error{
	"ErrJobNotFound":           queue.ErrJobNotFound,
	"ErrQueueNotFound":         queue.ErrQueueNotFound,
	"ErrQueueExists":           queue.ErrQueueExists,
	"ErrQueueNotEmpty":         queue.ErrQueueNotEmpty,
	"ErrWorkerNotFound":        queue.ErrWorkerNotFound,
	"ErrIllegalTransition":     queue.ErrIllegalTransition,
	"ErrStaleAttempt":          queue.ErrStaleAttempt,
	"ErrIdempotencyConflict":   queue.ErrIdempotencyConflict,
	"ErrInvalidArgument":       queue.ErrInvalidArgument,
	"ErrPermissionDenied":      queue.ErrPermissionDenied,
	"ErrUnauthenticated":       queue.ErrUnauthenticated,
	"ErrShutdown":              queue.ErrShutdown,
	"ErrLimitReached":          queue.ErrLimitReached,
	"ErrConstraintNotFound":    queue.ErrConstraintNotFound,
	"ErrConstraintExists":      queue.ErrConstraintExists,
	"ErrWorkerLost":            queue.ErrWorkerLost,
	"ErrWorkerDraining":        queue.ErrWorkerDraining,
	"ErrSessionReplaced":       queue.ErrSessionReplaced,
	"ErrScheduleNotFound":      queue.ErrScheduleNotFound,
	"ErrScheduleExists":        queue.ErrScheduleExists,
	"ErrScheduleOwnedByConfig": queue.ErrScheduleOwnedByConfig,
}
