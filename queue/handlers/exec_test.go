//go:build linux

package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/handlers"
)

func execJob(t *testing.T, p handlers.ExecPayload) *queue.Job {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	return job("exec", string(b))
}

// bin is the absolute path of a program from the test's PATH.
func bin(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(p), p)
	return p
}

// allowing returns the exec handler allowed to run exactly the named
// programs (resolved with bin).
func allowing(t *testing.T, names ...string) queue.Handler {
	t.Helper()
	return handlers.ExecWith(handlers.ExecOptions{Allow: bins(t, names...)})
}

func bins(t *testing.T, names ...string) []string {
	t.Helper()
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = bin(t, n)
	}
	return out
}

func TestExecSuccess(t *testing.T) {
	t.Parallel()
	out, err := allowing(t, "echo").Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{bin(t, "echo"), "hello", "world"}}))
	require.NoError(t, err)
	require.Equal(t, "hello world\n", string(out))
}

func TestExecStdinEnvDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h := handlers.ExecWith(handlers.ExecOptions{Allow: bins(t, "sh"), EnvAllow: []string{"GREET*"}})
	out, err := h.Handle(t.Context(), execJob(t, handlers.ExecPayload{
		Argv:  []string{bin(t, "sh"), "-c", `read line; printf '%s|%s|%s|%s' "$line" "$GREETING" "$(pwd)" "${HOME:-nohome}"`},
		Stdin: "from stdin\n",
		Env:   map[string]string{"GREETING": "hi there"},
		Dir:   dir,
	}))
	require.NoError(t, err)
	resolved, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	// The base environment is minimal: HOME of the worker does not leak in.
	require.Equal(t, "from stdin|hi there|"+resolved+"|nohome", string(out))
}

func TestExecArgvIsNotAShell(t *testing.T) {
	t.Parallel()
	out, err := allowing(t, "echo").Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{bin(t, "echo"), "$HOME", "; ls", "*"}}))
	require.NoError(t, err)
	require.Equal(t, "$HOME ; ls *\n", string(out))
}

func TestExecNonZeroExit(t *testing.T) {
	t.Parallel()
	// More than the tail limit on stderr: only the end is kept.
	script := `i=0; while [ $i -lt 400 ]; do echo "noise line $i" >&2; i=$((i+1)); done; echo "the real problem" >&2; exit 3`
	_, err := allowing(t, "sh").Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{bin(t, "sh"), "-c", script}}))
	require.Error(t, err)
	require.False(t, queue.IsPermanent(err), "a failing program may succeed on retry")
	msg := err.Error()
	require.Contains(t, msg, "exit code 3")
	require.True(t, strings.HasSuffix(msg, "the real problem"), msg)
	require.NotContains(t, msg, "noise line 0\n")
	require.Less(t, len(msg), 2<<10+200)
}

func TestExecMissingBinary(t *testing.T) {
	t.Parallel()
	// Listed, but missing or not a program.
	for _, argv0 := range []string{"/nonexistent/bin/prog", filepath.Join(t.TempDir(), "missing"), t.TempDir()} {
		h := handlers.ExecWith(handlers.ExecOptions{Allow: []string{argv0}})
		_, err := h.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{argv0}}))
		require.Error(t, err, argv0)
		require.True(t, queue.IsPermanent(err), argv0)
		require.Contains(t, err.Error(), argv0)
	}
}

func TestExecBadPayload(t *testing.T) {
	t.Parallel()
	h := allowing(t, "true")
	for payload, want := range map[string]string{
		`{}`:                             `"argv" needs at least the program`,
		`{"argv": []}`:                   `"argv" needs at least the program`,
		`{"argv": [""]}`:                 `"argv" needs at least the program`,
		`{"argv": "echo hi"}`:            "cannot unmarshal",
		`{"argv": ["true"], "shell": 1}`: `unknown field "shell"`,
		`{"argv": ["` + bin(t, "true") + `"], "env": {"A=B": "x"}}`:                "is not a variable name",
		`{"argv": ["` + bin(t, "true") + `"], "env": {"GREETING": "x"}}`:           "not listed in worker.exec.env_allow",
		`{"argv": ["` + bin(t, "true") + `"], "env": {"LD_PRELOAD": "/tmp/x.so"}}`: "LD_PRELOAD is an interpreter hook",
		`{"argv": ["` + bin(t, "true") + `"], "env": {"LD_LIBRARY_PATH": "/tmp"}}`: "LD_LIBRARY_PATH is an interpreter hook",
		`{"argv": ["` + bin(t, "true") + `"], "env": {"GCONV_PATH": "/tmp"}}`:      "GCONV_PATH is an interpreter hook",
	} {
		_, err := h.Handle(t.Context(), job("exec", payload))
		require.Error(t, err, payload)
		require.True(t, queue.IsPermanent(err), payload)
		require.Contains(t, err.Error(), want, payload)
	}
}

