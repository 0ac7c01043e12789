package apiserver_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/jq-dev/jq/api/gen/jq/v1"        // registers the jq.v1 services
	_ "github.com/jq-dev/jq/api/gen/taskqueue/v1" // and the taskqueue.v1 facade
	"github.com/jq-dev/jq/api/server"
)

// nestedBombBytes is the size of the nesting attack: a body of about 1 MB whose arrays nest
// one inside the other, one level per byte.
const nestedBombBytes = 1 << 20

// A MessagePack body nesting arrays about a million levels deep inside a Timestamp or Duration
// field (and, for a request without one, under an unknown key) is refused as invalid_argument
// by every RPC of the API, unary and streaming, with a bounded allocation. Without a depth bound
// it ended in "fatal error: stack overflow" after seconds and a gigabyte. Not parallel: the
// allocation counter is the server's alone.
func TestMsgPackNestingRefusedByEveryRPC(t *testing.T) {
	addr := serveAddr(t, apiserver.Options{Store: testStore, Log: zap.NewNop()})
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true) // bidirectional streams need HTTP/2
	t.Cleanup(tr.CloseIdleConnections)
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	bomb := bytes.Repeat([]byte{0x91}, nestedBombBytes) // fixarray of one, nested
	bomb = append(bomb, 0xc0)
	methods := 0
	var slowest time.Duration
	for _, pkg := range []protoreflect.FullName{"jq.v1", "taskqueue.v1"} {
		protoregistry.GlobalFiles.RangeFilesByPackage(pkg, func(fd protoreflect.FileDescriptor) bool {
			for i := range fd.Services().Len() {
				sd := fd.Services().Get(i)
				for j := range sd.Methods().Len() {
					md := sd.Methods().Get(j)
					body, where := nestInside(t, md.Input(), bomb)
					name := string(sd.FullName()) + "/" + string(md.Name())
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					start := time.Now()
					code := callNested(t, cl, addr, md, body)
					took := time.Since(start)
					runtime.ReadMemStats(&after)
					slowest = max(slowest, took)
					require.Equal(t, "invalid_argument", code, "%s with the bomb in %s", name, where)
					// The server reads the body (1 MB) and keeps one small counter per level it
					// allows; the unbounded decoder allocated over a gigabyte.
					alloc := after.TotalAlloc - before.TotalAlloc
					require.Less(t, alloc, uint64(16*len(body)), "%s: %d bytes allocated for a %d-byte body", name, alloc, len(body))
					require.Less(t, after.HeapInuse, before.HeapInuse+uint64(16*len(body)), "%s: the heap grew", name)
					methods++
				}
			}
			return true
		})
	}
	require.Greater(t, methods, 40, "every service's methods were tried")
	t.Logf("%d methods refused the %d-byte body; slowest %v (wall time on a shared machine, not asserted)", methods, len(bomb), slowest)
}

// nestInside builds a request of md holding bomb in the first Timestamp or Duration field it
// can reach (through singular and repeated message fields), or under an unknown key when it has
// none, and names the place.
func nestInside(t *testing.T, md protoreflect.MessageDescriptor, bomb []byte) ([]byte, string) {
	t.Helper()
	path := timeField(md, map[protoreflect.FullName]bool{})
	where := "an unknown key"
	if path == nil {
		path = []protoreflect.FieldDescriptor{nil}
	} else {
		where = ""
		for _, fd := range path {
			where += "." + fd.JSONName()
		}
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	for _, fd := range path {
		require.NoError(t, enc.EncodeMapLen(1))
		name := "unknownField"
		if fd != nil {
			name = fd.JSONName()
		}
		require.NoError(t, enc.EncodeString(name))
		if fd != nil && fd.IsList() {
			require.NoError(t, enc.EncodeArrayLen(1))
		}
	}
	buf.Write(bomb)
	return buf.Bytes(), where
}

func timeField(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) []protoreflect.FieldDescriptor {
	if seen[md.FullName()] {
		return nil
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Message() == nil || fd.IsMap() {
			continue
		}
		switch fd.Message().FullName() {
		case "google.protobuf.Timestamp", "google.protobuf.Duration":
			if !fd.IsList() {
				return []protoreflect.FieldDescriptor{fd}
			}
			continue
		}
		if rest := timeField(fd.Message(), seen); rest != nil {
			return append([]protoreflect.FieldDescriptor{fd}, rest...)
		}
	}
	return nil
}

// callNested sends body as md's request (unary Connect, or one enveloped message of a stream)
// and returns the Connect error code of the answer.
func callNested(t *testing.T, cl *http.Client, addr string, md protoreflect.MethodDescriptor, body []byte) string {
	t.Helper()
	url := "http://" + addr + "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	contentType := "application/msgpack"
	stream := md.IsStreamingClient() || md.IsStreamingServer()
	if stream {
		contentType = "application/connect+msgpack"
		env := make([]byte, 5, 5+len(body))
		binary.BigEndian.PutUint32(env[1:], uint32(len(body)))
		body = append(env, body...)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	res, err := cl.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var out struct {
		Code  string `json:"code"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if !stream {
		require.NoError(t, json.Unmarshal(b, &out), "%s: %q", url, b)
		return out.Code
	}
	// The answer's last envelope (flag 2) is the end of the stream, with the error.
	for len(b) >= 5 {
		n := int(binary.BigEndian.Uint32(b[1:5]))
		require.LessOrEqual(t, 5+n, len(b), "%s: a truncated envelope", url)
		if b[0]&2 != 0 {
			require.NoError(t, json.Unmarshal(b[5:5+n], &out), "%s: %q", url, b[5:5+n])
			return out.Error.Code
		}
		b = b[5+n:]
	}
	t.Fatalf("%s: no end of stream in the answer", url)
	return ""
}
