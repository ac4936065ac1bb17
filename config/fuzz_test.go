package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// FuzzLoad feeds arbitrary bytes to Load as a YAML file: it must never
// panic, and must return either an error wrapping ErrInvalid or a
// configuration whose every size, count and interval is within the bounds
// the "Limits" table of config/README.md documents (checked by withinLimits, written
// out apart from Validate so that the two check each other).
func FuzzLoad(f *testing.F) {
	seeds := []string{
		fullYAML,
		"consumers:\n  - name: orders\n    topics: [orders]\n    handler: {type: noop}\n",
		"consumers: [{name: a, topics: [t], concurrency: 0, handler: {type: noop}}]",
		"consumers: [{name: a, topics: 5, commit_interval: 5 parsecs}]",
		"kafka: {brokers: [embedded], embedded: {seed: {records: 3, topic: t}}}\nconsumers: [{name: a, topics: [t], handler: {type: noop}}]",
		"consumers: [{name: a, topics: [t], handler: {type: http, url: /x}}]",
		"consumers: [{name: a, topics: [t], retry: {max_attempts: 2, max_backoff: 1ms}, on_failure: dlq, dlq_topic: d}]",
		"consumers: [{name: a, topics: [t], retry: 5, commit_metadata_bytes: 9, max_handler_time: -1s}]",
		"a: &x {b: *x}",
		"consumers: [~, 1, [2], {3: 4}]",
		"? [a]\n: b\n",
		"kafka: {version: 3.6}\nshutdown_timeout: 1e400\n",
		"consumers:\n\t- bad",
		"",
		// Hostile values, and the bounds themselves.
		"consumers: [{name: a, topics: [t], concurrency: 1000000000, max_buffered: 1000000000000, handler: {type: noop}}]",
		"consumers: [{name: a, topics: [t], concurrency: 10000, max_buffered: 100000, commit_interval: 10ms, handler: {type: noop}}]",
		"consumers: [{name: a, topics: [t], max_buffered: 9223372036854775807, commit_interval: 1ns, handler: {type: noop}}]",
		"kafka: {brokers: [embedded], embedded: {partitions: 1e9}}\nconsumers: [{name: a, topics: [t], handler: {type: noop}}]",
		"swarm: {supervision_interval: 1ns, node_report_interval: 1ns, node_report_timeout: 2ns}\nconsumers: [{name: a, topics: [t], handler: {type: noop}}]",
		"swarm: {node_report_interval: 100ms, node_report_timeout: 300ms, liveness_listen: not an address}\nhttp: {listen: \"::1:9100\"}\nconsumers: [{name: a, topics: [t], handler: {type: noop}}]",
		"http: {listen: \":9100\"}\ntracing: {otlp_endpoint: \"HTTP://c:4318\", service_name: orders}\nconsumers: [{name: a, topics: [t], handler: {type: noop}}]",
		"consumers: [{name: a, topics: [\"a b\", \"..\", \"t\\nx\"], handler: {type: noop}}]",
		"kafka: {brokers: [no-port, EMBEDDED], version: 0.10.2.0}\nconsumers: [{name: a, topics: [t], concurrency: \"4\", handler: {type: noop}}]",
		"consumers: [{name: a, topics: [t], handler: {type: http, url: \"http://127.0.0.1:99999/x\"}}]",
		"consumers: [{name: a, topics: [t], handler: {type: noop}}]\n---\nconsumers: []\n",
		"kafka: {version: 2.4.0}\nconsumers: [{name: a, topics: [t], max_handler_time: 1ms, retry: {initial_backoff: 1ms, max_backoff: 24h}}]\nshutdown_timeout: 1h",
		// The security sections.
		"kafka: {brokers: [k:9093], tls: {enabled: true, insecure_skip_verify: true}, sasl: {mechanism: SCRAM-SHA-512, username: u, password: p}}\nconsumers: [{name: a, topics: [t], handler: {type: noop}}]",
		"kafka: {brokers: [k:9093], sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"https://i/t\", client_id: c, client_secret: s, scopes: [a], extensions: {logicalCluster: x}}}}\nconsumers: [{name: a, topics: [t], handler: {type: noop}}]",
		"kafka: {tls: {enabled: yes, ca_file: /dev/zero}, sasl: {mechanism: plain, oauth: {extensions: [1]}}}\nconsumers: [{name: a, topics: [t], handler: {type: noop}}]",
		"kafka: {brokers: [k:9093], sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"http://[::1]:80/t\", client_id: c, client_secret: s, auth_style: body}}}\nconsumers: [{name: a, topics: [t], handler: {type: noop}}]",
		"kafka: {brokers: [k:9093], sasl: {mechanism: OAUTHBEARER, oauth: {token_url: \"http://localhost.example/t\", client_id: c, client_secret: s, auth_style: Header}}}\nconsumers: [{name: a, topics: [t], handler: {type: noop}}]",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		// One file reused across iterations: t.TempDir per input would make
		// the fuzzer spend its time creating directories.
		path := filepath.Join(dir, "fuzz.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		env := envMap(map[string]string{"TURBO_CONSUMERS_0_CONCURRENCY": "3"})
		c, err := Load(path, env)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %q does not wrap ErrInvalid", err)
			}
			if c != nil {
				t.Fatalf("config returned with error %q", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Load returned a config that fails Validate: %v", err)
		}
		if err := withinLimits(c); err != nil {
			t.Fatalf("Load returned a config outside the documented limits: %v", err)
		}
	})
}