func TestExecOutputLimit(t *testing.T) {
	t.Parallel()
	h := handlers.ExecWith(handlers.ExecOptions{MaxOutputBytes: 1000, Allow: bins(t, "head", "yes")})
	out, err := h.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{bin(t, "head"), "-c", "1000", "/dev/zero"}}))
	require.NoError(t, err)
	require.Len(t, out, 1000)

	// `yes` never stops by itself: the overflow must kill it.
	start := time.Now()
	_, err = h.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{bin(t, "yes")}}))
	require.ErrorIs(t, err, queue.ErrOutputTooLarge)
	require.True(t, queue.IsPermanent(err))
	require.Contains(t, err.Error(), "1000 bytes")
	require.Less(t, time.Since(start), 10*time.Second)
}

// TestExecTimeoutKillsProcessGroup runs a shell that starts a background
// grandchild and then waits in a foreground one; the job's context ends after
// 200 ms. Killing only the shell would leave both sleeps running.
func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "bg.pid")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := allowing(t, "sh").Handle(ctx, execJob(t, handlers.ExecPayload{
		Argv: []string{bin(t, "sh"), "-c", `sleep 30 & echo $! > "$0"; sleep 30`, pidFile},
	}))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "process group killed")
	require.Less(t, time.Since(start), 5*time.Second, "the handler must return promptly, not after sleep 30")

	pid := readPID(t, pidFile)
	eventually(t, 5*time.Second, func() bool { return !alive(pid) }, "background grandchild %d survived", pid)
}

// TestExecKillsLeftoversOnExit: a program that exits 0 but leaves a
// background child holding stdout must neither hang the job nor leak it.
func TestExecKillsLeftoversOnExit(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "bg.pid")
	start := time.Now()
	out, err := allowing(t, "sh").Handle(t.Context(), execJob(t, handlers.ExecPayload{
		Argv: []string{bin(t, "sh"), "-c", `sleep 30 & echo $! > "$0"; echo done`, pidFile},
	}))
	require.NoError(t, err)
	require.Equal(t, "done\n", string(out))
	require.Less(t, time.Since(start), 5*time.Second)
	pid := readPID(t, pidFile)
	eventually(t, 5*time.Second, func() bool { return !alive(pid) }, "left-over child %d survived", pid)
}

// TestExecPATHFromPayload: a PATH in the payload reaches the program's
// environment but never selects the program.
func TestExecPATHFromPayload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "hello-jq")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho \"from $PATH\"\n"), 0o755))
	h := handlers.ExecWith(handlers.ExecOptions{Allow: []string{script}, EnvAllow: []string{"PATH"}})
	env := map[string]string{"PATH": dir + ":/usr/bin:/bin"}

	_, err := h.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{"hello-jq"}, Env: env}))
	require.ErrorIs(t, err, handlers.ErrExecNotAllowed)
	require.True(t, queue.IsPermanent(err))

	out, err := h.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{script}, Env: env}))
	require.NoError(t, err)
	require.Equal(t, "from "+dir+":/usr/bin:/bin\n", string(out))
}

// TestExecAllowList: only a listed absolute path runs; anything else fails
// permanently, naming the program, without running it.
func TestExecAllowList(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	marker := filepath.Join(tmp, "ran")
	unlisted := filepath.Join(tmp, "unlisted")
	require.NoError(t, os.WriteFile(unlisted, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))
	echo := bin(t, "echo")            // /usr/bin/echo
	dir, base := filepath.Split(echo) // "./echo" exists relative to dir
	// Entries and argv[0] are both compared after filepath.Clean.
	h := handlers.ExecWith(handlers.ExecOptions{Allow: []string{dir + "./" + base}})

	for _, argv0 := range []string{echo, dir + "../" + filepath.Base(dir) + "//" + base} {
		out, err := h.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{argv0, "ok"}}))
		require.NoError(t, err, argv0)
		require.Equal(t, "ok\n", string(out), argv0)
	}

	for argv0, want := range map[string]string{
		"/bin/sh":        "exec: /bin/sh is not in worker.exec.allow",
		"/bin/../bin/sh": "exec: /bin/sh is not in worker.exec.allow",
		unlisted:         "exec: " + unlisted + " is not in worker.exec.allow",
		"echo":           `exec: "echo" is not in worker.exec.allow: argv[0] must be an absolute path (no PATH lookup)`,
		"./echo":         `exec: "./echo" is not in worker.exec.allow: argv[0] must be an absolute path (no PATH lookup)`,
		"bin/echo":       `exec: "bin/echo" is not in worker.exec.allow: argv[0] must be an absolute path (no PATH lookup)`,
	} {
		_, err := h.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{argv0}, Dir: dir}))
		require.EqualError(t, err, want, argv0)
		require.ErrorIs(t, err, handlers.ErrExecNotAllowed, argv0)
		require.True(t, queue.IsPermanent(err), argv0)
	}
	require.NoFileExists(t, marker, "a program outside the list never starts")

	// An empty list allows nothing.
	_, err := handlers.ExecWith(handlers.ExecOptions{}).Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{echo}}))
	require.ErrorIs(t, err, handlers.ErrExecNotAllowed)
}

