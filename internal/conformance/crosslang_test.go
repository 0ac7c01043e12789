package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
)

// clients submit one "succeed" job, wait for it and print its result; the Go one is this test.
var clients = map[string]func(addr, queue string) []string{
	"python": func(addr, queue string) []string {
		return []string{"python3", filepath.Join(repo, "sdk", "python", "conformance_client.py"), "--addr", addr, "--queue", queue}
	},
	"typescript": func(addr, queue string) []string {
		return []string{"node", filepath.Join(repo, "sdk", "typescript", "dist", "conformance", "client.js"), "--addr", addr, "--queue", queue}
	},
}

// TestCrossLanguage: a client in each language submits, waits for and reads the result of a job that
// a worker in each other language handled (the result names the worker's language).
func TestCrossLanguage(t *testing.T) {
	if os.Getenv("JQ_CONFORMANCE") == "" {
		t.Skip("needs the SDKs' runtimes and the TypeScript build: run it with `task test:sdks` (JQ_CONFORMANCE=1)")
	}
	s := startServer(t)
	var present []lang
	for _, l := range langs {
		if why := missing(l); why != "" {
			t.Logf("SKIP %s: %s", l.name, why)
			continue
		}
		present = append(present, l)
	}
	queues := map[string]string{}
	for _, w := range present {
		queues[w.name] = newQueue(t, s, w)
		l := w
		wk := l.start(t, s, queues[w.name], workerID(t, l, "xlang"))
		t.Cleanup(func() { wk.stop() })
	}
	var rows []string
	for _, c := range present {
		for _, w := range present {
			if c.name == w.name {
				continue
			}
			var out []byte
			if c.name == "go" {
				out = goClient(t, s, queues[w.name])
			} else {
				argv := clients[c.name](s.addr, queues[w.name])
				cmd := exec.Command(argv[0], argv[1:]...)
				var err error
				out, err = cmd.Output()
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					t.Fatalf("%s client: %v: %s", c.name, err, ee.Stderr)
				}
				require.NoError(t, err)
			}
			var res struct {
				OK   bool   `json:"ok"`
				Lang string `json:"lang"`
			}
			require.NoError(t, json.Unmarshal(out, &res), "%s client printed %q", c.name, out)
			require.True(t, res.OK)
			require.Equal(t, w.name, res.Lang, "%s client, %s worker", c.name, w.name)
			rows = append(rows, c.name+" client → "+w.name+" worker: ok")
		}
	}
	slices.Sort(rows)
	t.Log("\n" + strings.Join(rows, "\n"))
}

func goClient(t *testing.T, s *server, queue string) []byte {
	t.Helper()
	id := submit(t, s, spec{queue: queue, typ: "succeed", payload: `{"from":"go"}`, keep: true})
	waitState(t, s, id, 60*time.Second, done)
	res, err := s.cl.Jobs.GetJobResult(context.Background(), connect.NewRequest(&jqv1.GetJobResultRequest{JobId: id}))
	require.NoError(t, err)
	return res.Msg.GetResult().GetData()
}
