package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestLoadRejectsHostile lists every hostile input that used to pass
// validation and then crashed, burned CPU, retried forever or was silently
// ignored (points 4, 6, 7, 12 and 14), with the exact message each now gets.
// $DIR in a message stands for the directory of the file.
func TestLoadRejectsHostile(t *testing.T) {
	const top = "consumers:\n  - name: orders\n    topics: [orders]\n    handler: {type: noop}\n"
	c := func(lines ...string) string { return oneConsumer(lines) }
	tests := []struct {
		name    string
		file    string            // file name; default app.yaml
		content string            // file content
		make    func(dir string)  // creates the file instead of content
		env     map[string]string // TURBO_ variables
		want    string
	}{
		// Point 4: sizes and counts have upper bounds.
		{name: "concurrency 1e9", content: c("concurrency: 1000000000"),
			want: "config: consumers[0].concurrency: must be between 1 and 10000 (got 1000000000)"},
		{name: "concurrency max int64", content: c("concurrency: 9223372036854775807"),
			want: "config: consumers[0].concurrency: must be between 1 and 10000 (got 9223372036854775807)"},
		{name: "concurrency 1e7", content: c("concurrency: 10000000"),
			want: "config: consumers[0].concurrency: must be between 1 and 10000 (got 10000000)"},
		{name: "max_buffered 1e12", content: c("max_buffered: 1000000000000"),
			want: "config: consumers[0].max_buffered: must be between 0 and 100000 (got 1000000000000)"},
		{name: "max_buffered max int64", content: c("max_buffered: 9223372036854775807"),
			want: "config: consumers[0].max_buffered: must be between 0 and 100000 (got 9223372036854775807)"},
		{name: "embedded partitions 1e9", content: top + "kafka: {brokers: [embedded], embedded: {partitions: 1e9}}\n",
			want: "config: kafka.embedded.partitions: must be between 1 and 1000 (got 1000000000)"},
		{name: "seed records", content: top + "kafka: {embedded: {seed: {topic: t, records: 1000000001}}}\n",
			want: "config: kafka.embedded.seed.records: must be between 0 and 100000 (got 1000000001)"},
		{name: "seed keys", content: top + "kafka: {embedded: {seed: {keys: 9223372036854775807}}}\n",
			want: "config: kafka.embedded.seed.keys: must be between 1 and 100000 (got 9223372036854775807)"},
		{name: "max_partitions", content: c("max_partitions: 100001"),
			want: "config: consumers[0].max_partitions: must be 0 (the default, 4096) or between 1 and 100000 (got 100001)"},
		{name: "max_partitions negative", content: c("max_partitions: -1"),
			want: "config: consumers[0].max_partitions: must be 0 (the default, 4096) or between 1 and 100000 (got -1)"},
		{name: "max_attempts", content: c("retry: {max_attempts: 1000000001}"),
			want: "config: consumers[0].retry.max_attempts: must be between 1 and 1000000 (got 1000000001)"},
		{name: "max_restarts", content: top + "swarm: {max_restarts: 9223372036854775807}\n",
			want: "config: swarm.max_restarts: must be between 0 and 10000 (got 9223372036854775807)"},
		{name: "memory_limit", content: top + "swarm: {memory_limit: 1000000GiB}\n",
			want: "config: swarm.memory_limit: must be 0 (off) or between 64MiB and 16TiB (got 1000000GiB)"},
		{name: "consumers", content: manyConsumers(257),
			want: "config: consumers: at most 256 consumers (got 257)"},
		{name: "topics", content: "consumers:\n  - {name: a, topics: [" + strings.Repeat("t,", 1000) + "t]}\n",
			want: "config: consumers[0].topics: at most 1000 topics (got 1001)"},
		{name: "brokers", content: top + "kafka: {brokers: [" + strings.Repeat("k:1,", 100) + "k:1]}\n",
			want: "config: kafka.brokers: at most 100 brokers (got 101)"},

		// Point 6: the file's size is capped.
		{name: "dev zero", file: "zero.yaml", make: func(dir string) {
			if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
				t.Fatal(err)
			}
		}, want: "config: cannot read $DIR/zero.yaml: not a regular file (a device)"},
		// A FIFO would block the read (and, opened for reading, the open)
		// until something writes to it: refused at once.
		{name: "FIFO", file: "fifo.yaml", make: func(dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, want: "config: cannot read $DIR/fifo.yaml: not a regular file (a FIFO)"},
		{name: "directory", file: "dir.yaml", make: func(dir string) {
			if err := os.Mkdir(filepath.Join(dir, "dir.yaml"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, want: "config: cannot read $DIR/dir.yaml: not a regular file (a directory)"},
		{name: "file over 16 MiB", file: "big.yaml", make: func(dir string) {
			// A valid document padded with a comment: only its size is wrong.
			pad := "#" + strings.Repeat("x", 16<<20) + "\n"
			if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(top+pad), 0o600); err != nil {
				t.Fatal(err)
			}
		}, want: "config: $DIR/big.yaml is larger than 16MiB, the most a configuration file may be"},

		// Point 7: intervals have minimums.
		{name: "commit_interval 1ns", content: c("commit_interval: 1ns"),
			want: "config: consumers[0].commit_interval: must be between 10ms and 24h (got 1ns)"},
		{name: "supervision_interval 1ns", content: top + "swarm: {supervision_interval: 1ns}\n",
			want: "config: swarm.supervision_interval: must be between 10ms and 24h (got 1ns)"},
		{name: "node_report_interval 1ns", content: top + "swarm: {node_report_interval: 1ns, node_report_timeout: 2ns}\n",
			want: "config: swarm.node_report_interval: must be between 100ms and 24h (got 1ns)"},
		{name: "node_report_timeout 2 intervals", content: top + "swarm: {node_report_interval: 1s, node_report_timeout: 2s}\n",
			want: "config: swarm.node_report_timeout: must be between 3 × swarm.node_report_interval (3s) and 24h (got 2s)"},
		{name: "restart_window 1ns", content: top + "swarm: {restart_window: 1ns}\n",
			want: "config: swarm.restart_window: must be between 1s and 24h (got 1ns)"},
		{name: "node_restart_timeout 1000h", content: top + "swarm: {node_restart_timeout: 1000h}\n",
			want: "config: swarm.node_restart_timeout: must be between 0s and 24h (got 1000h)"},
		{name: "initial_backoff 1ns", content: c("retry: {initial_backoff: 1ns}"),
			want: "config: consumers[0].retry.initial_backoff: must be between 1ms and 24h (got 1ns)"},
		{name: "max_backoff 1000h", content: c("retry: {max_backoff: 1000h}"),
			want: "config: consumers[0].retry.max_backoff: must be between retry.initial_backoff (100ms) and 24h (got 1000h)"},
		{name: "http timeout 1ns", content: c("handler: {type: http, url: http://h:80/x, timeout: 1ns}"),
			want: "config: consumers[0].handler.timeout: must be between 1ms and 24h (got 1ns)"},
		{name: "sleep duration 1000h", content: c("handler: {type: sleep, duration: 1000h}"),
			want: "config: consumers[0].handler.duration: must be between 0s and 24h (got 1000h)"},
		{name: "max_handler_time 1ns", content: c("max_handler_time: 1ns"),
			want: "config: consumers[0].max_handler_time: must be 0 (unlimited) or between 1ms and 24h (got 1ns)"},
		{name: "shutdown_timeout 1ns", content: top + "shutdown_timeout: 1ns\n",
			want: "config: shutdown_timeout: must be between 1s and 1h (got 1ns)"},
		{name: "shutdown_timeout 2562047h", content: top + "shutdown_timeout: 2562047h\n",
			want: "config: shutdown_timeout: must be between 1s and 1h (got 2562047h)"},

		// Point 12: names, addresses and types are checked.
		{name: "topic with a space", content: "consumers:\n  - {name: a, topics: [\"a b\"], handler: {type: noop}}\n",
			want: `config: consumers[0].topics[0]: must be a Kafka topic name (1 to 249 characters of [a-zA-Z0-9._-], not . or ..) or a /regular expression/ (got "a b")`},
		{name: "topic of 300 characters", content: "consumers:\n  - {name: a, topics: [" + strings.Repeat("t", 300) + "]}\n",
			want: `config: consumers[0].topics[0]: must be a Kafka topic name (1 to 249 characters of [a-zA-Z0-9._-], not . or ..) or a /regular expression/ (got "` + strings.Repeat("t", 64) + `"...)`},
		{name: "topic ..", content: "consumers:\n  - {name: a, topics: [\"..\"], handler: {type: noop}}\n",
			want: `config: consumers[0].topics[0]: must be a Kafka topic name (1 to 249 characters of [a-zA-Z0-9._-], not . or ..) or a /regular expression/ (got "..")`},
		{name: "topic with a newline", content: "consumers:\n  - {name: a, topics: [\"t\\nx\"], handler: {type: noop}}\n",
			want: `config: consumers[0].topics[0]: must be a Kafka topic name (1 to 249 characters of [a-zA-Z0-9._-], not . or ..) or a /regular expression/ (got "t\nx")`},
		{name: "seed topic", content: top + "kafka: {embedded: {seed: {topic: \"a b\"}}}\n",
			want: `config: kafka.embedded.seed.topic: must be a Kafka topic name: 1 to 249 characters of [a-zA-Z0-9._-], not . or .. (got "a b")`},
		{name: "broker without port", content: top + "kafka: {brokers: [no-port]}\n",
			want: `config: kafka.brokers[0]: must be host:port with a port from 1 to 65535, or the single entry "embedded" (got "no-port")`},
		{name: "broker port 0", content: top + "kafka: {brokers: [\"k:0\"]}\n",
			want: `config: kafka.brokers[0]: must be host:port with a port from 1 to 65535, or the single entry "embedded" (got "k:0")`},
		{name: "EMBEDDED", content: top + "kafka: {brokers: [EMBEDDED]}\n",
			want: `config: kafka.brokers[0]: the embedded broker is spelt "embedded", in lower case (got "EMBEDDED")`},
		{name: "url without host", content: c("handler: {type: http, url: \"http://:80/x\"}"),
			want: `config: consumers[0].handler.url: must be an absolute http:// or https:// URL with a host and, if given, a port from 1 to 65535, or unix:///path/to.sock:/path (got "http://:80/x")`},
		{name: "url port 99999", content: c("handler: {type: http, url: \"http://127.0.0.1:99999/x\"}"),
			want: `config: consumers[0].handler.url: must be an absolute http:// or https:// URL with a host and, if given, a port from 1 to 65535, or unix:///path/to.sock:/path (got "http://127.0.0.1:99999/x")`},
		{name: "JSON duplicate key", file: "app.json", content: `{"consumers": [{"name": "a", "topics": ["t"], "concurrency": 4, "concurrency": 5, "handler": {"type": "noop"}}]}`,
			want: "config: cannot parse $DIR/app.json: key consumers[0].concurrency is defined twice"},
		{name: "JSON duplicate top-level key", file: "app.json", content: `{"log": {}, "consumers": [{"name": "a", "topics": ["t"], "handler": {"type": "noop"}}], "log": {"level": "debug"}}`,
			want: "config: cannot parse $DIR/app.json: key log is defined twice"},
		{name: "second YAML document", content: top + "---\nconsumers: []\n",
			want: `config: cannot parse $DIR/app.yaml: a second YAML document (after "---") is not supported; put everything in one`},
		{name: "quoted number", content: c(`concurrency: "4"`),
			want: `config: consumers[0].concurrency: expected an integer, got "4" (a string: remove the quotes)`},
		{name: "env for an absent consumer", content: top, env: map[string]string{"TURBO_CONSUMERS_5_CONCURRENCY": "4"},
			want: "config: TURBO_CONSUMERS_5_CONCURRENCY: the environment variable names no configuration key (the file has no consumers[5]; only consumers in the file can be overridden)"},
		{name: "misspelt env", content: top, env: map[string]string{"TURBO_KAFKA_BROKER": "k:1"},
			want: "config: TURBO_KAFKA_BROKER: the environment variable names no configuration key (did you mean TURBO_KAFKA_BROKERS?)"},
		{name: "env for a section", content: top, env: map[string]string{"TURBO_LOG": "debug"},
			want: "config: TURBO_LOG: the environment variable names no configuration key"},
		{name: "http.listen", content: top + "http: {listen: not an address}\n",
			want: `config: http.listen: must be host:port with a port from 0 to 65535 (0: any free port, logged at start), e.g. 127.0.0.1:9100 or :9100 (got "not an address")`},
		{name: "http.listen port 65536", content: top + "http: {listen: \"127.0.0.1:65536\"}\n",
			want: `config: http.listen: must be host:port with a port from 0 to 65535 (0: any free port, logged at start), e.g. 127.0.0.1:9100 or :9100 (got "127.0.0.1:65536")`},
		{name: "otlp endpoint not http", content: top + "tracing: {otlp_endpoint: \"grpc://collector:4317\"}\n",
			want: `config: tracing.otlp_endpoint: must be an http:// or https:// URL with a host and, if given, a port from 1 to 65535, e.g. http://127.0.0.1:4318 (got "grpc://collector:4317")`},
		{name: "otlp endpoint without host", content: top + "tracing: {otlp_endpoint: \"http://:4318\"}\n",
			want: `config: tracing.otlp_endpoint: must be an http:// or https:// URL with a host and, if given, a port from 1 to 65535, e.g. http://127.0.0.1:4318 (got "http://:4318")`},
		{name: "otlp endpoint port 0", content: top + "tracing: {otlp_endpoint: \"http://c:0\"}\n",
			want: `config: tracing.otlp_endpoint: must be an http:// or https:// URL with a host and, if given, a port from 1 to 65535, e.g. http://127.0.0.1:4318 (got "http://c:0")`},
		{name: "otlp endpoint with credentials", content: top + "tracing: {otlp_endpoint: \"https://user:pw@c:4318\"}\n",
			want: `config: tracing.otlp_endpoint: must not hold credentials`},
		{name: "otlp endpoint with a query", content: top + "tracing: {otlp_endpoint: \"http://c:4318/v1/traces?x=1\"}\n",
			want: `config: tracing.otlp_endpoint: must have no query or fragment (got "http://c:4318/v1/traces?x=1")`},
		{name: "otlp endpoint of 5000 bytes", content: top + "tracing: {otlp_endpoint: \"http://c/" + strings.Repeat("p", 5000) + "\"}\n",
			want: `config: tracing.otlp_endpoint: must be an http:// or https:// URL with a host and, if given, a port from 1 to 65535, e.g. http://127.0.0.1:4318 (got "http://c/` + strings.Repeat("p", 55) + `"...)`},
		{name: "service name with a newline", content: top + "tracing: {service_name: \"a\\nb\"}\n",
			want: `config: tracing.service_name: must be printable and at most 255 bytes`},
		{name: "service name of 300 bytes", content: top + "tracing: {service_name: " + strings.Repeat("s", 300) + "}\n",
			want: `config: tracing.service_name: must be printable and at most 255 bytes`},
		// The swarm's liveness listener became http.listen.
		{name: "liveness_listen replaced", content: top + "swarm: {liveness_listen: \"127.0.0.1:8080\"}\n",
			want: `config: swarm.liveness_listen: replaced by http.listen (the same /healthz and /status, plus /metrics, /readyz and the console); move the address there`},
		{name: "liveness_listen replaced, env", content: top, env: map[string]string{"TURBO_SWARM_LIVENESS_LISTEN": ":8080"},
			want: `config: TURBO_SWARM_LIVENESS_LISTEN: swarm.liveness_listen: replaced by http.listen (the same /healthz and /status, plus /metrics, /readyz and the console); move the address there`},
		{name: "group_instance_id ..", content: top + "kafka: {group_instance_id: \"..\"}\n",
			want: `config: kafka.group_instance_id: must be 1 to 240 characters of [0-9a-zA-Z._-], not . or .. (got "..")`},

		// Point 14: versions sarama refuses with cooperative-sticky.
		{name: "version 2.3.0", content: top + "kafka: {version: 2.3.0}\n",
			want: `config: kafka.version: must be at least 2.4.0, which cooperative-sticky rebalancing needs (got "2.3.0")`},
		{name: "version 1.0.0", content: top + "kafka: {version: 1.0.0}\n",
			want: `config: kafka.version: must be at least 2.4.0, which cooperative-sticky rebalancing needs (got "1.0.0")`},
		{name: "version 0.10.2.0", content: top + "kafka: {version: 0.10.2.0}\n",
			want: `config: kafka.version: must be at least 2.4.0, which cooperative-sticky rebalancing needs (got "0.10.2.0")`},
		{name: "version unparseable", content: top + "kafka: {version: 3.6.0.1}\n",
			want: `config: kafka.version: must be a Kafka version such as 3.6.0, at least 2.4.0 (got "3.6.0.1")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := tt.file
			if file == "" {
				file = "app.yaml"
			}
			path := filepath.Join(dir, file)
			if tt.make != nil {
				tt.make(dir)
			} else if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := loadEnv(path, tt.env)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c)
			}
			if c != nil {
				t.Errorf("Load returned a config with error %v", err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			if got := strings.ReplaceAll(err.Error(), dir, "$DIR"); got != tt.want {
				t.Errorf("error\n got  %s\n want %s", got, tt.want)
			}
		})
	}
}

// loadEnv loads path with the environment variables of env.
func loadEnv(path string, env map[string]string) (*Config, error) {
	return Load(path, envMap(env))
}

// manyConsumers returns a document with n valid consumers.
func manyConsumers(n int) string {
	var b strings.Builder
	b.WriteString("consumers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: c%d, topics: [t], handler: {type: noop}}\n", i)
	}
	return b.String()
}

// TestLoadAcceptsLimits loads a file with every bounded key at its bound:
// the limits are inclusive, and a value at a limit is valid.
func TestLoadAcceptsLimits(t *testing.T) {
	for _, doc := range []string{
		`kafka: {brokers: ["[::1]:65535"], version: 2.4.0, embedded: {partitions: 1000, seed: {topic: t, records: 100000, keys: 100000}}}
consumers:
  - {name: a, topics: [t], concurrency: 10000, max_buffered: 100000, commit_interval: 24h, max_handler_time: 24h,
     retry: {max_attempts: 1000000, initial_backoff: 24h, max_backoff: 24h},
     handler: {type: http, url: "http://h:65535/x", timeout: 24h}}
shutdown_timeout: 1h
swarm: {max_restarts: 10000, memory_limit: 16TiB, node_report_interval: 8h, node_report_timeout: 24h,
        node_restart_timeout: 24h, supervision_interval: 24h, restart_window: 24h}
http: {listen: ":1"}
`,
		`kafka: {brokers: ["k:1"], embedded: {partitions: 1, seed: {records: 0, keys: 1}}}
consumers:
  - {name: a, topics: [t], concurrency: 1, max_buffered: 0, commit_interval: 10ms, max_handler_time: 1ms,
     retry: {max_attempts: 1, initial_backoff: 1ms, max_backoff: 1ms},
     handler: {type: http, url: "https://h/x", timeout: 1ms}}
  - {name: b, topics: [t], handler: {type: sleep, duration: 24h}}
shutdown_timeout: 1s
swarm: {max_restarts: 0, memory_limit: 64MiB, node_report_interval: 100ms, node_report_timeout: 300ms,
        node_restart_timeout: 0s, supervision_interval: 10ms, restart_window: 1s}
http: {listen: "127.0.0.1:0"}
`,
		manyConsumers(MaxConsumers),
		"consumers:\n  - {name: a, handler: {type: noop}, topics: [" + strings.Repeat("t,", MaxTopics-1) + "t]}\nkafka: {brokers: [" + strings.Repeat("k:1,", MaxBrokers-1) + "k:1]}\n",
	} {
		if _, err := Load(writeConfig(t, "app.yaml", doc), noEnv); err != nil {
			t.Errorf("Load: %v\n%s", err, doc)
		}
	}
	// Just under the cap, the file is read (JSON padded with spaces: YAML
	// that long takes seconds to parse under the race detector).
	pad := strings.Repeat(" ", int(MaxFileSize)-100)
	if _, err := Load(writeConfig(t, "app.json", `{"consumers": [{"name": "a", "topics": ["t"], "handler": {"type": "noop"}}]}`+pad), noEnv); err != nil {
		t.Errorf("Load of a file just under %s: %v", MaxFileSize, err)
	}
}
