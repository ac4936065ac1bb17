package observe

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
	"github.com/turbokafka/turbo/test/testkit/pki"
	"github.com/turbokafka/turbo/test/testkit/scrape"
)

// TestRunServesHTTPSWithClientCertificates: a real `turbo run` with
// http.tls and require_client_cert serves its probes, its metrics and the
// control commands over HTTPS to a client with a certificate of the client
// authority (a command needs no token then), and refuses one without a
// certificate at the handshake.
func TestRunServesHTTPSWithClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := pki.TestCA(t, "turbo-observe")
	server := ca.TestIssue(t, pki.Options{CommonName: "turbo", Hosts: []string{"127.0.0.1"}})
	operator := ca.TestIssue(t, pki.Options{CommonName: "operator"})
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [embedded]
  embedded: {partitions: 2, seed: {topic: tls, records: 100, keys: 10}}
consumers:
  - name: tls
    topics: [tls]
    handler: {type: noop}
http:
  listen: "127.0.0.1:0"
  control: true
  tls: {cert_file: %q, key_file: %q, client_ca_file: %q, require_client_cert: true}
log: {level: info, format: json}
`, pki.Write(t, dir, "server.pem", server.Cert), pki.Write(t, dir, "server-key.pem", server.Key), pki.Write(t, dir, "ca.pem", ca.PEM)))
	run, listen := testkit.StartHTTP(t, nil, nil, "run", "--config", cfg)
	base := "https://" + listen
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	cert, err := tls.X509KeyPair(operator.Cert, operator.Key)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
	without := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}

	testkit.Eventually(t, time.Minute, "/readyz over HTTPS with a client certificate", func() bool {
		resp, err := withCert.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	resp, err := withCert.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m, err := scrape.Parse(raw)
	if err != nil {
		t.Fatalf("/metrics over HTTPS: %v", err)
	}
	if _, ok := m.Value("turbo_records_processed_total", map[string]string{"consumer": "tls"}); !ok {
		t.Fatal("/metrics over HTTPS has no turbo_records_processed_total")
	}
	if resp, err := without.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate got %d, want the handshake refused", resp.StatusCode)
	}
	resp, err = withCert.Post(base+"/consumers/tls/retune", "application/json", strings.NewReader(`{"concurrency":3}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "concurrency 3") {
		t.Fatalf("a retune with the client certificate: %d %s", resp.StatusCode, body)
	}
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
}
