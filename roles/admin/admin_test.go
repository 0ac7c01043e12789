package admin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

func TestRelative(t *testing.T) {
	t.Parallel()
	for age, want := range map[time.Duration]string{
		0:                           "just now",
		999 * time.Millisecond:      "just now",
		42 * time.Second:            "42s ago",
		3*time.Minute + time.Second: "3m ago",
		5 * time.Hour:               "5h ago",
		47 * time.Hour:              "47h ago",
		72 * time.Hour:              "3d ago",
		-10 * time.Second:           "in 10s",
	} {
		require.Equal(t, want, relative(age), "%v", age)
	}
}

func TestParseStates(t *testing.T) {
	t.Parallel()
	got, err := parseStates("dead_lettered, JOB_STATE_PENDING,Running")
	require.NoError(t, err)
	require.Equal(t, []jqv1.JobState{jqv1.JobState_JOB_STATE_DEAD_LETTERED, jqv1.JobState_JOB_STATE_PENDING, jqv1.JobState_JOB_STATE_RUNNING}, got)
	got, err = parseStates("")
	require.NoError(t, err)
	require.Empty(t, got)
	for _, bad := range []string{"SLEEPING", "UNSPECIFIED", "JOB_STATE_UNSPECIFIED"} {
		_, err := parseStates(bad)
		require.Equal(t, exitUsage, exitCode(err), bad)
	}
}

func TestParseWeights(t *testing.T) {
	t.Parallel()
	got, err := parseWeights("9=10, 0=1")
	require.NoError(t, err)
	require.Equal(t, map[int32]int32{9: 10, 0: 1}, got)
	require.Equal(t, "9=10,0=1", weights(got))
	require.Equal(t, "strict", weights(nil))
	for _, bad := range []string{"9", "10=1", "9=0", "a=b", "9=1,,"} {
		_, err := parseWeights(bad)
		require.Equal(t, exitUsage, exitCode(err), bad)
	}
}

func TestReadPayload(t *testing.T) {
	t.Parallel()
	b, err := readPayload(`{"a":1}`, nil)
	require.NoError(t, err)
	require.Equal(t, `{"a":1}`, string(b))
	_, err = readPayload(`{oops`, nil)
	require.Equal(t, exitUsage, exitCode(err))

	file := filepath.Join(t.TempDir(), "p.bin")
	require.NoError(t, os.WriteFile(file, []byte{0x81, 0xa1, 'a'}, 0o600))
	b, err = readPayload("@"+file, nil)
	require.NoError(t, err)
	require.Equal(t, []byte{0x81, 0xa1, 'a'}, b, "a file is sent as it is (MessagePack allowed)")
	_, err = readPayload("@"+file+".missing", nil)
	require.Equal(t, exitUsage, exitCode(err))
	b, err = readPayload("@-", strings.NewReader("from stdin"))
	require.NoError(t, err)
	require.Equal(t, "from stdin", string(b))
}

func TestBytesText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "(empty)", bytesText(nil))
	require.Equal(t, `{"a":1}`, bytesText([]byte("{\n  \"a\": 1\n}")))
	require.Equal(t, "two words", bytesText([]byte("two\n  words")))
	require.Contains(t, bytesText([]byte{0, 1, 2}), "3 bytes, binary")
	long := bytesText([]byte(strings.Repeat("x", 500)))
	require.True(t, strings.HasPrefix(long, strings.Repeat("x", maxCell)+"…"), long)
	require.Contains(t, long, "500 bytes")
}

func TestExitCodesAndErrorLines(t *testing.T) {
	t.Parallel()
	g := &Globals{ServerAddr: "h:1", Timeout: 3 * time.Second}
	notFound := connect.NewError(connect.CodeNotFound, errors.New(`queue not found: "emails"`))
	cases := []struct {
		err  error
		code int
		line string
	}{
		{named(notFound, "queue", "emails"), exitNotFound, `queue "emails" not found`},
		{failed(named(notFound, "job", "j1"), "cannot cancel job %s", "j1"), exitNotFound, `job "j1" not found`},
		{notFound, exitNotFound, `queue not found: "emails"`},
		{connect.NewError(connect.CodeInvalidArgument, errors.New("job_id \"x\" is not a UUID")), exitUsage, `job_id "x" is not a UUID`},
		{usagef("--limit 0: want 1 to 1000"), exitUsage, "--limit 0: want 1 to 1000"},
		{failed(connect.NewError(connect.CodeFailedPrecondition, errors.New("job j is DONE")), "cannot cancel job %s", "j"), exitError, "cannot cancel job j: job j is DONE"},
		{connect.NewError(connect.CodeDeadlineExceeded, context.DeadlineExceeded), exitError, "no answer from h:1 within 3s"},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), exitError, "no answer from h:1 within 3s"},
		{connect.NewError(connect.CodeUnavailable, errors.New("dial tcp: refused\nmore")), exitError, "cannot reach the jq server at h:1: dial tcp: refused"},
		{errUnhealthy, exitError, "the system is unhealthy"},
	}
	for _, c := range cases {
		require.Equal(t, c.code, exitCode(c.err), "%v", c.err)
		line := errorLine(c.err, g)
		require.Contains(t, line, c.line)
		require.NotContains(t, line, "\n")
	}
	require.NoError(t, failed(nil, "x"))
	require.NoError(t, named(nil, "queue", "q"))
}

func TestPaintKeepsColumnsAligned(t *testing.T) {
	t.Parallel()
	re := &runEnv{color: true}
	var sb strings.Builder
	tw := newTable(&sb)
	fmt.Fprintf(tw, "A\t%s\tB\n", re.header("STATUS"))
	fmt.Fprintf(tw, "a\t%s\tb\n", re.state(jqv1.JobState_JOB_STATE_DEAD_LETTERED))
	fmt.Fprintf(tw, "a\t%s\tb\n", re.state(jqv1.JobState_JOB_STATE_DONE))
	require.NoError(t, tw.Flush())
	var cols []int
	for _, l := range strings.Split(strings.TrimSpace(sb.String()), "\n") {
		cols = append(cols, strings.LastIndex(l, " ")) // where the last column starts
	}
	require.Equal(t, cols[0], cols[1])
	require.Equal(t, cols[0], cols[2])
	require.False(t, (&runEnv{}).color)
	require.Equal(t, "DONE", (&runEnv{}).state(jqv1.JobState_JOB_STATE_DONE))
}
