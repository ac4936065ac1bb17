package config

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// HTTP configures the process's one HTTP listener: GET /metrics
// (Prometheus), /healthz (liveness), /readyz (readiness), /status (JSON) and
// / (the live console). `turbo run` serves its consumers there; `turbo
// swarm`'s supervisor serves every node's.
type HTTP struct {
	// Listen is the address (host:port) to listen on; empty (the default)
	// opens no port. Port 0 takes any free port: the address bound is logged
	// at start, in the line "http listening: ..." (field addr).
	Listen string `mapstructure:"listen"`
	// Control turns on the control commands, POST
	// /consumers/{name}/{action}: pause and resume a consumer, a topic or a
	// partition, retune concurrency and the rate limit, skip a record, move
	// partitions to an offset or a time (off by default), and the console's
	// buttons for them. Without ControlTokenFile they answer clients on the
	// loopback interface only, and Listen must be a loopback address. They
	// refuse requests a browser sends from another origin. On `turbo swarm`
	// the supervisor's listener takes them and sends each to its nodes. It
	// needs Listen.
	Control bool `mapstructure:"control"`
	// ControlTokenFile is a file holding the bearer token every control
	// command must carry (Authorization: Bearer <token>), from any client:
	// 16 bytes to 4 KiB, white space around it ignored. It is read again
	// when it changes, so a rotated token works without a restart. Needed
	// when Listen is not a loopback address.
	ControlTokenFile string `mapstructure:"control_token_file"`
	// TLS serves the listener over HTTPS (and can verify client
	// certificates).
	TLS ListenerTLS `mapstructure:"tls"`
}

// Tracing configures OpenTelemetry spans: one per handler attempt, a child
// of the record's trace when it carries a W3C traceparent header. Trace
// context reaches handlers (and the http handler's requests) whether or not
// spans are exported.
type Tracing struct {
	// OTLPEndpoint is the OTLP/HTTP endpoint spans are exported to, e.g.
	// http://127.0.0.1:4318 (the exporter appends /v1/traces when the URL
	// has no path). Empty (the default) exports nothing.
	OTLPEndpoint string `mapstructure:"otlp_endpoint"`
	// ServiceName is the service.name resource attribute of the spans;
	// "turbo" when empty.
	ServiceName string `mapstructure:"service_name"`
}

// maxServiceName bounds Tracing.ServiceName.
const maxServiceName = 255

func (h *HTTP) validate() error {
	if h.Listen != "" && !validListen(h.Listen) {
		return fieldErr("http.listen", fmt.Sprintf("must be host:port with a port from 0 to 65535 (0: any free port, logged at start), e.g. 127.0.0.1:9100 or :9100 (got %s)", quoteValue(h.Listen)))
	}
	if h.Control && h.Listen == "" {
		return fieldErr("http.control", "needs http.listen: the control routes are served there")
	}
	if h.ControlTokenFile != "" {
		if !h.Control {
			return fieldErr("http.control_token_file", "needs http.control: true (the token guards the control commands)")
		}
		if _, err := ReadControlToken(h.ControlTokenFile); err != nil {
			return fieldErr("http.control_token_file", err.Error())
		}
	}
	if err := h.TLS.validate(h.Listen, time.Now()); err != nil {
		return err
	}
	if h.Control && h.ControlTokenFile == "" && h.TLS.ClientCAFile == "" && !loopbackListen(h.Listen) {
		return fieldErr("http.control", fmt.Sprintf("on a listener other hosts can reach (http.listen %s) needs http.control_token_file or http.tls.client_ca_file: without either, anyone who reaches the port could pause your consumers", quoteValue(h.Listen)))
	}
	return nil
}

// ServerTLS is the listener's TLS configuration; nil when http.tls is not
// set (plain HTTP).
func (h HTTP) ServerTLS() (*tls.Config, error) {
	if !h.TLS.IsSet() {
		return nil, nil
	}
	return h.TLS.ServerConfig()
}

