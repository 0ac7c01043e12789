package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/jq-dev/jq/api/gen/jq/v1" // registers the jq.v1 services
	"github.com/jq-dev/jq/api/gen/jq/v1/jqv1connect"
	_ "github.com/jq-dev/jq/api/gen/taskqueue/v1" // registers the taskqueue.v1 service
	"github.com/jq-dev/jq/api/gen/taskqueue/v1/taskqueuev1connect"
)

const hashA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" // sha256("test")

func TestParseTokenEntry(t *testing.T) {
	e, err := ParseTokenEntry(" name=ingest ; roles=producer+viewer;sha256=" + strings.ToUpper(hashA) + ";queues=emails+images ")
	require.NoError(t, err)
	require.Equal(t, TokenEntry{Name: "ingest", Roles: []Role{RoleProducer, RoleViewer}, SHA256: hashA, Queues: []string{"emails", "images"}}, e)
	back, err := ParseTokenEntry(e.String())
	require.NoError(t, err)
	require.Equal(t, e, back)

	for in, want := range map[string]string{
		"":                                          "name: want",
		"name=a;roles=admin":                        "sha256: want",
		"name=a;roles=root;sha256=" + hashA:         `unknown role "root"`,
		"name=a;sha256=" + hashA:                    "roles: want at least one",
		"name=a b;roles=admin;sha256=" + hashA:      "name: want",
		"name=a;roles=admin;sha256=" + hashA[:63]:   "sha256: want",
		"name=a;roles=admin;sha256=" + hashA + ";x": `"x": want key=value`,
		"name=a;name=b":                             "given twice",
		"nom=a":                                     `unknown field "nom"`,
		"name=a;roles=admin;sha256=" + hashA + ";queues=Bad Queue": "not a queue name",
	} {
		_, err := ParseTokenEntry(in)
		require.ErrorContains(t, err, want, "%q", in)
		require.NotContains(t, err.Error(), hashA, "an error never repeats the hash")
	}
}

func TestCertRules(t *testing.T) {
	cert := &x509.Certificate{
		Subject:  pkix.Name{CommonName: "worker-7"},
		DNSNames: []string{"w7.jq.internal"},
		URIs:     []*url.URL{{Scheme: "spiffe", Host: "example.org", Path: "/jq/worker"}},
	}
	for in, want := range map[string]string{
		"cn=worker-*;roles=worker":                    "cn:worker-7",
		"cn=worker-7;roles=worker":                    "cn:worker-7",
		"dns=w7.jq.internal;roles=worker":             "dns:w7.jq.internal",
		"dns=*;roles=viewer":                          "",
		"uri=spiffe://example.org/jq/*;roles=worker":  "uri:spiffe://example.org/jq/worker",
		"cn=worker-8;roles=worker":                    "",
		"uri=spiffe://example.org/other;roles=worker": "",
		"cn=*;roles=viewer":                           "cn:worker-7",
		"dns=w7.jq.internal.evil;roles=worker":        "",
		"cn=worker;roles=worker":                      "",
	} {
		r, err := ParseCertRule(in)
		if want == "" && strings.HasPrefix(in, "dns=*") {
			require.Error(t, err, "a bare * is only for cn") // every DNS name would match
			continue
		}
		require.NoError(t, err, in)
		id, ok := r.Match(cert)
		require.Equal(t, want != "", ok, in)
		require.Equal(t, want, id, in)
	}
	for in, want := range map[string]string{
		"roles=worker":                 "want one of cn=, dns= or uri=",
		"cn=a;dns=b;roles=worker":      "exactly one",
		"cn=a*b*;roles=worker":         "trailing *",
		"cn=a":                         "roles: want",
		"cn=a;roles=worker;queues=A+b": "not a queue name",
	} {
		_, err := ParseCertRule(in)
		require.ErrorContains(t, err, want, in)
	}
}

// TestPolicyCoversEveryProcedure: a new RPC cannot ship without a line in the table (it would be
// admin-only, fail closed, but the table and docs/security.md must say so).
func TestPolicyCoversEveryProcedure(t *testing.T) {
	n := 0
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "jq.v1" && fd.Package() != "taskqueue.v1" {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				proc := "/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(j).Name())
				_, ok := policy[proc]
				require.True(t, ok, "%s has no line in the policy table", proc)
				n++
			}
		}
		return true
	})
	require.Equal(t, 40+7+5, n, "the services' methods (jq.v1, and seed 003's taskqueue.v1)")
}

// TestPolicyFacadeMatchesJQ: each taskqueue.v1 RPC is open to exactly the roles of the jq.v1 RPC
// it is served by.
func TestPolicyFacadeMatchesJQ(t *testing.T) {
	for facade, jq := range map[string]string{
		taskqueuev1connect.TaskQueuePublicServiceSubmitJobProcedure:    jqv1connect.JobServiceSubmitJobProcedure,
		taskqueuev1connect.TaskQueuePublicServiceGetJobStatusProcedure: jqv1connect.JobServiceGetJobProcedure,
		taskqueuev1connect.TaskQueuePublicServiceGetJobResultProcedure: jqv1connect.JobServiceGetJobResultProcedure,
		taskqueuev1connect.TaskQueuePublicServiceCancelJobProcedure:    jqv1connect.JobServiceCancelJobProcedure,
		taskqueuev1connect.TaskQueuePublicServiceListJobsProcedure:     jqv1connect.JobServiceListJobsProcedure,
	} {
		require.Equal(t, RolesFor(jq), RolesFor(facade), facade)
	}
}

