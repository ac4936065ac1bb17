package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to Load as a YAML file: it must never
// panic, and must return either a valid configuration or an ErrInvalid.
func FuzzLoad(f *testing.F) {
	seeds := []string{
		fullYAML,
		"consumers:\n  - name: orders\n    topics: [orders]\n",
		"consumers: [{name: a, topics: [t], concurrency: 0}]",
		"consumers: [{name: a, topics: 5, commit_interval: 5 parsecs}]",
		"kafka: {brokers: [embedded], embedded: {seed: {records: 3, topic: t}}}\nconsumers: [{name: a, topics: [t]}]",
		"consumers: [{name: a, topics: [t], handler: {type: http, url: /x}}]",
		"consumers: [{name: a, topics: [t], retry: {max_attempts: 2, max_backoff: 1ms}, on_failure: dlq, dlq_topic: d}]",
		"consumers: [{name: a, topics: [t], retry: 5, commit_metadata_bytes: 9, max_handler_time: -1s}]",
		"a: &x {b: *x}",
		"consumers: [~, 1, [2], {3: 4}]",
		"? [a]\n: b\n",
		"kafka: {version: 3.6}\nshutdown_timeout: 1e400\n",
		"consumers:\n\t- bad",
		"",
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
	})
}
