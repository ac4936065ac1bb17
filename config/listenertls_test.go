package config

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit/pki"
)

// TestHTTPTLS: http.tls needs http.listen, a certificate and its key, and
// a client authority to require client certificates; files that do not
// hold what they should are refused with the key and the path named. A
// client authority lets control on a listener other hosts can reach
// without a token.
func TestHTTPTLS(t *testing.T) {
	dir := t.TempDir()
	ca := pki.TestCA(t, "turbo-test")
	p := ca.TestIssue(t, pki.Options{CommonName: "turbo", Hosts: []string{"127.0.0.1"}})
	cert, key := pki.Write(t, dir, "cert.pem", p.Cert), pki.Write(t, dir, "key.pem", p.Key)
	caFile := pki.Write(t, dir, "ca.pem", ca.PEM)
	load := func(http string) (*Config, error) {
		return Load(writeConfig(t, "app.yaml", oneConsumer(nil, "http: "+http)), noEnv)
	}
	c, err := load(fmt.Sprintf(`{listen: "0.0.0.0:9443", control: true, tls: {cert_file: %q, key_file: %q, client_ca_file: %q, require_client_cert: true}}`, cert, key, caFile))
	if err != nil || !c.HTTP.TLS.RequireClientCert {
		t.Fatalf("a full http.tls: %v", err)
	}
	for _, tt := range []struct{ http, key, want string }{
		{fmt.Sprintf(`{tls: {cert_file: %q, key_file: %q}}`, cert, key), "http.tls", "needs http.listen"},
		{fmt.Sprintf(`{listen: ":9443", tls: {key_file: %q}}`, key), "http.tls.cert_file", "is required"},
		{fmt.Sprintf(`{listen: ":9443", tls: {cert_file: %q}}`, cert), "http.tls.key_file", "is required"},
		{fmt.Sprintf(`{listen: ":9443", tls: {cert_file: %q, key_file: %q, require_client_cert: true}}`, cert, key), "http.tls.require_client_cert", "needs http.tls.client_ca_file"},
		{fmt.Sprintf(`{listen: ":9443", tls: {cert_file: %q, key_file: %q}}`, key, key), "http.tls.cert_file", key},
		{fmt.Sprintf(`{listen: ":9443", tls: {cert_file: %q, key_file: %q}}`, cert, filepath.Join(dir, "absent.pem")), "http.tls.key_file", "absent.pem"},
		{fmt.Sprintf(`{listen: ":9443", tls: {cert_file: %q, key_file: %q, client_ca_file: %q}}`, cert, key, key), "http.tls.client_ca_file", key},
		{fmt.Sprintf(`{listen: ":9443", control: true, tls: {cert_file: %q, key_file: %q}}`, cert, key), "http.control", "http.tls.client_ca_file"},
	} {
		_, err := load(tt.http)
		checkInvalid(t, err, tt.key, tt.want)
	}
}

// TestListenerCertificateRenewed: a certificate and key replaced on disk
// are served from the next handshake after the change is seen, without a
// restart; a half-written renewal keeps the last good pair.
func TestListenerCertificateRenewed(t *testing.T) {
	dir := t.TempDir()
	ca := pki.TestCA(t, "turbo-test")
	first := ca.TestIssue(t, pki.Options{CommonName: "first"})
	second := ca.TestIssue(t, pki.Options{CommonName: "second"})
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	put := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(name+".new", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(name+".new", name); err != nil {
			t.Fatal(err)
		}
	}
	put(certFile, first.Cert)
	put(keyFile, first.Key)
	tc, err := ListenerTLS{CertFile: certFile, KeyFile: keyFile}.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c, err := tc.GetCertificate(&tls.ClientHelloInfo{}); err != nil || c.Leaf.Subject.CommonName != "first" {
		t.Fatalf("the listener serves %v, %v; want first", c, err)
	}
	pair := &servedPair{files: TLS{CertFile: certFile, KeyFile: keyFile}}
	served := func() string {
		t.Helper()
		pair.checkedAt = time.Time{} // look at the files now, not a second after the last look
		c, err := pair.get()
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("serving %q, want first", got)
	}
	put(certFile, []byte("not yet a certificate")) // a renewal half written
	if got := served(); got != "first" {
		t.Fatalf("serving %q during a half-written renewal, want the last good one", got)
	}
	put(certFile, second.Cert)
	put(keyFile, second.Key)
	if got := served(); got != "second" {
		t.Fatalf("serving %q after the renewal, want second", got)
	}
}
