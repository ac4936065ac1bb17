package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Tests of the failure-handling keys of a consumer: retry, on_failure,
// dlq_topic, max_handler_time and commit_metadata_bytes.

// wantFailureDefaults are the defaults of those keys, spelled out rather
// than taken from DefaultConsumer so a changed default is noticed.
var wantFailureDefaults = Consumer{
	Retry:               Retry{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 10 * time.Second},
	OnFailure:           OnFailureFail,
	DLQTopic:            "",
	MaxHandlerTime:      0,
	CommitMetadataBytes: 4000,
}

// failureKeys keeps only the failure-handling fields of c.
func failureKeys(c Consumer) Consumer {
	return Consumer{
		Retry:               c.Retry,
		OnFailure:           c.OnFailure,
		DLQTopic:            c.DLQTopic,
		MaxHandlerTime:      c.MaxHandlerTime,
		CommitMetadataBytes: c.CommitMetadataBytes,
	}
}

func TestFailureDefaults(t *testing.T) {
	eq(t, "DefaultConsumer", failureKeys(DefaultConsumer("x")), wantFailureDefaults)

	c, err := Load(writeConfig(t, "app.yaml", oneConsumer(nil)), noEnv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	eq(t, "loaded without the keys", failureKeys(c.Consumers[0]), wantFailureDefaults)
}

func TestFailureKeysValid(t *testing.T) {
	tests := []struct {
		name  string
		lines []string          // inside the consumer
		want  func(c *Consumer) // applied to wantFailureDefaults
	}{
		{"full block", []string{
			"retry:",
			"  max_attempts: 7",
			"  initial_backoff: 1s",
			"  max_backoff: 1m",
			"on_failure: dlq",
			"dlq_topic: orders_dead-letters.v1",
			"max_handler_time: 1500ms",
			"commit_metadata_bytes: 4096",
		}, func(c *Consumer) {
			c.Retry = Retry{MaxAttempts: 7, InitialBackoff: time.Second, MaxBackoff: time.Minute}
			c.OnFailure = OnFailureDLQ
			c.DLQTopic = "orders_dead-letters.v1"
			c.MaxHandlerTime = 1500 * time.Millisecond
			c.CommitMetadataBytes = 4096
		}},
		{"partial retry keeps the other defaults", []string{"retry:", "  max_attempts: 1"}, func(c *Consumer) {
			c.Retry.MaxAttempts = 1
		}},
		{"partial retry, flow style", []string{"retry: {max_backoff: 100ms}"}, func(c *Consumer) {
			c.Retry.MaxBackoff = 100 * time.Millisecond // equal to initial_backoff is fine
		}},
		{"null retry means default", []string{"retry: ~"}, func(*Consumer) {}},
		{"empty retry means default", []string{"retry: {}"}, func(*Consumer) {}},
		{"null key inside retry means default", []string{"retry: {initial_backoff: ~, max_attempts: 2}"}, func(c *Consumer) {
			c.Retry.MaxAttempts = 2
		}},
		{"skip", []string{"on_failure: skip"}, func(c *Consumer) { c.OnFailure = OnFailureSkip }},
		{"dlq_topic kept while on_failure is fail", []string{"dlq_topic: later"}, func(c *Consumer) { c.DLQTopic = "later" }},
		{"longest dlq topic", []string{"on_failure: dlq", "dlq_topic: " + strings.Repeat("d", 249)}, func(c *Consumer) {
			c.OnFailure = OnFailureDLQ
			c.DLQTopic = strings.Repeat("d", 249)
		}},
		{"max_handler_time 0s is unlimited", []string{"max_handler_time: 0s"}, func(*Consumer) {}},
		{"commit_metadata_bytes 0 is off", []string{"commit_metadata_bytes: 0"}, func(c *Consumer) { c.CommitMetadataBytes = 0 }},
		{"commit_metadata_bytes 64", []string{"commit_metadata_bytes: 64"}, func(c *Consumer) { c.CommitMetadataBytes = 64 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", oneConsumer(tt.lines)), noEnv)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := wantFailureDefaults
			tt.want(&want)
			eq(t, "failure keys", failureKeys(c.Consumers[0]), want)
		})
	}
}

func TestFailureKeysInvalid(t *testing.T) {
	tests := []struct {
		name    string
		lines   []string // inside the consumer
		wantKey string
		wantIn  []string
	}{
		{"quoted max_attempts", []string{`retry: {max_attempts: "4"}`}, "consumers[0].retry.max_attempts",
			[]string{`expected an integer, got "4" (a string: remove the quotes)`}},
		{"max_attempts 0", []string{"retry: {max_attempts: 0}"}, "consumers[0].retry.max_attempts",
			[]string{"config: consumers[0].retry.max_attempts: must be between 1 and 1000000 (got 0)"}},
		{"max_attempts -1", []string{"retry: {max_attempts: -1}"}, "consumers[0].retry.max_attempts",
			[]string{"must be between 1 and 1000000 (got -1)"}},
		{"max_attempts not an integer", []string{"retry: {max_attempts: many}"}, "consumers[0].retry.max_attempts",
			[]string{`cannot parse "many" as an integer`}},
		{"max_backoff below initial_backoff", []string{"retry: {initial_backoff: 100ms, max_backoff: 50ms}"}, "consumers[0].retry.max_backoff",
			[]string{"config: consumers[0].retry.max_backoff: must be between retry.initial_backoff (100ms) and 24h (got 50ms)"}},
		{"max_backoff below the default initial_backoff", []string{"retry: {max_backoff: 10ms}"}, "consumers[0].retry.max_backoff",
			[]string{"must be between retry.initial_backoff (100ms) and 24h (got 10ms)"}},
		{"initial_backoff above the default max_backoff", []string{"retry: {initial_backoff: 1m}"}, "consumers[0].retry.max_backoff",
			[]string{"must be between retry.initial_backoff (1m) and 24h (got 10s)"}},
		{"initial_backoff 0", []string{"retry: {initial_backoff: 0s}"}, "consumers[0].retry.initial_backoff",
			[]string{"must be between 1ms and 24h (got 0s)"}},
		{"initial_backoff negative", []string{"retry: {initial_backoff: -1s}"}, "consumers[0].retry.initial_backoff",
			[]string{"must be between 1ms and 24h (got -1s)"}},
		{"initial_backoff bare number", []string{"retry: {initial_backoff: 100}"}, "consumers[0].retry.initial_backoff",
			[]string{"use a unit"}},
		{"unknown key in retry", []string{"retry: {max_attempt: 2}"}, "consumers[0].retry.max_attempt",
			[]string{"config: unknown key consumers[0].retry.max_attempt", `did you mean "max_attempts"?`}},
		{"scalar retry", []string{"retry: 3"}, "consumers[0].retry", []string{"expected a mapping"}},
		{"dlq without dlq_topic", []string{"on_failure: dlq"}, "consumers[0].dlq_topic",
			[]string{"config: consumers[0].dlq_topic: required when on_failure is dlq"}},
		{"dlq with empty dlq_topic", []string{"on_failure: dlq", `dlq_topic: ""`}, "consumers[0].dlq_topic",
			[]string{"required when on_failure is dlq"}},
		{"dlq with invalid dlq_topic", []string{"on_failure: dlq", `dlq_topic: "orders dlq"`}, "consumers[0].dlq_topic",
			[]string{"Kafka topic name", `"orders dlq"`}},
		{"dlq_topic too long", []string{"on_failure: dlq", "dlq_topic: " + strings.Repeat("d", 250)}, "consumers[0].dlq_topic",
			[]string{"1 to 249"}},
		{"dlq_topic ..", []string{"on_failure: dlq", `dlq_topic: ".."`}, "consumers[0].dlq_topic",
			[]string{`".."`}},
		{"invalid dlq_topic while on_failure is fail", []string{"dlq_topic: a/b"}, "consumers[0].dlq_topic",
			[]string{`"a/b"`}},
		{"bad on_failure", []string{"on_failure: retry"}, "consumers[0].on_failure",
			[]string{"must be one of fail, skip, dlq", `"retry"`}},
		{"empty on_failure", []string{`on_failure: ""`}, "consumers[0].on_failure",
			[]string{"must be one of fail, skip, dlq"}},
		{"negative max_handler_time", []string{"max_handler_time: -1s"}, "consumers[0].max_handler_time",
			[]string{"must be 0 (unlimited) or between 1ms and 24h (got -1s)"}},
		{"bare max_handler_time", []string{"max_handler_time: 0"}, "consumers[0].max_handler_time",
			[]string{"use a unit"}},
		{"commit_metadata_bytes 10", []string{"commit_metadata_bytes: 10"}, "consumers[0].commit_metadata_bytes",
			[]string{"must be 0 (off) or 64 to 4096 (got 10)"}},
		{"commit_metadata_bytes 63", []string{"commit_metadata_bytes: 63"}, "consumers[0].commit_metadata_bytes",
			[]string{"got 63"}},
		{"commit_metadata_bytes 4097", []string{"commit_metadata_bytes: 4097"}, "consumers[0].commit_metadata_bytes",
			[]string{"got 4097"}},
		{"commit_metadata_bytes 5000", []string{"commit_metadata_bytes: 5000"}, "consumers[0].commit_metadata_bytes",
			[]string{"got 5000"}},
		{"commit_metadata_bytes -1", []string{"commit_metadata_bytes: -1"}, "consumers[0].commit_metadata_bytes",
			[]string{"got -1"}},
		// The handler is checked before the new keys, retry before on_failure.
		{"handler reported first", []string{"handler: {type: http}", "retry: {max_attempts: 0}"}, "consumers[0].handler.url", nil},
		{"retry reported before on_failure", []string{"retry: {max_attempts: 0}", "on_failure: nope"}, "consumers[0].retry.max_attempts", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", oneConsumer(tt.lines)), noEnv)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c)
			}
			checkInvalid(t, err, tt.wantKey, tt.wantIn...)
		})
	}

	// The key path names the right consumer.
	doc := "consumers:\n  - {name: a, topics: [t], handler: {type: noop}}\n  - {name: b, topics: [t], retry: {max_attempts: 0}}\n"
	_, err := Load(writeConfig(t, "app.yaml", doc), noEnv)
	checkInvalid(t, err, "consumers[1].retry.max_attempts", "got 0")
}

