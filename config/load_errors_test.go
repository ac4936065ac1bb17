package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// oneConsumer returns a YAML document with a valid consumer "orders" plus
// the given extra lines inside it (a noop handler unless they give one),
// and the given top-level lines after it.
func oneConsumer(consumerLines []string, topLines ...string) string {
	var b strings.Builder
	b.WriteString("consumers:\n  - name: orders\n    topics: [orders]\n")
	handler := false
	for _, l := range consumerLines {
		b.WriteString("    " + l + "\n")
		handler = handler || strings.HasPrefix(l, "handler:")
	}
	if !handler {
		b.WriteString("    handler: {type: noop}\n")
	}
	for _, l := range topLines {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// withConsumer is oneConsumer without extra consumer lines.
func withConsumer(topLines ...string) string { return oneConsumer(nil, topLines...) }

func TestLoadInvalid(t *testing.T) {
	long := strings.Repeat("x", 241)
	tests := []struct {
		name    string
		content string
		wantKey string   // FieldError.Key
		wantIn  []string // substrings of the message besides the key
	}{
		// Strict decoding.
		{"unknown top-level key", withConsumer("colour: blue"), "colour", []string{"config: unknown key colour"}},
		{"unknown key in kafka", withConsumer("kafka:", "  broker: [k:1]"), "kafka.broker", []string{`did you mean "brokers"?`}},
		{"unknown key in seed", withConsumer("kafka:", "  embedded:", "    seed:", "      topik: x"), "kafka.embedded.seed.topik", nil},
		{"unknown key in consumer", oneConsumer([]string{"concurency: 4"}), "consumers[0].concurency", []string{"config: unknown key consumers[0].concurency", `did you mean "concurrency"?`}},
		{"unknown key in handler", oneConsumer([]string{"handler: {type: noop, urll: x}"}), "consumers[0].handler.urll", nil},
		{"keys are case-sensitive", oneConsumer([]string{"Concurrency: 4"}), "consumers[0].Concurrency", []string{`did you mean "concurrency"?`}},
		{"dotted key is not a path", withConsumer("log.level: debug"), `"log.level"`, nil},
		{"wrong type int", oneConsumer([]string{"concurrency: abc"}), "consumers[0].concurrency", []string{`cannot parse "abc" as an integer`}},
		{"fractional int", oneConsumer([]string{"concurrency: 1.5"}), "consumers[0].concurrency", []string{"expected an integer"}},
		{"bool for int", oneConsumer([]string{"concurrency: true"}), "consumers[0].concurrency", []string{"expected an integer"}},
		{"scalar for list", "consumers:\n  - name: orders\n    topics: 5\n    handler: {type: noop}\n", "consumers[0].topics", []string{"expected a list"}},
		{"string for list", "consumers:\n  - name: orders\n    topics: orders\n    handler: {type: noop}\n", "consumers[0].topics", []string{"expected a list"}},
		{"scalar for section", withConsumer("kafka: 5"), "kafka", []string{"expected a mapping"}},
		{"mapping for consumers", "consumers: {name: orders}\n", "consumers", []string{"expected a list"}},
		{"scalar consumer", "consumers: [orders]\n", "consumers[0]", []string{"expected a mapping"}},
		{"mapping for string", withConsumer("kafka:", "  brokers: [{host: k}]"), "kafka.brokers[0]", []string{"expected a string"}},
		{"bad duration", oneConsumer([]string{"commit_interval: 5 parsecs"}), "consumers[0].commit_interval", []string{`cannot parse "5 parsecs" as a duration`}},
		{"bare integer duration", oneConsumer([]string{"commit_interval: 5"}), "consumers[0].commit_interval", []string{"use a unit, e.g. 1s"}},
		{"bare zero duration", withConsumer("shutdown_timeout: 0"), "shutdown_timeout", []string{"use a unit"}},
		{"quoted bare duration", withConsumer(`shutdown_timeout: "10"`), "shutdown_timeout", []string{"use a unit"}},
		{"list for duration", withConsumer("shutdown_timeout: [1s]"), "shutdown_timeout", []string{"expected a duration"}},

		// Enums.
		{"bad ordering", oneConsumer([]string{"ordering: random"}), "consumers[0].ordering", []string{"must be one of key, partition, unordered", `"random"`}},
		{"bad initial_offset", oneConsumer([]string{"initial_offset: latest"}), "consumers[0].initial_offset", []string{"oldest, newest"}},
		{"bad handler type", oneConsumer([]string{"handler: {type: kafka}"}), "consumers[0].handler.type", []string{"http, grpc, noop, log, sleep, hash", `"kafka"`}},
		{"bad log level", withConsumer("log: {level: trace}"), "log.level", []string{"debug, info, warn, error"}},
		{"bad log format", withConsumer("log: {format: xml}"), "log.format", []string{"console, json"}},

		// Kafka.
		{"empty broker list", withConsumer("kafka: {brokers: []}"), "kafka.brokers", []string{"at least one broker"}},
		{"empty broker entry", withConsumer(`kafka: {brokers: ["k:1", ""]}`), "kafka.brokers[1]", []string{"must not be empty"}},
		{"embedded mixed with others", withConsumer("kafka: {brokers: [k:1, embedded]}"), "kafka.brokers[1]", []string{`"embedded" must be the only broker`}},
		{"bad version string", withConsumer(`kafka: {version: "v3.6"}`), "kafka.version", []string{`"v3.6"`}},
		{"version as float", withConsumer("kafka: {version: 3.6}"), "kafka.version", []string{"(3.6)", "quote it"}},
		{"five-part version", withConsumer(`kafka: {version: "1.2.3.4.5"}`), "kafka.version", nil},
		{"bad group_instance_id", withConsumer(`kafka: {group_instance_id: "pod 1"}`), "kafka.group_instance_id", []string{`"pod 1"`}},
		{"long group_instance_id", withConsumer("kafka: {group_instance_id: " + long + "}"), "kafka.group_instance_id", []string{"1 to 240"}},
		{"embedded partitions 0", withConsumer("kafka: {embedded: {partitions: 0}}"), "kafka.embedded.partitions", []string{"must be between 1 and 1000 (got 0)"}},
		{"seed records without topic", withConsumer("kafka: {embedded: {seed: {records: 5}}}"), "kafka.embedded.seed.topic", []string{"required"}},
		{"seed records negative", withConsumer("kafka: {embedded: {seed: {records: -1}}}"), "kafka.embedded.seed.records", []string{"must be between 0 and 100000 (got -1)"}},
		{"seed keys 0", withConsumer("kafka: {embedded: {seed: {topic: t, records: 5, keys: 0}}}"), "kafka.embedded.seed.keys", []string{"must be >= 1"}},

		// Consumers.
		{"no consumers key", "log: {level: info}\n", "consumers", []string{"at least one consumer"}},
		{"empty consumers", "consumers: []\n", "consumers", []string{"at least one consumer"}},
		{"empty file", "", "consumers", []string{"at least one consumer"}},
		{"duplicate names", "consumers:\n  - {name: a, topics: [t], handler: {type: noop}}\n  - {name: a, topics: [u], handler: {type: noop}}\n", "consumers[1].name", []string{`duplicate consumer name "a"`, "consumers[0]"}},
		{"empty name", "consumers:\n  - {name: \"\", topics: [t], handler: {type: noop}}\n", "consumers[0].name", []string{"is required"}},
		{"missing name", "consumers:\n  - {topics: [t]}\n", "consumers[0].name", []string{"is required"}},
		{"bad name", "consumers:\n  - {name: \"a b\", topics: [t], handler: {type: noop}}\n", "consumers[0].name", []string{`"a b"`}},
		{"no topics", "consumers:\n  - {name: a}\n", "consumers[0].topics", []string{"at least one topic"}},
		{"empty topics", "consumers:\n  - {name: a, topics: [], handler: {type: noop}}\n", "consumers[0].topics", []string{"at least one topic"}},
		{"empty topic", "consumers:\n  - {name: a, topics: [t, \"\"], handler: {type: noop}}\n", "consumers[0].topics[1]", []string{"must not be empty"}},
		{"second consumer reported by index", "consumers:\n  - {name: a, topics: [t], handler: {type: noop}}\n  - {name: b, topics: [t], concurrency: 0, handler: {type: noop}}\n", "consumers[1].concurrency", nil},
		{"concurrency 0", oneConsumer([]string{"concurrency: 0"}), "consumers[0].concurrency", []string{"config: consumers[0].concurrency: must be between 1 and 10000 (got 0)"}},
		{"concurrency -1", oneConsumer([]string{"concurrency: -1"}), "consumers[0].concurrency", []string{"must be between 1 and 10000 (got -1)"}},
		{"max_buffered -1", oneConsumer([]string{"max_buffered: -1"}), "consumers[0].max_buffered", []string{"must be between 0 and 100000 (got -1)"}},
		{"commit_interval 0", oneConsumer([]string{"commit_interval: 0s"}), "consumers[0].commit_interval", []string{"must be between 10ms and 24h (got 0s)"}},
		{"max_buffered_bytes too small", oneConsumer([]string{"max_buffered_bytes: 1000"}), "consumers[0].max_buffered_bytes", []string{"config: consumers[0].max_buffered_bytes: must be between 1MiB and 16GiB (got 1000B)"}},
		{"max_buffered_bytes too large", oneConsumer([]string{"max_buffered_bytes: 17GiB"}), "consumers[0].max_buffered_bytes", []string{"must be between 1MiB and 16GiB (got 17GiB)"}},
		{"max_buffered_bytes 0", oneConsumer([]string{"max_buffered_bytes: 0"}), "consumers[0].max_buffered_bytes", []string{"(got 0B)"}},
		{"max_buffered_bytes not a size", oneConsumer([]string{"max_buffered_bytes: lots"}), "consumers[0].max_buffered_bytes", []string{`cannot parse "lots" as a size`}},
		{"http without url", oneConsumer([]string{"handler: {type: http}"}), "consumers[0].handler.url", []string{"required"}},
		{"http relative url", oneConsumer([]string{"handler: {type: http, url: /hook}"}), "consumers[0].handler.url", []string{"absolute", `"/hook"`}},
		{"http non-http url", oneConsumer([]string{"handler: {type: http, url: \"ftp://h/x\"}"}), "consumers[0].handler.url", []string{"absolute"}},
		{"http url without host", oneConsumer([]string{"handler: {type: http, url: \"http:///x\"}"}), "consumers[0].handler.url", []string{"absolute"}},
		{"http timeout 0", oneConsumer([]string{"handler: {type: http, url: \"http://h/x\", timeout: 0s}"}), "consumers[0].handler.timeout", []string{"must be between 1ms and 24h (got 0s)"}},
		{"hash without bytes", oneConsumer([]string{"handler: {type: hash}"}), "consumers[0].handler.bytes", []string{"must be between 1 and 1073741824", "handler type hash", "got 0"}},
		{"hash negative bytes", oneConsumer([]string{"handler: {type: hash, bytes: -5}"}), "consumers[0].handler.bytes", []string{"got -5"}},
		{"hash bytes too large", oneConsumer([]string{"handler: {type: hash, bytes: 2000000000}"}), "consumers[0].handler.bytes", []string{"got 2000000000"}},
		{"sleep negative duration", oneConsumer([]string{"handler: {type: sleep, duration: -1s}"}), "consumers[0].handler.duration", []string{"must be between 0s and 24h (got -1s)"}},

		// Top level.
		{"shutdown_timeout 0", withConsumer("shutdown_timeout: 0s"), "shutdown_timeout", []string{"must be between 1s and 1h (got 0s)"}},
		{"shutdown_timeout negative", withConsumer("shutdown_timeout: -5s"), "shutdown_timeout", []string{"must be between 1s and 1h (got -5s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", tt.content), noEnv)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c)
			}
			if c != nil {
				t.Errorf("Load returned a config with error %v", err)
			}
			checkInvalid(t, err, tt.wantKey, tt.wantIn...)
		})
	}
}

