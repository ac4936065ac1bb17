package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadString writes content to a file named name in a temporary directory
// and loads it with environ.
func loadString(t *testing.T, name, content string, environ []string) (*Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path, environ)
}

// wantFieldError fails unless err is a FieldError on key whose message
// holds every one of want.
func wantFieldError(t *testing.T, err error, key string, want ...string) {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("want a FieldError on %s, got %v", key, err)
	}
	if fe.Key != key {
		t.Fatalf("the error names %s, want %s: %v", fe.Key, key, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the error %q does not say %q", err, w)
		}
	}
}

// A file cut short (an editor's, a config tool's or kubectl cp's write
// caught half way) is often still valid: the handler section is what goes
// missing, and a consumer without one must not quietly acknowledge and
// commit every record with noop.
func TestLoadRefusesAConsumerWithoutAHandler(t *testing.T) {
	const full = `kafka:
  brokers: [k:9092]
consumers:
  - name: orders
    topics: [orders]
    concurrency:
      8
    handler:
      type: http
      url: http://127.0.0.1:8080/hook
`
	cut := func(after string) string {
		i := strings.Index(full, after)
		if i < 0 {
			t.Fatalf("%q is not in the file", after)
		}
		return full[:i+len(after)]
	}
	if _, err := loadString(t, "app.yaml", full, nil); err != nil {
		t.Fatalf("the whole file: %v", err)
	}
	tests := []struct {
		name, file, content, key string
		environ                  []string
	}{
		{"cut after the topics", "app.yaml", cut("topics: [orders]\n"), "consumers[0].handler", nil},
		{"cut after concurrency:", "app.yaml", cut("concurrency:\n"), "consumers[0].handler", nil},
		{"cut after handler:", "app.yaml", cut("handler:\n"), "consumers[0].handler", nil},
		{"handler without a type", "app.yaml", "consumers:\n  - name: orders\n    topics: [orders]\n    handler: {timeout: 1s}\n", "consumers[0].handler.type", nil},
		{"the second consumer", "app.yaml", "consumers:\n  - name: a\n    topics: [a]\n    handler: {type: noop}\n  - name: b\n    topics: [b]\n", "consumers[1].handler", nil},
		{"json", "app.json", `{"consumers": [{"name": "orders", "topics": ["orders"]}]}`, "consumers[0].handler", nil},
		{"toml", "app.toml", "[[consumers]]\nname = \"orders\"\ntopics = [\"orders\"]\n", "consumers[0].handler", nil},
		{"another key from the environment", "app.yaml", cut("topics: [orders]\n"), "consumers[0].handler", []string{"TURBO_CONSUMERS_0_HANDLER_TIMEOUT=1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadString(t, tt.file, tt.content, tt.environ)
			if err == nil {
				t.Fatalf("loaded, with handler %q: want an error naming %s", cfg.Consumers[len(cfg.Consumers)-1].Handler.Type, tt.key)
			}
			wantFieldError(t, err, tt.key, "noop")
		})
	}

	// Written, noop runs; so does a type the environment sets.
	for name, c := range map[string]struct {
		content string
		environ []string
	}{
		"noop written":          {"consumers:\n  - name: orders\n    topics: [orders]\n    handler: {type: noop}\n", nil},
		"type from environment": {cut("topics: [orders]\n"), []string{"TURBO_CONSUMERS_0_HANDLER_TYPE=noop"}},
	} {
		cfg, err := loadString(t, "app.yaml", c.content, c.environ)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := cfg.Consumers[0].Handler.Type; got != HandlerNoop {
			t.Fatalf("%s: handler %q, want noop", name, got)
		}
	}
}

