package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// writeConfig writes content to a fresh temp file with the given name and
// returns its path.
func writeConfig(t testing.TB, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noEnv is an empty environment, so tests never depend on the TURBO_
// variables of the machine running them.
var noEnv []string

// envMap returns m as an environment ("KEY=value" entries).
func envMap(m map[string]string) []string {
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	return env
}

const fullYAML = `
kafka:
  brokers: ["k1:9092", "k2:9092"]
  client_id: my-app
  version: "2.8.1"
  group_instance_id: pod-1
  embedded:
    partitions: 3
    seed:
      topic: demo
      records: 500
      keys: 10
consumers:
  - name: orders
    group: orders-group
    topics: [orders, orders-retry]
    initial_offset: newest
    ordering: partition
    concurrency: 4
    max_buffered: 0
    max_buffered_bytes: 32MiB
    commit_interval: 250ms
    handler:
      type: http
      url: https://svc.example/hook
      timeout: 2s
    retry:
      max_attempts: 5
      initial_backoff: 50ms
      max_backoff: 2s
    on_failure: dlq
    dlq_topic: orders.DLQ
    max_handler_time: 30s
    commit_metadata_bytes: 64
  - name: audit
    topics: [audit]
    ordering: unordered
    handler:
      type: sleep
      duration: 5ms
shutdown_timeout: 1m
log:
  level: debug
  format: json
`

// fullWant is what fullYAML (and its JSON and TOML twins) must load as.
func fullWant() *Config {
	audit := DefaultConsumer("audit")
	audit.Topics = []string{"audit"}
	audit.Ordering = OrderingUnordered
	audit.Handler.Type = HandlerSleep
	audit.Handler.Duration = 5 * time.Millisecond
	audit.ExcludeTopics = []string{"orders.DLQ"} // every dead-letter topic (ExcludeDeadLetters)
	return &Config{
		Kafka: Kafka{
			Brokers:         []string{"k1:9092", "k2:9092"},
			ClientID:        "my-app",
			Version:         "2.8.1",
			Client:          ClientSarama,
			GroupProtocol:   GroupClassic,
			GroupInstanceID: "pod-1",
			SASL:            SASL{OAuth: OAuth{AuthStyle: AuthStyleHeader}},
			Embedded:        Embedded{Partitions: 3, Seed: Seed{Topic: "demo", Records: 500, Keys: 10}},
		},
		Consumers: []Consumer{
			{
				Name:             "orders",
				Group:            "orders-group",
				Topics:           []string{"orders", "orders-retry"},
				InitialOffset:    OffsetNewest,
				Ordering:         OrderingPartition,
				Concurrency:      4,
				MaxBuffered:      0,
				MaxBufferedBytes: 32 * MiB,
				CommitInterval:   250 * time.Millisecond,
				MetadataRefresh:  time.Minute,
				MaxPartitions:    DefaultMaxPartitions,
				Handler:          Handler{Type: HandlerHTTP, URL: "https://svc.example/hook", Timeout: 2 * time.Second},
				Retry: Retry{
					MaxAttempts:    5,
					InitialBackoff: 50 * time.Millisecond,
					MaxBackoff:     2 * time.Second,
				},
				OnFailure:           OnFailureDLQ,
				DLQTopic:            "orders.DLQ",
				ExcludeTopics:       []string{"orders.DLQ"},
				MaxHandlerTime:      30 * time.Second,
				CommitMetadataBytes: 64,
				Batch:               Batch{MaxRecords: 1},
				Output:              Output{MaxPerRecord: DefaultOutputsPerRecord, MaxBytes: DefaultOutputBytes},
			},
			audit,
		},
		ShutdownTimeout: time.Minute,
		Log:             Log{Level: LogDebug, Format: LogJSON},
		Swarm:           DefaultSwarm(),
	}
}

const fullJSON = `{
  "kafka": {
    "brokers": ["k1:9092", "k2:9092"],
    "client_id": "my-app",
    "version": "2.8.1",
    "group_instance_id": "pod-1",
    "embedded": {"partitions": 3, "seed": {"topic": "demo", "records": 500, "keys": 10}}
  },
  "consumers": [
    {
      "name": "orders", "group": "orders-group", "topics": ["orders", "orders-retry"],
      "initial_offset": "newest", "ordering": "partition", "concurrency": 4,
      "max_buffered": 0, "max_buffered_bytes": "32MiB", "commit_interval": "250ms",
      "handler": {"type": "http", "url": "https://svc.example/hook", "timeout": "2s"},
      "retry": {"max_attempts": 5, "initial_backoff": "50ms", "max_backoff": "2s"},
      "on_failure": "dlq", "dlq_topic": "orders.DLQ", "max_handler_time": "30s",
      "commit_metadata_bytes": 64
    },
    {"name": "audit", "topics": ["audit"], "ordering": "unordered",
     "handler": {"type": "sleep", "duration": "5ms"}}
  ],
  "shutdown_timeout": "1m",
  "log": {"level": "debug", "format": "json"}
}`

const fullTOML = `
shutdown_timeout = "1m"

[kafka]
brokers = ["k1:9092", "k2:9092"]
client_id = "my-app"
version = "2.8.1"
group_instance_id = "pod-1"

[kafka.embedded]
partitions = 3

[kafka.embedded.seed]
topic = "demo"
records = 500
keys = 10

[[consumers]]
name = "orders"
group = "orders-group"
topics = ["orders", "orders-retry"]
initial_offset = "newest"
ordering = "partition"
concurrency = 4
max_buffered = 0
max_buffered_bytes = "32MiB"
commit_interval = "250ms"
on_failure = "dlq"
dlq_topic = "orders.DLQ"
max_handler_time = "30s"
commit_metadata_bytes = 64

[consumers.handler]
type = "http"
url = "https://svc.example/hook"
timeout = "2s"

[consumers.retry]
max_attempts = 5
initial_backoff = "50ms"
max_backoff = "2s"

[[consumers]]
name = "audit"
topics = ["audit"]
ordering = "unordered"

[consumers.handler]
type = "sleep"
duration = "5ms"

[log]
level = "debug"
format = "json"
`

func TestLoadValid(t *testing.T) {
	minimal := Default()
	orders := DefaultConsumer("orders")
	orders.Topics = []string{"orders"}
	minimal.Consumers = []Consumer{orders}

	tests := []struct {
		name    string
		file    string
		content string
		want    *Config
	}{
		{"full yaml", "app.yaml", fullYAML, fullWant()},
		{"full yml extension", "app.yml", fullYAML, fullWant()},
		{"full json", "app.json", fullJSON, fullWant()},
		{"full toml", "app.toml", fullTOML, fullWant()},
		{"upper-case extension", "APP.YAML", fullYAML, fullWant()},
		{"minimal yaml", "app.yaml", "consumers:\n  - name: orders\n    topics: [orders]\n    handler: {type: noop}\n", &minimal},
		{"minimal json", "app.json", `{"consumers": [{"name": "orders", "topics": ["orders"], "handler": {"type": "noop"}}]}`, &minimal},
		{"minimal toml", "app.toml", "[[consumers]]\nname = \"orders\"\ntopics = [\"orders\"]\nhandler = {type = \"noop\"}\n", &minimal},
		{"null values mean default", "app.yaml", "kafka: ~\nlog:\nconsumers:\n  - name: orders\n    topics: [orders]\n    concurrency: ~\n    handler: {type: noop, timeout: ~}\n", &minimal},
		{"empty group means name", "app.yaml", "consumers:\n  - name: orders\n    group: \"\"\n    topics: [orders]\n    handler: {type: noop}\n", &minimal},
		{
			"a quoted number for a string", "app.yaml",
			"kafka:\n  client_id: \"42\"\nconsumers:\n  - name: orders\n    topics: [orders]\n    handler: {type: noop}\n    concurrency: 8\n",
			func() *Config {
				c := Default()
				c.Kafka.ClientID = "42"
				o := DefaultConsumer("orders")
				o.Topics = []string{"orders"}
				o.Concurrency = 8
				c.Consumers = []Consumer{o}
				return &c
			}(),
		},
		{
			"embedded broker", "app.yaml",
			"kafka:\n  brokers: [embedded]\n  embedded:\n    seed: {topic: demo, records: 10}\nconsumers:\n  - name: demo\n    topics: [demo]\n    handler: {type: noop}\n",
			func() *Config {
				c := Default()
				c.Kafka.Brokers = []string{EmbeddedBroker}
				c.Kafka.Embedded.Seed = Seed{Topic: "demo", Records: 10, Keys: 100}
				d := DefaultConsumer("demo")
				d.Topics = []string{"demo"}
				c.Consumers = []Consumer{d}
				return &c
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Load(writeConfig(t, tt.file, tt.content), noEnv)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Load:\n got  %+v\n want %+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate after Load: %v", err)
			}
		})
	}
}