// checkInvalid asserts err wraps ErrInvalid, is a FieldError for wantKey and
// that its message contains the key and every wantIn.
func checkInvalid(t *testing.T, err error, wantKey string, wantIn ...string) {
	t.Helper()
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("error %q does not wrap ErrInvalid", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "config: ") {
		t.Errorf("error %q lacks the config: prefix", msg)
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %q is not a *FieldError", err)
	}
	if fe.Key != wantKey {
		t.Errorf("FieldError.Key = %q, want %q (error %q)", fe.Key, wantKey, msg)
	}
	for _, s := range append([]string{wantKey}, wantIn...) {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not contain %q", msg, s)
		}
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		path    string
		wantIn  []string
		wantErr error // also wrapped besides ErrInvalid, if set
	}{
		{
			name:    "missing file",
			path:    filepath.Join(dir, "nope.yaml"),
			wantIn:  []string{filepath.Join(dir, "nope.yaml"), "no such file"},
			wantErr: fs.ErrNotExist,
		},
		{
			name:   "directory",
			path:   writeDir(t, "dir.yaml"),
			wantIn: []string{"dir.yaml", "cannot read"},
		},
		{
			name:   "unparseable yaml",
			path:   writeConfig(t, "bad.yaml", "consumers: [\n  name: : x\n"),
			wantIn: []string{"bad.yaml", "cannot parse", "yaml:"},
		},
		{
			name:   "yaml tab indentation",
			path:   writeConfig(t, "tab.yaml", "kafka:\n\tbrokers: [x]\n"),
			wantIn: []string{"tab.yaml", "yaml:"},
		},
		{
			name:   "yaml duplicate key",
			path:   writeConfig(t, "dup.yaml", "log: {}\nlog: {}\n"),
			wantIn: []string{"dup.yaml", "already defined"},
		},
		{
			name:   "yaml list document",
			path:   writeConfig(t, "list.yaml", "- a\n- b\n"),
			wantIn: []string{"list.yaml", "cannot parse"},
		},
		{
			name:   "unparseable json",
			path:   writeConfig(t, "bad.json", `{"consumers": [}`),
			wantIn: []string{"bad.json", "cannot parse", "invalid character"},
		},
		{
			name:   "unparseable toml",
			path:   writeConfig(t, "bad.toml", "[kafka\nbrokers = 1\n"),
			wantIn: []string{"bad.toml", "cannot parse"},
		},
		{
			name:   "unsupported extension",
			path:   writeConfig(t, "app.ini", "a=b\n"),
			wantIn: []string{"app.ini", "unsupported file extension", ".yaml"},
		},
		{
			name:   "no extension",
			path:   writeConfig(t, "app", "a: b\n"),
			wantIn: []string{"unsupported file extension"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.path, noEnv)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %q does not wrap %v", err, tt.wantErr)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "config: ") {
				t.Errorf("error %q lacks the config: prefix", msg)
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(msg, s) {
					t.Errorf("error %q does not contain %q", msg, s)
				}
			}
		})
	}
}

// writeDir creates a directory named like a config file, to make reading it
// fail with something other than "not found".
func writeDir(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}
