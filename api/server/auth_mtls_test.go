package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/jq-dev/jq/api/auth"
	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/server"
	"github.com/jq-dev/jq/internal/buildinfo"
	"github.com/jq-dev/jq/internal/testenv"
	"github.com/jq-dev/jq/roles/telemetry"
)

// TestMTLSIdentity: a client certificate alone authenticates, mapped to a principal by its
// subject; an unmapped certificate of the CA is UNAUTHENTICATED; a certificate of another CA does
// not get through the handshake; a token on an mTLS connection decides over the certificate; and
// two certificates are two principals that cannot act on each other's worker ids.
func TestMTLSIdentity(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ca, foreign := testenv.NewCA(t, "jq-test"), testenv.NewCA(t, "foreign")
	srvCert := ca.Server("jq-server")
	worker1 := ca.Client("worker-1", nil)
	worker2 := ca.Client("other", []string{"worker-2.jq.internal"})
	spiffe := ca.Client("ops", nil, "spiffe://example.org/jq/ops")
	unmapped := ca.Client("somebody", nil)
	stranger := foreign.Client("worker-9", nil)

	var rules []auth.CertRule
	for _, s := range []string{
		"cn=worker-*;roles=worker",
		"dns=worker-2.jq.internal;roles=worker",
		"uri=spiffe://example.org/jq/ops;roles=admin",
	} {
		r, err := auth.ParseCertRule(s)
		require.NoError(t, err)
		rules = append(rules, r)
	}
	viewerToken, err := auth.NewToken()
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	refused := telemetry.NewAuthMetrics(reg)
	a, err := auth.New(auth.Options{
		CertRules: rules, Denied: refused, Log: zaptest.NewLogger(t),
		Tokens: []auth.TokenEntry{{Name: "v", Roles: []auth.Role{auth.RoleViewer}, SHA256: auth.HashToken(viewerToken)}},
	})
	require.NoError(t, err)
	addr := serveTLS(t, apiserver.Options{Store: testStore, Log: zaptest.NewLogger(t), Auth: a, Refused: refused}, srvCert, ca.CertFile,
		tls.RequireAndVerifyClientCert)

	dial := func(c testenv.Cert, root, token string) *rpcclient.Client {
		cl, err := rpcclient.New(rpcclient.Options{Addr: addr, CAFile: root, CertFile: c.CertFile, KeyFile: c.KeyFile, Token: token})
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	q := "mtls-" + uuid.NewString()[:8]
	register := func(cl *rpcclient.Client, id string) error {
		_, err := cl.Workers.RegisterWorker(ctx, connect.NewRequest(&jqv1.RegisterWorkerRequest{
			WorkerId: id, Hostname: "h", Concurrency: 1, Queues: []string{"default"}}))
		return err
	}

	ops := dial(spiffe, ca.CertFile, "")
	_, err = ops.Queues.CreateQueue(ctx, connect.NewRequest(&jqv1.CreateQueueRequest{Name: q}))
	require.NoError(t, err, "a URI SAN mapped to admin")

	w1, w2 := dial(worker1, ca.CertFile, ""), dial(worker2, ca.CertFile, "")
	id := "w-" + uuid.NewString()[:8]
	require.NoError(t, register(w1, id), "CN worker-1 matches cn=worker-*")
	w, err := testStore.WorkerGet(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "cert:cn:worker-1", w.Principal)
	requireCode(t, connect.CodePermissionDenied, register(w2, id), "another certificate's principal takes over the id")
	_, err = w2.Workers.Heartbeat(ctx, connect.NewRequest(&jqv1.HeartbeatRequest{WorkerId: id}))
	requireCode(t, connect.CodePermissionDenied, err)
	_, err = w1.Admin.PurgeDeadLetters(ctx, connect.NewRequest(&jqv1.PurgeDeadLettersRequest{Confirm: true}))
	requireCode(t, connect.CodePermissionDenied, err, "a worker may not purge")

	_, err = dial(unmapped, ca.CertFile, "").Admin.GetVersion(ctx, connect.NewRequest(&jqv1.GetVersionRequest{}))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Contains(t, err.Error(), "not mapped")

	// The server does not trust the foreign CA: no request gets through.
	_, err = dial(stranger, ca.CertFile, "").Admin.GetVersion(ctx, connect.NewRequest(&jqv1.GetVersionRequest{}))
	require.Error(t, err)

	// A viewer token on worker-1's connection: the token decides (read-only, no worker RPCs).
	both := dial(worker1, ca.CertFile, viewerToken)
	_, err = both.Workers.ListWorkers(ctx, connect.NewRequest(&jqv1.ListWorkersRequest{}))
	require.NoError(t, err)
	requireCode(t, connect.CodePermissionDenied, register(both, "w-"+uuid.NewString()[:8]))

	require.Positive(t, counterValue(t, reg, "jq_auth_denied_total", auth.ReasonUnknownCert))
}

// serveTLS serves the API over TLS with client certificates of clientCA, verified as mode says
// (roles/serverrole: required with authentication off, verified when given with it on).
func serveTLS(t *testing.T, opts apiserver.Options, c testenv.Cert, clientCA string, mode tls.ClientAuthType) string {
	t.Helper()
	opts = withEngine(t, opts)
	opts.Version = buildinfo.Get()
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	require.NoError(t, err)
	pem, err := os.ReadFile(clientCA)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	srv := &http.Server{
		Handler: apiserver.New(opts), Protocols: p, ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
			ClientAuth: mode, MinVersion: tls.VersionTLS12},
	}
	served := make(chan struct{})
	go func() { _ = srv.ServeTLS(ln, "", ""); close(served) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
	})
	return ln.Addr().String()
}
