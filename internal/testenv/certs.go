package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test: it issues server and client certificates
// and writes them as PEM files under the test's temporary directory.
type CA struct {
	tb   testing.TB
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is the CA certificate (PEM): a server's client CA, a client's root.
	CertFile string
}

// Cert is an issued certificate's files.
type Cert struct {
	CertFile, KeyFile string
}

// NewCA makes a CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &CA{tb: tb, dir: tb.TempDir(), cert: cert, key: key}
	ca.CertFile = ca.write(name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost.
func (ca *CA) Server(name string) Cert {
	return ca.issue(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client issues a client certificate with this common name, DNS names and URIs.
func (ca *CA) Client(cn string, dns []string, uris ...string) Cert {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		DNSNames:    dns,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			ca.tb.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	return ca.issue(cn, tmpl)
}

func (ca *CA) issue(name string, tmpl *x509.Certificate) Cert {
	ca.tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.tb.Fatal(err)
	}
	tmpl.SerialNumber = serial(ca.tb)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.tb.Fatal(err)
	}
	return Cert{
		CertFile: ca.write(name+".pem", "CERTIFICATE", der),
		KeyFile:  ca.write(name+"-key.pem", "PRIVATE KEY", keyDER),
	}
}

func (ca *CA) write(name, typ string, der []byte) string {
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.tb.Fatal(err)
	}
	return path
}

func serial(tb testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
