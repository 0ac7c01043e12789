package handlers

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/jq-dev/jq/queue"
)

// Errors of the exec handler's gate. Both are permanent failures: another
// attempt on the same worker fleet cannot succeed.
var (
	// ErrExecDisabled: the worker runs no programs; see [ExecDisabled].
	ErrExecDisabled = errors.New("exec handler is disabled on this worker (worker.exec.enabled)")
	// ErrExecNotAllowed: the job's program is not in the allow-list
	// (ExecOptions.Allow, worker.exec.allow).
	ErrExecNotAllowed = errors.New("not in worker.exec.allow")
)

// ExecDisabled is the exec handler of a worker that runs no programs (the
// default: with exec on, whoever can submit a job runs programs on the
// worker). Every job fails permanently with [ErrExecDisabled], so it is
// dead-lettered at once with a message saying why, like a job of an unknown
// type, instead of being retried.
func ExecDisabled() queue.Handler {
	return queue.HandlerFunc(func(context.Context, *queue.Job) ([]byte, error) {
		return nil, queue.Permanent(ErrExecDisabled)
	})
}

// allowList is the set of programs the exec handler may run: cleaned
// absolute paths.
type allowList map[string]struct{}

// newAllowList cleans each path; a relative entry is kept but can never
// match, since argv[0] must be absolute (config validation refuses one).
func newAllowList(paths []string) allowList {
	a := make(allowList, len(paths))
	for _, p := range paths {
		a[filepath.Clean(p)] = struct{}{}
	}
	return a
}

// check returns the program to run for argv[0]: its filepath.Clean form when
// that is exactly an entry of the list. A relative argv[0] is refused rather
// than looked up in PATH, which the payload may set: what runs must not
// depend on the worker's or the job's PATH. Symbolic links are not resolved:
// on a merged-/usr system /bin/sh and /usr/bin/sh are different entries.
// Running the cleaned path (not argv[0] as given) keeps a "dir/../" through a
// symbolic link from reaching a program outside the list.
func (a allowList) check(argv0 string) (string, error) {
	if !filepath.IsAbs(argv0) {
		return "", queue.Permanent(fmt.Errorf("exec: %q is %w: argv[0] must be an absolute path (no PATH lookup)", argv0, ErrExecNotAllowed))
	}
	prog := filepath.Clean(argv0)
	if _, ok := a[prog]; !ok {
		return "", queue.Permanent(fmt.Errorf("exec: %s is %w", prog, ErrExecNotAllowed))
	}
	return prog, nil
}