// loopbackListen reports whether a listen address accepts loopback
// clients only: an IP address on the loopback interface, or localhost.
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (t *Tracing) validate() error {
	if t.OTLPEndpoint != "" {
		u, err := url.Parse(t.OTLPEndpoint)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" ||
			(u.Port() != "" && !validPort(u.Port())) || len(t.OTLPEndpoint) > maxCredentialLen:
			return fieldErr("tracing.otlp_endpoint", fmt.Sprintf("must be an http:// or https:// URL with a host and, if given, a port from 1 to 65535, e.g. http://127.0.0.1:4318 (got %s)", quoteValue(t.OTLPEndpoint)))
		case u.User != nil:
			// The endpoint is logged when an export fails.
			return fieldErr("tracing.otlp_endpoint", "must not hold credentials")
		case u.RawQuery != "" || u.Fragment != "":
			// The OTLP exporter drops them: what is sent would not be what
			// was asked for.
			return fieldErr("tracing.otlp_endpoint", fmt.Sprintf("must have no query or fragment (got %s)", quoteValue(t.OTLPEndpoint)))
		}
	}
	if len(t.ServiceName) > maxServiceName || !printable(t.ServiceName) {
		return fieldErr("tracing.service_name", fmt.Sprintf("must be printable and at most %d bytes", maxServiceName))
	}
	return nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// ListenerTLS is http.tls: the listener serves HTTPS, and can verify
// client certificates.
type ListenerTLS struct {
	// CertFile and KeyFile are the listener's certificate (PEM, its chain
	// after it) and key. Both, or no TLS. They are read again when they
	// change on disk (a renewed certificate is served without a restart).
	CertFile string `mapstructure:"cert_file"`
	KeyFile  string `mapstructure:"key_file"`
	// ClientCAFile is a PEM bundle of the authorities that sign client
	// certificates. A client that presents one is verified against it, and
	// a verified client certificate lets control commands in, as the token
	// does.
	ClientCAFile string `mapstructure:"client_ca_file"`
	// RequireClientCert refuses, at the handshake, every client without a
	// certificate signed by ClientCAFile: every route then needs one, the
	// probes and the metrics scrape too.
	RequireClientCert bool `mapstructure:"require_client_cert"`
}

// IsSet reports whether any setting is given.
func (t ListenerTLS) IsSet() bool { return t != ListenerTLS{} }

func (t *ListenerTLS) validate(listen string, now time.Time) error {
	if !t.IsSet() {
		return nil
	}
	switch {
	case listen == "":
		return fieldErr("http.tls", "needs http.listen: it is that listener's TLS")
	case t.CertFile == "":
		return fieldErr("http.tls.cert_file", "is required with http.tls (and http.tls.key_file)")
	case t.KeyFile == "":
		return fieldErr("http.tls.key_file", "is required with http.tls.cert_file")
	case t.RequireClientCert && t.ClientCAFile == "":
		return fieldErr("http.tls.require_client_cert", "needs http.tls.client_ca_file: the authorities client certificates are checked against")
	}
	pair := TLS{CertFile: t.CertFile, KeyFile: t.KeyFile}
	if err := pair.validateFiles("http.tls", now); err != nil {
		return err
	}
	if t.ClientCAFile != "" {
		if _, err := (TLS{CAFile: t.ClientCAFile}).CertPool(); err != nil {
			return fieldErr("http.tls.client_ca_file", err.Error())
		}
	}
	return nil
}

// ServerConfig is the listener's TLS: its certificate read again when a
// file of it changes, client certificates verified against ClientCAFile
// when given (required with RequireClientCert).
func (t ListenerTLS) ServerConfig() (*tls.Config, error) {
	pair := &servedPair{files: TLS{CertFile: t.CertFile, KeyFile: t.KeyFile}}
	if _, err := pair.get(); err != nil {
		return nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return pair.get() }}
	if t.ClientCAFile != "" {
		pool, err := (TLS{CAFile: t.ClientCAFile}).CertPool()
		if err != nil {
			return nil, fmt.Errorf("http.tls.client_ca_file: %w", err)
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
		if t.RequireClientCert {
			tc.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return tc, nil
}

// servedPair is a certificate and key read again when either file's size,
// time or identity changes, and kept otherwise (a handshake does not read
// two files).
type servedPair struct {
	files TLS

	mu        sync.Mutex
	cert, key os.FileInfo
	c         *tls.Certificate
	checkedAt time.Time
}

// pairRecheck is how often the files are looked at (stat) for a change.
const pairRecheck = time.Second

func (p *servedPair) get() (*tls.Certificate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if p.c != nil && now.Sub(p.checkedAt) < pairRecheck {
		return p.c, nil
	}
	p.checkedAt = now
	cert, err1 := os.Stat(p.files.CertFile)
	key, err2 := os.Stat(p.files.KeyFile)
	if p.c != nil && err1 == nil && err2 == nil && sameFile(p.cert, cert) && sameFile(p.key, key) {
		return p.c, nil
	}
	c, _, err := p.files.clientCertificate("http.tls")
	if err != nil {
		if p.c != nil {
			return p.c, nil // keep serving the last good pair while a renewal is half written
		}
		return nil, err
	}
	p.c, p.cert, p.key = c, cert, key
	return c, nil
}

func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