func TestFailureKeysInCode(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(c *Consumer)
		wantKey string // "" means valid
	}{
		{"defaults", func(*Consumer) {}, ""},
		{"dlq with topic", func(c *Consumer) { c.OnFailure, c.DLQTopic = OnFailureDLQ, "dead" }, ""},
		{"equal backoffs", func(c *Consumer) { c.Retry.MaxBackoff = c.Retry.InitialBackoff }, ""},
		{"zero Retry (consumer not built by DefaultConsumer)", func(c *Consumer) { c.Retry = Retry{} }, "consumers[0].retry.max_attempts"},
		{"zero OnFailure", func(c *Consumer) { c.OnFailure = "" }, "consumers[0].on_failure"},
		{"max_backoff below initial_backoff", func(c *Consumer) { c.Retry.MaxBackoff = time.Millisecond }, "consumers[0].retry.max_backoff"},
		{"dlq topic .", func(c *Consumer) { c.OnFailure, c.DLQTopic = OnFailureDLQ, "." }, "consumers[0].dlq_topic"},
		{"negative max_handler_time", func(c *Consumer) { c.MaxHandlerTime = -time.Nanosecond }, "consumers[0].max_handler_time"},
		{"commit_metadata_bytes 4097", func(c *Consumer) { c.CommitMetadataBytes = 4097 }, "consumers[0].commit_metadata_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.mutate(&c.Consumers[0])
			err := c.Validate()
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate succeeded")
			}
			checkInvalid(t, err, tt.wantKey)
		})
	}
}