// TestExecRunsTheCleanedPath: "link/../prog" is compared as "prog" by its
// lexical clean form, so that form must be what runs; the kernel would follow
// the link first and reach another directory's prog.
func TestExecRunsTheCleanedPath(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	allowed, other := filepath.Join(root, "allowed"), filepath.Join(root, "other")
	require.NoError(t, os.MkdirAll(filepath.Join(other, "sub"), 0o755))
	require.NoError(t, os.Mkdir(allowed, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(allowed, "prog"), []byte("#!/bin/sh\necho allowed\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "prog"), []byte("#!/bin/sh\necho other\n"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(other, "sub"), filepath.Join(allowed, "link")))

	h := handlers.ExecWith(handlers.ExecOptions{Allow: []string{filepath.Join(allowed, "prog")}})
	out, err := h.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{allowed + "/link/../prog"}}))
	require.NoError(t, err)
	require.Equal(t, "allowed\n", string(out))
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Positive(t, pid)
	return pid
}

// alive reports whether pid exists and is not a zombie (an orphan that init
// has not reaped yet is dead for our purpose).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// Format: pid (comm) state ...; comm may contain spaces, so cut at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

func eventually(t *testing.T, within time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf(msg, args...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRegisterWithExec(t *testing.T) {
	t.Parallel()
	mux := queue.NewMux()
	handlers.Register(mux, handlers.Options{Exec: &handlers.ExecOptions{Allow: bins(t, "echo")}})
	out, err := mux.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{bin(t, "echo"), "hi"}}))
	require.NoError(t, err)
	require.Equal(t, "hi\n", string(out))
	_, err = mux.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{"/bin/sh", "-c", "true"}}))
	require.EqualError(t, err, "exec: /bin/sh is not in worker.exec.allow")
	require.True(t, queue.IsPermanent(err))
}

// TestAbuseExecInterpreterHooksRefused: each variable that makes a shell, an interpreter or the loader
// run code it names is refused before anything runs, even when the operator lists it (a
// wildcard "*" lists everything). The wrapper is shaped like docs' /usr/local/bin/thumbnail: a
// bash script that calls other programs, which is how BASH_FUNC_echo%% ran `id` as root.
func TestAbuseExecInterpreterHooksRefused(t *testing.T) {
	t.Parallel()
	bash := bin(t, "bash")
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	wrapper := filepath.Join(dir, "thumbnail")
	require.NoError(t, os.WriteFile(wrapper, []byte("#!"+bash+"\necho thumb\n"), 0o755))
	h := handlers.ExecWith(handlers.ExecOptions{Allow: []string{wrapper}, EnvAllow: []string{"*"}})
	pwn := "touch " + marker
	for k, v := range map[string]string{
		"BASH_FUNC_echo%%":      "() { " + pwn + "; }",
		"BASH_FUNC_echo()":      "() { " + pwn + "; }",
		"BASH_ENV":              marker + ".sh",
		"ENV":                   marker + ".sh",
		"SHELLOPTS":             "xtrace",
		"PS4":                   "$(" + pwn + ")",
		"PROMPT_COMMAND":        pwn,
		"IFS":                   "/",
		"PERL5OPT":              "-Mwarnings;system('" + pwn + "')",
		"PERL5LIB":              dir,
		"PERLLIB":               dir,
		"NODE_OPTIONS":          "--require " + marker + ".js",
		"NODE_PATH":             dir,
		"PYTHONPATH":            dir,
		"PYTHONSTARTUP":         marker + ".py",
		"PYTHONHOME":            dir,
		"RUBYOPT":               "-r" + marker,
		"RUBYLIB":               dir,
		"JAVA_TOOL_OPTIONS":     "-javaagent:" + marker + ".jar",
		"_JAVA_OPTIONS":         "-javaagent:" + marker + ".jar",
		"CLASSPATH":             dir,
		"LD_PRELOAD":            marker + ".so",
		"LD_LIBRARY_PATH":       dir,
		"LD_AUDIT":              marker + ".so",
		"DYLD_INSERT_LIBRARIES": marker + ".so",
		"GCONV_PATH":            dir,
		"GIT_SSH_COMMAND":       pwn,
		"LUA_INIT":              "os.execute('" + pwn + "')",
		"PHPRC":                 dir,
		"EDITOR":                pwn,
	} {
		_, err := h.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{wrapper}, Env: map[string]string{k: v}}))
		require.Error(t, err, k)
		require.True(t, queue.IsPermanent(err), k)
		require.Contains(t, err.Error(), "may not set", k)
		require.NoFileExists(t, marker, k)
		require.Error(t, handlers.ExecEnvRefused(k), "%s must be refused in worker.exec.env_allow too", k)
	}
	// An ordinary listed variable reaches the wrapper.
	out, err := h.Handle(t.Context(), execJob(t, handlers.ExecPayload{Argv: []string{wrapper}, Env: map[string]string{"THUMB_SIZE": "64"}}))
	require.NoError(t, err)
	require.Equal(t, "thumb\n", string(out))
	require.NoError(t, handlers.ExecEnvRefused("THUMB_SIZE"))
}