func newTestAuth(t *testing.T, opts Options) *Authenticator {
	t.Helper()
	opts.Tokens = append(opts.Tokens, TokenEntry{Name: "p", Roles: []Role{RoleProducer}, SHA256: HashToken("jq_p")})
	a, err := New(opts)
	require.NoError(t, err)
	return a
}

func TestAuthenticate(t *testing.T) {
	a := newTestAuth(t, Options{})
	h := http.Header{}
	_, d := a.Authenticate(h, nil)
	require.Equal(t, ReasonMissing, d.Reason)
	require.Equal(t, connect.CodeUnauthenticated, d.Code)
	for _, v := range []string{"Bearer jq_q", "Basic jq_p", "Bearer", "jq_p", "Bearer " + strings.Repeat("x", 600)} {
		h.Set("Authorization", v)
		_, d = a.Authenticate(h, nil)
		require.Equal(t, ReasonInvalidToken, d.Reason, v)
	}
	for _, v := range []string{"Bearer jq_p", "bearer jq_p", "  Bearer   jq_p  "} {
		h.Set("Authorization", v)
		p, d := a.Authenticate(h, nil)
		require.Nil(t, d, v)
		require.Equal(t, "token:p", p.Name)
	}
}

func TestNewRefusesDuplicates(t *testing.T) {
	_, err := New(Options{Tokens: []TokenEntry{
		{Name: "a", Roles: []Role{RoleAdmin}, SHA256: hashA}, {Name: "b", Roles: []Role{RoleAdmin}, SHA256: hashA},
	}})
	require.ErrorContains(t, err, "same token hash")
	_, err = New(Options{Tokens: []TokenEntry{
		{Name: "a", Roles: []Role{RoleAdmin}, SHA256: hashA}, {Name: "a", Roles: []Role{RoleAdmin}, SHA256: HashToken("x")},
	}})
	require.ErrorContains(t, err, "configured twice")
}

func TestRateLimit(t *testing.T) {
	var reasons []string
	a := newTestAuth(t, Options{RateLimit: 1, RateBurst: 2, Denied: func(r string) { reasons = append(reasons, r) }})
	p := &Principal{Name: "token:p", Roles: []Role{RoleProducer}}
	proc := "/jq.v1.JobService/SubmitJob"
	require.Nil(t, a.Authorize(p, proc))
	require.Nil(t, a.Authorize(p, proc))
	d := a.Authorize(p, proc)
	require.NotNil(t, d)
	require.Equal(t, connect.CodeResourceExhausted, d.Code)
	require.Equal(t, ReasonRateLimited, d.Reason)
	// Another principal has a bucket of its own.
	require.Nil(t, a.Authorize(&Principal{Name: "token:q", Roles: []Role{RoleProducer}}, proc))
}

func TestRefusalsLoggedOncePerMinute(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	now := time.Unix(1000, 0)
	count := 0
	a := newTestAuth(t, Options{Log: zap.New(core), Now: func() time.Time { return now }, Denied: func(string) { count++ }})
	d := &Denial{Code: connect.CodePermissionDenied, Reason: ReasonForbidden, Msg: "no"}
	for range 5 {
		a.Refused("token:p", "/x", d)
	}
	a.Refused("token:q", "/x", d)
	require.Equal(t, 6, count, "every refusal is counted")
	require.Equal(t, 2, logs.Len(), "one line per principal")
	now = now.Add(time.Minute)
	a.Refused("token:p", "/x", d)
	require.Equal(t, 3, logs.Len())
	require.NotContains(t, logs.All()[0].ContextMap(), "token", "no credential is logged")
}

func FuzzParseTokenEntry(f *testing.F) {
	f.Add("name=ingest;roles=producer;sha256=" + hashA)
	f.Add("name=w;roles=worker+viewer;sha256=" + hashA + ";queues=a+b")
	f.Add("name=;roles=;sha256=;queues=")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseTokenEntry(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		back, err := ParseTokenEntry(e.String())
		if err != nil {
			t.Fatalf("an accepted entry does not parse back: %q: %v", e.String(), err)
		}
		require.Equal(t, e, back)
	})
}

func FuzzAuthenticateHeader(f *testing.F) {
	f.Add("Bearer jq_p")
	f.Add("Bearer ")
	f.Add("bEaReR\tjq_p")
	f.Add("Basic dXNlcjpwYXNz")
	a, err := New(Options{Tokens: []TokenEntry{{Name: "p", Roles: []Role{RoleProducer}, SHA256: HashToken("jq_p")}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		h.Set("Authorization", v)
		p, d := a.Authenticate(h, nil)
		if (p == nil) == (d == nil) {
			t.Fatalf("%q: want a principal or a denial", v)
		}
		if p != nil && p.Name != "token:p" {
			t.Fatalf("%q authenticated as %s", v, p.Name)
		}
		if d != nil && (d.Code != connect.CodeUnauthenticated || strings.Contains(d.Msg, v) && len(v) > 8) {
			t.Fatalf("%q: denial %+v echoes the credential or has the wrong code", v, d)
		}
	})
}