func TestLoadNilLookupEnv(t *testing.T) {
	c, err := Load(writeConfig(t, "app.yaml", "consumers: [{name: a, topics: [t], handler: {type: noop}}]"), nil)
	if err != nil {
		t.Fatalf("Load with nil lookupEnv: %v", err)
	}
	if c.Consumers[0].Group != "a" {
		t.Errorf("group = %q, want %q", c.Consumers[0].Group, "a")
	}
}

// Byte sizes are a number of bytes or a number with a unit in every format;
// a JSON number is a float64 to the parser, and a whole one is a size too.
func TestLoadByteSizes(t *testing.T) {
	for _, tt := range []struct{ name, content string }{
		{"app.json", `{"consumers": [{"name": "a", "topics": ["t"], "max_buffered_bytes": 33554432, "handler": {"type": "noop"}}]}`},
		{"app.json", `{"consumers": [{"name": "a", "topics": ["t"], "max_buffered_bytes": "32MiB", "handler": {"type": "noop"}}]}`},
		{"app.yaml", "consumers: [{name: a, topics: [t], max_buffered_bytes: 33554432, handler: {type: noop}}]"},
		{"app.toml", "[[consumers]]\nname = \"a\"\ntopics = [\"t\"]\nmax_buffered_bytes = 33554432\nhandler = {type = \"noop\"}\n"},
	} {
		c, err := Load(writeConfig(t, tt.name, tt.content), nil)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.name, tt.content, err)
		}
		if got := c.Consumers[0].MaxBufferedBytes; got != 32*MiB {
			t.Errorf("%s %s: max_buffered_bytes = %s, want 32MiB", tt.name, tt.content, got)
		}
	}
	_, err := Load(writeConfig(t, "app.json", `{"consumers": [{"name": "a", "topics": ["t"], "max_buffered_bytes": 1.5, "handler": {"type": "noop"}}]}`), nil)
	checkInvalid(t, err, "consumers[0].max_buffered_bytes", "expected a size such as 512MiB, got 1.5")
}

