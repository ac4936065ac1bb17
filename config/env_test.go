package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

const envBase = `
kafka:
  brokers: [file:9092]
consumers:
  - name: orders
    topics: [orders]
    handler: {type: noop}
    concurrency: 4
  - name: audit
    topics: [audit]
    handler: {type: noop}
log:
  level: warn
`

func TestEnvOverrides(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c *Config)
	}{
		{
			name: "scalar top-level",
			env:  map[string]string{"TURBO_SHUTDOWN_TIMEOUT": "45s"},
			check: func(t *testing.T, c *Config) {
				eq(t, "shutdown_timeout", c.ShutdownTimeout, 45*time.Second)
			},
		},
		{
			name: "nested overrides file value",
			env:  map[string]string{"TURBO_LOG_LEVEL": "debug", "TURBO_KAFKA_CLIENT_ID": "from-env"},
			check: func(t *testing.T, c *Config) {
				eq(t, "log.level", c.Log.Level, LogDebug)
				eq(t, "kafka.client_id", c.Kafka.ClientID, "from-env")
			},
		},
		{
			name: "value absent from the file",
			env:  map[string]string{"TURBO_LOG_FORMAT": "json", "TURBO_KAFKA_EMBEDDED_SEED_RECORDS": "7", "TURBO_KAFKA_EMBEDDED_SEED_TOPIC": "demo"},
			check: func(t *testing.T, c *Config) {
				eq(t, "log.format", c.Log.Format, LogJSON)
				eq(t, "seed", c.Kafka.Embedded.Seed, Seed{Topic: "demo", Records: 7, Keys: 100})
			},
		},
		{
			name: "comma-separated list",
			env:  map[string]string{"TURBO_KAFKA_BROKERS": "a:1, b:2,c:3"},
			check: func(t *testing.T, c *Config) {
				eq(t, "kafka.brokers", c.Kafka.Brokers, []string{"a:1", "b:2", "c:3"})
			},
		},
		{
			name: "embedded via env",
			env:  map[string]string{"TURBO_KAFKA_BROKERS": "embedded"},
			check: func(t *testing.T, c *Config) {
				eq(t, "embedded", c.Kafka.IsEmbedded(), true)
			},
		},
		{
			name: "per consumer index",
			env: map[string]string{
				"TURBO_CONSUMERS_0_CONCURRENCY":  "32",
				"TURBO_CONSUMERS_1_TOPICS":       "audit,audit-dlq",
				"TURBO_CONSUMERS_1_HANDLER_TYPE": "http",
				"TURBO_CONSUMERS_1_HANDLER_URL":  "http://h:8080/x",
			},
			check: func(t *testing.T, c *Config) {
				eq(t, "consumers[0].concurrency", c.Consumers[0].Concurrency, 32)
				eq(t, "consumers[1].concurrency", c.Consumers[1].Concurrency, 16)
				eq(t, "consumers[1].topics", c.Consumers[1].Topics, []string{"audit", "audit-dlq"})
				eq(t, "consumers[1].handler", c.Consumers[1].Handler, Handler{Type: HandlerHTTP, URL: "http://h:8080/x", Timeout: 10 * time.Second})
			},
		},
		{
			name: "byte size with a unit",
			env:  map[string]string{"TURBO_CONSUMERS_0_MAX_BUFFERED_BYTES": "256MiB"},
			check: func(t *testing.T, c *Config) {
				eq(t, "consumers[0].max_buffered_bytes", c.Consumers[0].MaxBufferedBytes, 256*MiB)
				eq(t, "consumers[1].max_buffered_bytes", c.Consumers[1].MaxBufferedBytes, DefaultMaxBufferedBytes)
			},
		},
		{
			name: "renamed consumer gets the new name as group",
			env:  map[string]string{"TURBO_CONSUMERS_0_NAME": "orders-v2"},
			check: func(t *testing.T, c *Config) {
				eq(t, "group", c.Consumers[0].Group, "orders-v2")
			},
		},
		{
			name: "empty value counts as unset",
			env:  map[string]string{"TURBO_LOG_LEVEL": ""},
			check: func(t *testing.T, c *Config) {
				eq(t, "log.level", c.Log.Level, LogWarn)
			},
		},
		{
			name: "names outside the configuration's namespace are ignored",
			env:  map[string]string{"LOG_LEVEL": "bogus", "TURBO_TEST_BROKERS": "x", "TURBO": "y", "TURBO_": "z", "TURBO_LOG_COLOUR": ""},
			check: func(t *testing.T, c *Config) {
				eq(t, "log.level", c.Log.Level, LogWarn)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", envBase), envMap(tt.env))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tt.check(t, c)
		})
	}
}

func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

func TestEnvOverrideErrors(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantKey string
		wantEnv string
		wantIn  string
	}{
		{"not an integer", map[string]string{"TURBO_CONSUMERS_0_CONCURRENCY": "abc"}, "consumers[0].concurrency", "TURBO_CONSUMERS_0_CONCURRENCY", `cannot parse "abc"`},
		{"bare duration", map[string]string{"TURBO_SHUTDOWN_TIMEOUT": "30"}, "shutdown_timeout", "TURBO_SHUTDOWN_TIMEOUT", "use a unit"},
		{"invalid enum", map[string]string{"TURBO_LOG_LEVEL": "loud"}, "log.level", "TURBO_LOG_LEVEL", "must be one of"},
		{"invalid after decode", map[string]string{"TURBO_CONSUMERS_1_CONCURRENCY": "0"}, "consumers[1].concurrency", "TURBO_CONSUMERS_1_CONCURRENCY", "must be between 1 and 10000 (got 0)"},
		{"list element", map[string]string{"TURBO_KAFKA_BROKERS": "a:1,,b:2"}, "kafka.brokers[1]", "TURBO_KAFKA_BROKERS", "must not be empty"},
		{"byte size out of range", map[string]string{"TURBO_CONSUMERS_0_MAX_BUFFERED_BYTES": "512KiB"}, "consumers[0].max_buffered_bytes", "TURBO_CONSUMERS_0_MAX_BUFFERED_BYTES", "must be between 1MiB and 16GiB (got 512KiB)"},
		{"nested url", map[string]string{"TURBO_CONSUMERS_0_HANDLER_TYPE": "http", "TURBO_CONSUMERS_0_HANDLER_URL": "nope"}, "consumers[0].handler.url", "TURBO_CONSUMERS_0_HANDLER_URL", "absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, "app.yaml", envBase), envMap(tt.env))
			if err == nil {
				t.Fatal("Load succeeded")
			}
			checkInvalid(t, err, tt.wantKey, tt.wantEnv, tt.wantIn)
		})
	}

	// An error about a key the environment did not set must not blame it.
	_, err := Load(writeConfig(t, "app.yaml", strings.Replace(envBase, "concurrency: 4", "concurrency: 0", 1)),
		envMap(map[string]string{"TURBO_LOG_LEVEL": "debug"}))
	if err == nil || strings.Contains(err.Error(), "environment") {
		t.Errorf("file error blamed on the environment: %v", err)
	}
}
