package testenv_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jq-dev/jq/internal/testenv"
)

// portsChildEnv makes this test binary a second one that prints the ports it picks.
const portsChildEnv = "JQ_TESTENV_PORTS_CHILD"

// Two test binaries never pick ports of one block, so a port one of them picked stays its own
// while its server is down for a restart; one binary never picks a port twice.
func TestPickPortBlocks(t *testing.T) {
	if os.Getenv(portsChildEnv) == "1" {
		for range 150 { // more than one block
			p, err := testenv.PickPort()
			require.NoError(t, err)
			_, _ = os.Stdout.WriteString("port " + strconv.Itoa(p) + "\n")
		}
		return
	}
	t.Parallel()
	mine := map[int]bool{}
	for range 150 {
		p, err := testenv.PickPort()
		require.NoError(t, err)
		require.False(t, mine[p], "port %d picked twice", p)
		mine[p] = true
	}
	first, err := testenv.PickPorts(12)
	require.NoError(t, err)
	for p := first; p < first+12; p++ {
		require.False(t, mine[p], "port %d picked twice", p)
		mine[p] = true
	}
	myBlocks := map[int]bool{}
	for p := range mine {
		myBlocks[p/100] = true
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestPickPortBlocks$", "-test.count=1")
	cmd.Env = append(os.Environ(), portsChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		s, ok := strings.CutPrefix(l, "port ")
		if !ok {
			continue
		}
		p, err := strconv.Atoi(s)
		require.NoError(t, err)
		require.False(t, myBlocks[p/100], "the other binary picked %d, in a block of this one", p)
		n++
	}
	require.Equal(t, 150, n, "%s", out)
}
