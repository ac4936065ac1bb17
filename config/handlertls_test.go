package config

import (
	"fmt"
	"testing"
)

// TestHandlerTLS: an https handler takes the CA, a client certificate and
// a server name; refusals name the key.
func TestHandlerTLS(t *testing.T) {
	f := writeTLSFiles(t)
	ok := []string{"handler:", "  type: http", "  url: https://svc.internal:8443/records",
		"  tls:", fmt.Sprintf("    ca_file: %s", f.ca), fmt.Sprintf("    cert_file: %s", f.cert), fmt.Sprintf("    key_file: %s", f.key), "    server_name: svc"}
	c, err := Load(writeConfig(t, "app.yaml", oneConsumer(ok)), noEnv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := c.Consumers[0].Handler.TLS; got.CAFile != f.ca || got.CertFile != f.cert || got.KeyFile != f.key || got.ServerName != "svc" {
		t.Fatalf("handler.tls = %+v", got)
	}
	tests := []struct {
		name    string
		lines   []string
		wantKey string
		wantIn  []string
	}{
		{"plain http", []string{"handler:", "  type: http", "  url: http://svc/records", "  tls:", "    ca_file: " + f.ca},
			"consumers[0].handler.tls", []string{"needs an https:// url"}},
		{"enabled", []string{"handler:", "  type: http", "  url: https://svc/records", "  tls:", "    enabled: true"},
			"consumers[0].handler.tls.enabled", []string{"an https:// url turns TLS on"}},
		{"not http", []string{"handler:", "  type: noop", "  tls:", "    ca_file: " + f.ca},
			"consumers[0].handler.tls", []string{"http and grpc only"}},
		{"cert without key", []string{"handler:", "  type: http", "  url: https://svc/records", "  tls:", "    cert_file: " + f.cert},
			"consumers[0].handler.tls.key_file", []string{"is required with consumers[0].handler.tls.cert_file"}},
		{"expired", []string{"handler:", "  type: http", "  url: https://svc/records", "  tls:", "    cert_file: " + f.expiredCert, "    key_file: " + f.expiredKey},
			"consumers[0].handler.tls.cert_file", []string{"expired"}},
		{"missing CA", []string{"handler:", "  type: http", "  url: https://svc/records", "  tls:", "    ca_file: /nonexistent/ca.pem"},
			"consumers[0].handler.tls.ca_file", []string{"/nonexistent/ca.pem"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, "app.yaml", oneConsumer(tt.lines)), noEnv)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			checkInvalid(t, err, tt.wantKey, tt.wantIn...)
		})
	}
}

// TestGRPCHandlerConfig: a grpc handler names its target; url, encoding
// and a missing target are refused.
func TestGRPCHandlerConfig(t *testing.T) {
	c, err := Load(writeConfig(t, "app.yaml", oneConsumer([]string{"handler: {type: grpc, target: 'dns:///svc:50051', timeout: 2s}"})), noEnv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if h := c.Consumers[0].Handler; h.Type != HandlerGRPC || h.Target != "dns:///svc:50051" {
		t.Fatalf("handler = %+v", h)
	}
	for _, tt := range []struct {
		name, line, wantKey string
	}{
		{"no target", "handler: {type: grpc}", "consumers[0].handler.target"},
		{"a url", "handler: {type: grpc, target: 'svc:1', url: 'http://x/y'}", "consumers[0].handler.url"},
		{"encoding", "handler: {type: grpc, target: 'svc:1', encoding: utf8}", "consumers[0].handler.encoding"},
		{"target on http", "handler: {type: http, url: 'http://x/y', target: 'svc:1'}", "consumers[0].handler.target"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, "app.yaml", oneConsumer([]string{tt.line})), noEnv)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			checkInvalid(t, err, tt.wantKey)
		})
	}
}
