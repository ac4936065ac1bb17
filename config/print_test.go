package config

import (
	"reflect"
	"strings"
	"testing"
)

// printedFull sets a value in every section, away from the defaults where
// the validation allows, so a field the printer drops or misspells changes
// what loads back.
const printedFull = `
kafka:
  brokers: ["k1:9092", "k2:9092"]
  client_id: printer
  version: 3.9.0
  group_instance_id: member-1
  tls: {enabled: true, server_name: kafka.internal}
consumers:
  - name: orders
    group: orders-workers
    topics: [orders, refunds]
    initial_offset: oldest
    ordering: partition
    concurrency: 33
    concurrency_mode: adaptive
    concurrency_min: 3
    max_buffered: 5000
    max_buffered_bytes: 96MiB
    commit_interval: 1500ms
    max_handler_time: 45s
    on_failure: skip
    retry: {max_attempts: 7, initial_backoff: 150ms, max_backoff: 9s}
    rate: {limit: 250.5, burst: 40}
    batch: {max_records: 20, max_wait: 30ms, max_bytes: 2MiB}
    handler:
      type: http
      url: http://127.0.0.1:8080/records
      timeout: 4s
      encoding: utf8
      headers:
        - {name: X-Team, value_env: TEAM}
  - name: audit
    topics: [audit]
    ordering: unordered
    handler: {type: sleep, duration: 2ms}
shutdown_timeout: 21s
log: {level: warn, format: json}
swarm: {nodes: 3, memory_limit: 3GiB, max_restarts: 9}
http: {listen: "127.0.0.1:9464", control: true}
tracing: {service_name: printer-svc}
`

func TestPrintLoadsBackUnchanged(t *testing.T) {
	env := map[string]string{"TEAM": "payments", "TURBO_SHUTDOWN_TIMEOUT": "22s"}
	want, err := loadEnv(writeConfig(t, "full.yaml", printedFull), env)
	if err != nil {
		t.Fatalf("the test's configuration is invalid: %v", err)
	}
	if want.ShutdownTimeout.String() != "22s" {
		t.Fatalf("the environment override did not apply: shutdown_timeout %s", want.ShutdownTimeout)
	}
	out, err := want.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "unprintable") {
		t.Fatalf("a field has a kind the printer does not know:\n%s", out)
	}
	for _, line := range []string{"shutdown_timeout: 22s", "max_buffered_bytes: 96MiB", "commit_interval: 1.5s", "limit: 250.5", "memory_limit: 3GiB", "topics: [orders, refunds]"} {
		if !strings.Contains(string(out), line) {
			t.Errorf("printed configuration lacks %q:\n%s", line, out)
		}
	}
	// Without the environment: what was printed must stand on its own.
	got, err := Load(writeConfig(t, "printed.yaml", string(out)), envMap(map[string]string{"TEAM": "payments"}))
	if err != nil {
		t.Fatalf("the printed configuration does not load: %v\n%s", err, out)
	}
	if nilEmpty(reflect.ValueOf(got).Elem()); !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded back differently:\n got  %#v\n want %#v\nprinted:\n%s", got, want, out)
	}
	// Defaults are printed too: the second consumer set no retry policy.
	if want.Consumers[1].Retry.MaxAttempts == 0 || !strings.Contains(string(out), "max_attempts: ") {
		t.Fatalf("defaults are missing from the print:\n%s", out)
	}
}

func TestPrintRedactsSecrets(t *testing.T) {
	const (
		password = "pw-" + secretValue
		header   = "Bearer hdr-" + secretValue
	)
	doc := `
kafka:
  brokers: ["k1:9092"]
  tls: {enabled: true}
  sasl: {mechanism: SCRAM-SHA-512, username: svc}
consumers:
  - name: orders
    topics: [orders]
    handler:
      type: http
      url: https://example.internal/records
      headers:
        - {name: Authorization, value: "` + header + `"}
`
	cfg, err := loadEnv(writeConfig(t, "secret.yaml", doc), map[string]string{"TURBO_KAFKA_SASL_PASSWORD": password})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{password, header, secretValue} {
		if strings.Contains(string(out), s) {
			t.Fatalf("the printed configuration shows a secret:\n%s", out)
		}
	}
	if n := strings.Count(string(out), "[redacted]"); n != 2 {
		t.Fatalf("%d redacted values, want 2 (the password and the header):\n%s", n, out)
	}
	if !strings.Contains(string(out), "username: svc") {
		t.Fatalf("a user name is not a secret and should be shown:\n%s", out)
	}
}

// nilEmpty sets the empty slices and maps in v to nil: a printed `[]` loads
// as an empty list where the original had none, the same configuration.
func nilEmpty(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			nilEmpty(v.Field(i))
		}
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if v.Kind() == reflect.Slice {
			for i := range v.Len() {
				nilEmpty(v.Index(i))
			}
		}
	}
}
