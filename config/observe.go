package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
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
	// partition, retune concurrency and the rate limit (off by default).
	// Without ControlTokenFile they answer clients on the loopback interface
	// only, and Listen must be a loopback address. They refuse requests a
	// browser sends from another origin. `turbo run` only; it needs Listen.
	Control bool `mapstructure:"control"`
	// ControlTokenFile is a file holding the bearer token every control
	// command must carry (Authorization: Bearer <token>), from any client:
	// 16 bytes to 4 KiB, white space around it ignored. It is read again
	// when it changes, so a rotated token works without a restart. Needed
	// when Listen is not a loopback address.
	ControlTokenFile string `mapstructure:"control_token_file"`
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
	if h.Control && h.ControlTokenFile == "" && !loopbackListen(h.Listen) {
		return fieldErr("http.control", fmt.Sprintf("on a listener other hosts can reach (http.listen %s) needs http.control_token_file: without a token, anyone who reaches the port could pause your consumers", quoteValue(h.Listen)))
	}
	return nil
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
