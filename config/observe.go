package config

import (
	"fmt"
	"net/url"
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
	// Control turns on POST /consumers/{name}/pause and .../resume (off by
	// default). They answer clients on the loopback interface only, and
	// refuse requests a browser sends across origins (an Origin header).
	// `turbo run` only; it needs Listen.
	Control bool `mapstructure:"control"`
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
	return nil
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