// A scalar YAML (or JSON, or TOML) reads as a number or a boolean where
// turbo expects text is refused, naming the key: `group: 0123` became group
// "83", another group, which starts over from initial_offset.
func TestLoadRefusesNumbersForStrings(t *testing.T) {
	tests := []struct {
		name, file, content, key string
	}{
		{"octal group", "app.yaml", "consumers:\n  - name: orders\n    group: 0123\n    topics: [orders]\n    handler: {type: noop}\n", "consumers[0].group"},
		{"octal topic", "app.yaml", "consumers:\n  - name: orders\n    topics: [orders, 0123]\n    handler: {type: noop}\n", "consumers[0].topics[1]"},
		{"float topic", "app.yaml", "consumers:\n  - name: orders\n    topics: [1e3]\n    handler: {type: noop}\n", "consumers[0].topics[0]"},
		{"hex topic", "app.yaml", "consumers:\n  - name: orders\n    topics: [0x1F]\n    handler: {type: noop}\n", "consumers[0].topics[0]"},
		{"octal dead-letter topic", "app.yaml", "consumers:\n  - name: orders\n    topics: [orders]\n    on_failure: dlq\n    dlq_topic: 0777\n    handler: {type: noop}\n", "consumers[0].dlq_topic"},
		{"leading zeros", "app.yaml", "kafka:\n  client_id: 007\nconsumers:\n  - name: orders\n    topics: [orders]\n    handler: {type: noop}\n", "kafka.client_id"},
		{"trailing zero", "app.yaml", "consumers:\n  - name: \"1\"\n    group: 1.50\n    topics: [orders]\n    handler: {type: noop}\n", "consumers[0].group"},
		{"infinity", "app.yaml", "consumers:\n  - name: orders\n    group: .inf\n    topics: [orders]\n    handler: {type: noop}\n", "consumers[0].group"},
		{"boolean", "app.yaml", "kafka:\n  client_id: true\nconsumers:\n  - name: orders\n    topics: [orders]\n    handler: {type: noop}\n", "kafka.client_id"},
		{"version as float", "app.yaml", "kafka: {version: 3.6}\nconsumers:\n  - name: orders\n    topics: [orders]\n    handler: {type: noop}\n", "kafka.version"},
		{"header value", "app.yaml", "consumers:\n  - name: orders\n    topics: [orders]\n    handler: {type: http, url: \"http://h/x\", headers: [{name: X-Tenant, value: 0042}]}\n", "consumers[0].handler.headers[0].value"},
		{"json number", "app.json", `{"consumers": [{"name": "orders", "group": 123, "topics": ["orders"], "handler": {"type": "noop"}}]}`, "consumers[0].group"},
		{"toml number", "app.toml", "[[consumers]]\nname = \"orders\"\ngroup = 123\ntopics = [\"orders\"]\n[consumers.handler]\ntype = \"noop\"\n", "consumers[0].group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadString(t, tt.file, tt.content, nil)
			wantFieldError(t, err, tt.key, "quote it")
		})
	}

	// The same text quoted is kept as written; from the environment too.
	cfg, err := loadString(t, "app.yaml", "consumers:\n  - name: orders\n    group: \"0123\"\n    topics: [\"0x1F\", \"1e3\"]\n    handler: {type: noop}\n",
		[]string{"TURBO_KAFKA_CLIENT_ID=007"})
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Consumers[0]; c.Group != "0123" || strings.Join(c.Topics, ",") != "0x1F,1e3" || cfg.Kafka.ClientID != "007" {
		t.Fatalf("group %q, topics %q, client_id %q: want 0123, [0x1F 1e3], 007", c.Group, c.Topics, cfg.Kafka.ClientID)
	}
}

// A secret YAML reads as a number is refused like any other string, and
// the message shows neither what was written nor what YAML made of it.
func TestLoadRefusesANumberForASecretWithoutShowingIt(t *testing.T) {
	for _, written := range []string{"0x1F2E3D", "31337", "true"} {
		content := "kafka:\n  sasl: {mechanism: PLAIN, username: u, password: " + written + "}\nconsumers:\n  - name: orders\n    topics: [orders]\n    handler: {type: noop}\n"
		_, err := loadString(t, "app.yaml", content, nil)
		wantFieldError(t, err, "kafka.sasl.password", "quote it")
		for _, shown := range []string{written, "2043453", "31337"} {
			if strings.Contains(err.Error(), shown) {
				t.Fatalf("the error for password %s shows %s: %v", written, shown, err)
			}
		}
	}
}