func TestFailureKeysEnv(t *testing.T) {
	c, err := Load(writeConfig(t, "app.yaml", envBase), envMap(map[string]string{
		"TURBO_CONSUMERS_0_RETRY_MAX_ATTEMPTS":    "9",
		"TURBO_CONSUMERS_0_RETRY_MAX_BACKOFF":     "1m",
		"TURBO_CONSUMERS_0_ON_FAILURE":            "skip",
		"TURBO_CONSUMERS_0_MAX_HANDLER_TIME":      "5s",
		"TURBO_CONSUMERS_0_COMMIT_METADATA_BYTES": "0",
		"TURBO_CONSUMERS_1_ON_FAILURE":            "dlq",
		"TURBO_CONSUMERS_1_DLQ_TOPIC":             "audit.dlq",
	}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want0 := wantFailureDefaults
	want0.Retry.MaxAttempts = 9
	want0.Retry.MaxBackoff = time.Minute
	want0.OnFailure = OnFailureSkip
	want0.MaxHandlerTime = 5 * time.Second
	want0.CommitMetadataBytes = 0
	eq(t, "consumers[0]", failureKeys(c.Consumers[0]), want0)
	want1 := wantFailureDefaults
	want1.OnFailure = OnFailureDLQ
	want1.DLQTopic = "audit.dlq"
	eq(t, "consumers[1]", failureKeys(c.Consumers[1]), want1)

	// The environment also overrides a retry key the file gives.
	file := strings.Replace(envBase, "concurrency: 4", "concurrency: 4\n    retry: {max_attempts: 2}", 1)
	c, err = Load(writeConfig(t, "app.yaml", file), envMap(map[string]string{"TURBO_CONSUMERS_0_RETRY_MAX_ATTEMPTS": "6"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	eq(t, "consumers[0].retry.max_attempts", c.Consumers[0].Retry.MaxAttempts, 6)
}

func TestFailureKeysEnvErrors(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantKey string
		wantIn  []string
	}{
		{"max_attempts 0", map[string]string{"TURBO_CONSUMERS_0_RETRY_MAX_ATTEMPTS": "0"},
			"consumers[0].retry.max_attempts", []string{"got 0", "TURBO_CONSUMERS_0_RETRY_MAX_ATTEMPTS"}},
		{"bare initial_backoff", map[string]string{"TURBO_CONSUMERS_1_RETRY_INITIAL_BACKOFF": "100"},
			"consumers[1].retry.initial_backoff", []string{"use a unit", "TURBO_CONSUMERS_1_RETRY_INITIAL_BACKOFF"}},
		{"bad on_failure", map[string]string{"TURBO_CONSUMERS_0_ON_FAILURE": "ignore"},
			"consumers[0].on_failure", []string{`"ignore"`, "TURBO_CONSUMERS_0_ON_FAILURE"}},
		// The missing topic is not the variable's key: nothing to blame.
		{"dlq without topic", map[string]string{"TURBO_CONSUMERS_0_ON_FAILURE": "dlq"},
			"consumers[0].dlq_topic", []string{"required when on_failure is dlq"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, "app.yaml", envBase), envMap(tt.env))
			if err == nil {
				t.Fatal("Load succeeded")
			}
			checkInvalid(t, err, tt.wantKey, tt.wantIn...)
		})
	}
}

// TestEnvNamesUnique guards the env naming scheme: since "_" both joins
// path parts and appears inside keys, two key paths could map to one
// variable name (a key "retry_max" beside retry.max, say).
func TestEnvNamesUnique(t *testing.T) {
	seen := map[string]string{}
	var walk func(t reflect.Type, key, env string)
	walk = func(typ reflect.Type, key, env string) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			k, e := joinKey(key, keyName(f)), env+"_"+strings.ToUpper(keyName(f))
			switch {
			case f.Type.Kind() == reflect.Struct && f.Type != durationType:
				walk(f.Type, k, e)
			case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
				walk(f.Type.Elem(), k+"[0]", e+"_0")
			default:
				if prev, dup := seen[e]; dup {
					t.Errorf("%s and %s both map to %s", prev, k, e)
				}
				seen[e] = k
			}
		}
	}
	walk(reflect.TypeFor[Config](), "", EnvPrefix)
	if _, ok := seen["TURBO_CONSUMERS_0_RETRY_MAX_ATTEMPTS"]; !ok {
		t.Errorf("no TURBO_CONSUMERS_0_RETRY_MAX_ATTEMPTS among %v", seen)
	}
}