func TestDefaults(t *testing.T) {
	c := Default()
	if len(c.Consumers) != 0 {
		t.Errorf("Default has %d consumers, want 0", len(c.Consumers))
	}
	if c.Kafka.IsEmbedded() {
		t.Error("Default is embedded")
	}
	// A default config plus one default consumer with topics is runnable.
	cons := DefaultConsumer("x")
	cons.Topics = []string{"t"}
	c.Consumers = append(c.Consumers, cons)
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(default + default consumer): %v", err)
	}
	// Default must return fresh slices: mutating one result must not leak
	// into the next.
	c.Kafka.Brokers[0] = "changed:1"
	if got := Default().Kafka.Brokers[0]; got != "127.0.0.1:9092" {
		t.Errorf("Default().Kafka.Brokers[0] = %q after mutating an earlier result", got)
	}
}

func TestIsEmbedded(t *testing.T) {
	tests := []struct {
		brokers []string
		want    bool
	}{
		{[]string{"embedded"}, true},
		{[]string{"embedded", "k:9092"}, false},
		{[]string{"k:9092"}, false},
		{nil, false},
		{[]string{"Embedded"}, false},
	}
	for _, tt := range tests {
		if got := (Kafka{Brokers: tt.brokers}).IsEmbedded(); got != tt.want {
			t.Errorf("IsEmbedded(%q) = %v, want %v", tt.brokers, got, tt.want)
		}
	}
}

func TestApplyDefaults(t *testing.T) {
	c := Default()
	c.Consumers = []Consumer{
		{Name: "a", Topics: []string{"t"}},
		{Name: "b", Group: "g", Topics: []string{"t"}},
	}
	c.ApplyDefaults()
	if c.Consumers[0].Group != "a" || c.Consumers[1].Group != "g" {
		t.Errorf("groups = %q, %q; want a, g", c.Consumers[0].Group, c.Consumers[1].Group)
	}
	// Only Group is filled: a zero concurrency stays zero for Validate.
	if c.Consumers[0].Concurrency != 0 {
		t.Errorf("ApplyDefaults changed concurrency to %d", c.Consumers[0].Concurrency)
	}
}

func TestFieldError(t *testing.T) {
	var err error = &FieldError{Key: "consumers[0].concurrency", Msg: "must be > 0 (got 0)"}
	if got, want := err.Error(), "config: consumers[0].concurrency: must be > 0 (got 0)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Error("FieldError does not wrap ErrInvalid")
	}
	err = &FieldError{Key: "consumers[0].concurency", Msg: unknownKeyMsg}
	if got, want := err.Error(), "config: unknown key consumers[0].concurency"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
