package handlers

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit/pki"
)

// mtlsServer is an HTTPS server that offers HTTP/2 and requires a client
// certificate signed by ca; it notes each request's protocol and client.
func mtlsServer(t *testing.T, ca *pki.CA) (srv *httptest.Server, proto, client *atomic.Value) {
	t.Helper()
	proto, client = &atomic.Value{}, &atomic.Value{}
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(r.Proto)
		if len(r.TLS.PeerCertificates) > 0 {
			client.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	srv.TLS = ca.TestServerTLS(t, "downstream", "127.0.0.1")
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, proto, client
}

// TestHTTPOverMTLSAndHTTP2: with handler.tls naming the CA and a client
// certificate, a record reaches a server that requires the certificate,
// over HTTP/2 (which the server offers); a batch too.
func TestHTTPOverMTLSAndHTTP2(t *testing.T) {
	ca := pki.TestCA(t, "downstream-ca")
	srv, proto, client := mtlsServer(t, ca)
	dir := t.TempDir()
	mine := ca.TestIssue(t, pki.Options{CommonName: "turbo-client"})
	h, err := New(config.Handler{Type: config.HandlerHTTP, URL: srv.URL + "/records", Timeout: 5 * time.Second, TLS: config.TLS{
		CAFile:   pki.Write(t, dir, "ca.pem", ca.PEM),
		CertFile: pki.Write(t, dir, "client.pem", mine.Cert),
		KeyFile:  pki.Write(t, dir, "client.key", mine.Key),
	}}, 4, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	rec := &actors.Record{Topic: "t", Partition: 0, Offset: 1, Value: []byte("v")}
	if err := h.Handle(context.Background(), rec); err != nil {
		t.Fatalf("Handle over mTLS: %v", err)
	}
	if p := proto.Load(); p != "HTTP/2.0" {
		t.Fatalf("the request came over %v, want HTTP/2.0", p)
	}
	if c := client.Load(); c != "turbo-client" {
		t.Fatalf("the server saw client %v, want turbo-client", c)
	}
	if res := h.(actors.BatchHandler).HandleBatch(context.Background(), []*actors.Record{rec, rec}); res.Err != nil {
		t.Fatalf("HandleBatch over mTLS: %v", res.Err)
	}
}

// TestHTTPTLSRefusals: without the client certificate the server refuses
// the handshake, and a server signed by another CA is not trusted; both are
// retryable failures that name the URL and never a key.
func TestHTTPTLSRefusals(t *testing.T) {
	ca := pki.TestCA(t, "downstream-ca")
	srv, _, _ := mtlsServer(t, ca)
	dir := t.TempDir()
	mine := ca.TestIssue(t, pki.Options{CommonName: "turbo-client"})
	other := pki.TestCA(t, "someone-else")
	for _, tt := range []struct {
		name string
		tls  config.TLS
	}{
		{"no client certificate", config.TLS{CAFile: pki.Write(t, dir, "ca.pem", ca.PEM)}},
		{"another CA", config.TLS{CAFile: pki.Write(t, dir, "other.pem", other.PEM),
			CertFile: pki.Write(t, dir, "client.pem", mine.Cert), KeyFile: pki.Write(t, dir, "client.key", mine.Key)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := New(config.Handler{Type: config.HandlerHTTP, URL: srv.URL, Timeout: 5 * time.Second, TLS: tt.tls}, 1, nil)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			err = h.Handle(context.Background(), &actors.Record{Topic: "t", Value: []byte("v")})
			if err == nil {
				t.Fatal("the handshake succeeded")
			}
			if !strings.Contains(err.Error(), srv.URL) || strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Fatalf("error %q: want the URL named and no key", err)
			}
			if errors.Is(err, actors.ErrPermanent) {
				t.Fatalf("%v is permanent; a TLS failure may heal (a renewed certificate)", err)
			}
		})
	}
}
