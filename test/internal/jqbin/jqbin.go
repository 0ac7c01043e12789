// Package jqbin builds the jq binary for the binary-level tests under test/ and runs it: each test
// package builds it once, on the first test that needs it, and removes it when the package ends
// (Main). A process under test gets its ports from testenv.PickPort and its own Postgres database
// and Redis key prefix; its stdout (JSON log lines) is kept for WaitLog and Output.
package jqbin

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Parallel is the default -parallel of a package of binary-level tests. Their tests spend most of
// their time waiting on other processes (servers, workers, private Postgres and redis-server) and
// on wall-clock windows: at go test's default, GOMAXPROCS (2 on CI's machine), the binary-level
// tests (then one package) took 234 s alone while the test binary and its jq processes used 82 s
// of CPU. At 8 in one package they took 79 s alone, but beside the suite's other packages every
// test took two to three times as long and two throughput-bound tests missed their bounds. 4 per
// package: test/e2e and test/faults side by side (8 at once) passed on 2 cores at load 23. An
// explicit -parallel wins.
const Parallel = 4

var build struct {
	once sync.Once
	dir  string // the temporary directory of the binary
	path string
	err  error
}

// Main runs the tests of a package (from its TestMain) with Parallel as the default -parallel,
// removes the binary afterwards and returns the exit code.
func Main(m *testing.M) int {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(Parallel)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	code := m.Run()
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
	return code
}

// Path returns the jq binary, building it on the first call: with -race, except under the abuse
// suite (JQ_TEST_ABUSE=1), which measures the server's memory and CPU that a race build
// multiplies. Built on demand, a package whose selected tests (-run) need no binary builds none.
func Path(tb testing.TB) string {
	tb.Helper()
	build.once.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			build.err = err
			return
		}
		if build.dir, err = os.MkdirTemp("", "jq-e2e-"); err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(build.dir, "jq")
		args := []string{"build", "-race", "-o", build.path, "."}
		if os.Getenv("JQ_TEST_ABUSE") == "1" {
			args = []string{"build", "-o", build.path, "."}
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("build jq: %w\n%s", err, out)
		}
	})
	if build.err != nil {
		tb.Fatal(build.err)
	}
	return build.path
}

// ModuleRoot is the directory of the module's go.mod: the repository root, where the docs and
// the main package are.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside the module")
	}
	return filepath.Dir(mod), nil
}

// Result is what a command of the binary that ran to its end did.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Run runs the binary with args and extra environment variables and returns its exit code and
// output.
func Run(t *testing.T, env []string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(Path(t), args...)
	cmd.Env = append(os.Environ(), QuickExit())
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("jq %v: %v", args, err)
	}
	return r
}

// QuickExit is the GORACE setting that spares a short command of the race binary the race
// runtime's one-second sleep at exit.
func QuickExit() string {
	return "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")
}