// withinLimits checks c against config/README.md's "Limits" table, written out
// with literal numbers on purpose: a change of a bound in limits.go that the
// table does not follow fails here.
func withinLimits(c *Config) error {
	const (
		ms  = time.Millisecond
		day = 24 * time.Hour
	)
	type ir struct {
		key       string
		v, lo, hi int
	}
	type dr struct {
		key       string
		v, lo, hi time.Duration
	}
	k, s := c.Kafka, c.Swarm
	ints := []ir{
		{"consumers (count)", len(c.Consumers), 1, 256},
		{"kafka.brokers (count)", len(k.Brokers), 1, 100},
		{"kafka.embedded.partitions", k.Embedded.Partitions, 1, 1000},
		{"kafka.embedded.seed.records", k.Embedded.Seed.Records, 0, 100_000},
		{"kafka.embedded.seed.keys", k.Embedded.Seed.Keys, 0, 100_000},
		{"kafka.sasl.oauth.scopes (count)", len(k.SASL.OAuth.Scopes), 0, 64},
		{"kafka.sasl.oauth.extensions (count)", len(k.SASL.OAuth.Extensions), 0, 64},
		{"kafka.sasl.username (bytes)", len(k.SASL.Username), 0, 4096},
		{"swarm.nodes", s.Nodes, 1, 256},
		{"swarm.max_restarts", s.MaxRestarts, 0, 10_000},
	}
	durs := []dr{
		{"shutdown_timeout", c.ShutdownTimeout, time.Second, time.Hour},
		{"swarm.node_report_interval", s.NodeReportInterval, 100 * ms, day},
		{"swarm.node_report_timeout", s.NodeReportTimeout, 3 * s.NodeReportInterval, day},
		{"swarm.node_restart_timeout", s.NodeRestartTimeout, 0, day},
		{"swarm.supervision_interval", s.SupervisionInterval, 10 * ms, day},
		{"swarm.restart_window", s.RestartWindow, time.Second, day},
	}
	if k.Embedded.Seed.Records > 0 && k.Embedded.Seed.Keys < 1 {
		return fmt.Errorf("kafka.embedded.seed.keys %d with records", k.Embedded.Seed.Keys)
	}
	if m := s.MemoryLimit; m != 0 && (m < 16<<20 || m > 16<<40) {
		return fmt.Errorf("swarm.memory_limit %d", m)
	}
	for i, cc := range c.Consumers {
		p := fmt.Sprintf("consumers[%d].", i)
		ints = append(ints,
			ir{p + "topics (count)", len(cc.Topics), 1, 1000},
			ir{p + "exclude_topics (count)", len(cc.ExcludeTopics), 0, 1000},
			ir{p + "concurrency", cc.Concurrency, 1, 10_000},
			ir{p + "max_buffered", cc.MaxBuffered, 0, 100_000},
			ir{p + "retry.max_attempts", cc.Retry.MaxAttempts, 1, 1_000_000},
		)
		durs = append(durs,
			dr{p + "commit_interval", cc.CommitInterval, 10 * ms, day},
			dr{p + "metadata_refresh", cc.MetadataRefresh, 100 * ms, day},
			dr{p + "retry.initial_backoff", cc.Retry.InitialBackoff, ms, day},
			dr{p + "retry.max_backoff", cc.Retry.MaxBackoff, cc.Retry.InitialBackoff, day},
			dr{p + "handler.timeout", cc.Handler.Timeout, ms, day},
		)
		if cc.Handler.Type == HandlerSleep {
			durs = append(durs, dr{p + "handler.duration", cc.Handler.Duration, 0, day})
		}
		if cc.Handler.Type == HandlerHash {
			ints = append(ints, ir{p + "handler.bytes", cc.Handler.Bytes, 1, 1 << 30})
		}
		if cc.MaxHandlerTime != 0 {
			durs = append(durs, dr{p + "max_handler_time", cc.MaxHandlerTime, ms, day})
		}
		if b := cc.MaxBufferedBytes; b < 1<<20 || b > 16<<30 {
			return fmt.Errorf("%smax_buffered_bytes %d", p, b)
		}
		if n := cc.CommitMetadataBytes; n != 0 {
			ints = append(ints, ir{p + "commit_metadata_bytes", n, 64, 4096})
		}
		for j, t := range cc.Topics {
			if !validTopic(t) {
				return fmt.Errorf("%stopics[%d] %q", p, j, t)
			}
		}
	}
	for _, b := range ints {
		if b.v < b.lo || b.v > b.hi {
			return fmt.Errorf("%s = %d, outside %d..%d", b.key, b.v, b.lo, b.hi)
		}
	}
	for _, b := range durs {
		if b.v < b.lo || b.v > b.hi {
			return fmt.Errorf("%s = %s, outside %s..%s", b.key, b.v, b.lo, b.hi)
		}
	}
	if v, ok := parseVersion(k.Version); !ok || versionLess(v, [3]int{2, 4, 0}) {
		return fmt.Errorf("kafka.version %q", k.Version)
	}
	if a := k.SASL.OAuth.AuthStyle; a != "header" && a != "body" {
		return fmt.Errorf("kafka.sasl.oauth.auth_style %q", a)
	}
	if k.SASL.Mechanism == SASLOAuthBearer {
		u, err := url.Parse(k.SASL.OAuth.TokenURL)
		if err != nil {
			return fmt.Errorf("kafka.sasl.oauth.token_url %q", k.SASL.OAuth.TokenURL)
		}
		ip := net.ParseIP(u.Hostname())
		local := strings.EqualFold(u.Hostname(), "localhost") || ip.Equal(net.IPv6loopback) || (ip.To4() != nil && ip.To4()[0] == 127)
		if u.Scheme != "https" && !(u.Scheme == "http" && local) {
			return fmt.Errorf("kafka.sasl.oauth.token_url %q: plain http to a host that is not loopback", k.SASL.OAuth.TokenURL)
		}
	}
	if l := c.HTTP.Listen; l != "" && !validListen(l) {
		return fmt.Errorf("http.listen %q", l)
	}
	if e := strings.ToLower(c.Tracing.OTLPEndpoint); len(e) > 4096 || (e != "" && !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://")) {
		return fmt.Errorf("tracing.otlp_endpoint %q", e)
	}
	if n := c.Tracing.ServiceName; len(n) > 255 {
		return fmt.Errorf("tracing.service_name of %d bytes", len(n))
	}
	return nil
}

