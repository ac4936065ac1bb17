package web

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit/pki"
)

// TestTLSListenerWithClientCertificates: http.tls serves every route over
// HTTPS. With client certificates required, a client without one, or with
// one of another authority, is refused at the handshake, and one with a
// good certificate scrapes /metrics and commands without a token. With
// them only verified when given, probes and scrapes need none, and a
// command without a certificate (or with one of another authority) still
// needs the token.
func TestTLSListenerWithClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := pki.TestCA(t, "turbo-clients")
	other := pki.TestCA(t, "someone-else")
	server := ca.TestIssue(t, pki.Options{CommonName: "turbo", Hosts: []string{"127.0.0.1"}})
	operator := ca.TestIssue(t, pki.Options{CommonName: "operator"})
	stranger := other.TestIssue(t, pki.Options{CommonName: "stranger"})
	token := pki.Write(t, dir, "token", []byte("a-token-of-sixteen-bytes-or-more\n"))
	listener := config.ListenerTLS{
		CertFile:     pki.Write(t, dir, "server.pem", server.Cert),
		KeyFile:      pki.Write(t, dir, "server-key.pem", server.Key),
		ClientCAFile: pki.Write(t, dir, "ca.pem", ca.PEM),
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	client := func(p *pki.Pair) *http.Client {
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if p != nil {
			c, err := tls.X509KeyPair(p.Cert, p.Key)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{c}
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	}
	do := func(c *http.Client, method, url string) (int, error) {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, require := range []bool{true, false} {
		listener.RequireClientCert = require
		tc, err := listener.ServerConfig()
		if err != nil {
			t.Fatal(err)
		}
		ctl := &fakeControl{}
		s, err := Start(Options{Addr: "127.0.0.1:0", Key: "http.listen", Gatherer: prometheus.NewRegistry(), Source: &fakeSource{live: Check{OK: true}},
			Control: ctl, ControlTokenFile: token, TLS: tc, Log: testLog(t)})
		if err != nil {
			t.Fatal(err)
		}
		base := "https://" + s.Addr()
		want := func(c *http.Client, method, path string, code int) {
			t.Helper()
			got, err := do(c, method, base+path)
			switch {
			case code == 0 && err == nil:
				t.Fatalf("require_client_cert %v: %s %s answered %d, want the handshake refused", require, method, path, got)
			case code != 0 && (err != nil || got != code):
				t.Fatalf("require_client_cert %v: %s %s: %d, %v; want %d", require, method, path, got, err, code)
			}
		}
		want(client(&operator), "GET", "/metrics", 200)
		want(client(&operator), "POST", "/consumers/orders/pause", 200) // the certificate, no token
		if require {
			want(client(&stranger), "GET", "/healthz", 0)
			want(client(nil), "GET", "/healthz", 0)
			want(client(nil), "GET", "/metrics", 0)
		} else {
			want(client(nil), "GET", "/healthz", 200)
			want(client(nil), "GET", "/metrics", 200)
			want(client(nil), "POST", "/consumers/orders/pause", 403) // neither a certificate nor the token
			// A certificate the listener's authorities did not sign is not
			// sent (the client finds none they accept): no command either.
			want(client(&stranger), "GET", "/healthz", 200)
			want(client(&stranger), "POST", "/consumers/orders/pause", 403)
		}
		if code, err := do(http.DefaultClient, "GET", "http://"+s.Addr()+"/healthz"); err != nil || code != http.StatusBadRequest {
			t.Fatalf("plain HTTP to the TLS listener: %d, %v; want 400", code, err)
		}
		resp, err := client(&operator).Get(base + "/status")
		if err != nil {
			t.Fatal(err)
		}
		var st Status
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || len(st.Commands) != 1 || !strings.HasPrefix(st.Commands[0].Auth, "client certificate CN=operator,") {
			t.Fatalf("/status commands %+v (%v), want one let in by the client certificate CN=operator", st.Commands, err)
		}
		if len(ctl.calls) != 1 {
			t.Fatalf("require_client_cert %v: %d commands carried out, want 1", require, len(ctl.calls))
		}
		s.Stop()
	}
}