// FuzzStringFields puts an arbitrary scalar where turbo expects text (a
// consumer's group, a topic, the SASL password) and checks Load against
// what the YAML parser itself makes of it: text is kept exactly as parsed;
// a number or a boolean is refused with an error naming the key, which for
// the password shows neither what was written nor what YAML read.
func FuzzStringFields(f *testing.F) {
	for _, s := range []string{"orders", "0123", "007", "1.50", ".inf", "0x1F", "1e3", "true", "no", "~", "\"0123\"", "'x'", "-1", "2026-11-26", "a b", "0o17", "+12", "1_000"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, v string) {
		if strings.ContainsAny(v, "\n\r#:{}[],&*!|>%@`\"'") && !(strings.HasPrefix(v, "\"") || strings.HasPrefix(v, "'")) || strings.ContainsAny(v, "\n\r") {
			return // not one plain or quoted scalar on a line
		}
		var parsed struct {
			Group any `yaml:"group"`
		}
		if yaml.Unmarshal([]byte("group: "+v+"\n"), &parsed) != nil {
			return // not a scalar YAML reads; the file would be refused as unparseable
		}
		cases := []struct {
			key, doc string
			secret   bool
		}{
			{"consumers[0].group", "consumers:\n  - {name: a, topics: [t], handler: {type: noop}, group: " + v + "}\n", false},
			{"consumers[0].topics[0]", "consumers:\n  - {name: a, topics: [" + v + "], handler: {type: noop}}\n", false},
			{"kafka.sasl.password", "kafka: {sasl: {mechanism: PLAIN, username: u, password: " + v + "}}\nconsumers:\n  - {name: a, topics: [t], handler: {type: noop}}\n", true},
		}
		for _, c := range cases {
			path := filepath.Join(dir, "s.yaml")
			if err := os.WriteFile(path, []byte(c.doc), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path, nil)
			switch p := parsed.Group.(type) {
			case string:
				if err != nil {
					continue // text can be invalid as a group or topic: Validate says so
				}
				got := map[string]string{"consumers[0].group": cfg.Consumers[0].Group, "kafka.sasl.password": cfg.Kafka.SASL.Password.Reveal()}
				if len(cfg.Consumers[0].Topics) == 1 {
					got["consumers[0].topics[0]"] = cfg.Consumers[0].Topics[0]
				}
				if c.key == "consumers[0].group" && p == "" {
					p = "a" // an empty group means the name
				}
				if got[c.key] != p {
					t.Fatalf("%s: YAML reads %q, Load made %q", c.key, p, got[c.key])
				}
			case nil:
				// null: absent (a default applies, or a required key is missing)
			default:
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Key != c.key || !strings.Contains(err.Error(), "quote it") {
					t.Fatalf("%s: YAML reads %v (%T); Load: %v, want a refusal naming %s", c.key, p, p, err, c.key)
				}
				if c.secret && (strings.Contains(err.Error(), strings.TrimSpace(v)) || strings.Contains(err.Error(), fmt.Sprint(p))) {
					t.Fatalf("the error about a password shows it: %v", err)
				}
			}
		}
	})
}
