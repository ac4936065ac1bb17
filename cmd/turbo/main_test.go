package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/supervisor"
)

// Every case in this file must fail (or finish) during argument or
// configuration validation: nothing here may reach a broker. The broker
// address 127.0.0.1:1 makes an accidental connection attempt fail rather
// than find something, and the per-call deadline below catches a case that
// would start consuming instead of exiting.
const validYAML = `kafka:
  brokers: ["127.0.0.1:1"]
consumers:
  - name: orders
    topics: [orders]
    handler: {type: noop}
`

// callDeadline bounds one runMain call; validation takes milliseconds.
const callDeadline = 10 * time.Second

// withTop appends top-level lines to the valid configuration.
func withTop(lines ...string) string { return validYAML + strings.Join(lines, "\n") + "\n" }

// withConsumer adds lines inside the (only) consumer; a handler line
// replaces its noop handler.
func withConsumer(lines ...string) string {
	var b strings.Builder
	b.WriteString(validYAML)
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	if slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "handler:") }) {
		return strings.Replace(b.String(), "    handler: {type: noop}\n", "", 1)
	}
	return b.String()
}

// withKafka adds lines inside the kafka section.
func withKafka(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return strings.Replace(validYAML, "kafka:\n", "kafka:\n"+b.String(), 1)
}

func writeConfig(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type result struct {
	code           int
	stdout, stderr string
}

// call runs runMain in process with a deadline.
func call(t *testing.T, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		code := runMain(args, &stdout, &stderr)
		done <- result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(callDeadline):
		t.Fatalf("runMain(%q) did not return within %s: it got past validation", args, callDeadline)
		return result{}
	}
}

// expectUsageError asserts exit code 2, that stderr contains every want,
// and that nothing went to stdout.
func expectUsageError(t *testing.T, r result, wants ...string) {
	t.Helper()
	if r.code != exitUsage {
		t.Errorf("exit code = %d, want %d (usage/configuration error)\nstderr: %s", r.code, exitUsage, r.stderr)
	}
	for _, w := range wants {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not contain %q:\n%s", w, r.stderr)
		}
	}
	if r.stdout != "" {
		t.Errorf("stdout should be empty on a usage error, got:\n%s", r.stdout)
	}
}

// The table below breaks one thing at a time in validYAML; this proves the
// unbroken document is valid, so each failure is caused by its change.
func TestValidBaseConfig(t *testing.T) {
	path := writeConfig(t, "base.yaml", validYAML)
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatalf("the base configuration is invalid: %v", err)
	}
	if len(cfg.Consumers) != 1 || cfg.Consumers[0].Name != "orders" || cfg.Kafka.Brokers[0] != "127.0.0.1:1" {
		t.Fatalf("the base configuration loaded as %+v", cfg)
	}
	// The helpers keep the document valid when they add valid lines.
	for _, doc := range []string{
		withTop("shutdown_timeout: 5s"),
		withConsumer("concurrency: 3"),
		withKafka("version: 2.8.0"),
	} {
		if _, err := config.Load(writeConfig(t, "ok.yaml", doc), nil); err != nil {
			t.Errorf("helper produced an invalid document: %v\n%s", err, doc)
		}
	}
}

func TestCommands(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stdoutHas  string
		stderrHas  []string
		stdoutNone bool
	}{
		{name: "no arguments", args: nil, code: exitUsage, stderrHas: []string{"Usage:\n  turbo [command]", "Available Commands:"}, stdoutNone: true},
		{name: "empty argument list", args: []string{}, code: exitUsage, stderrHas: []string{"Usage:\n  turbo [command]"}, stdoutNone: true},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, stderrHas: []string{`unknown command "frobnicate" for "turbo"`, "See 'turbo --help'."}, stdoutNone: true},
		{name: "mistyped command", args: []string{"rnu"}, code: exitUsage, stderrHas: []string{`unknown command "rnu"`, "Did you mean this?\n\trun"}, stdoutNone: true},
		{name: "help", args: []string{"help"}, code: exitOK, stdoutHas: "Usage:\n  turbo [command]"},
		{name: "-h", args: []string{"-h"}, code: exitOK, stdoutHas: "Usage:\n  turbo [command]"},
		{name: "--help", args: []string{"--help"}, code: exitOK, stdoutHas: "Usage:\n  turbo [command]"},
		{name: "help run", args: []string{"help", "run"}, code: exitOK, stdoutHas: "turbo run --config FILE [flags]"},
		{name: "version", args: []string{"version"}, code: exitOK, stdoutHas: "turbo "},
		{name: "--version", args: []string{"--version"}, code: exitOK, stdoutHas: "turbo "},
		{name: "-v", args: []string{"-v"}, code: exitOK, stdoutHas: "turbo "},
		{name: "version extra", args: []string{"version", "now"}, code: exitUsage, stderrHas: []string{`unexpected argument "now"`}, stdoutNone: true},
		{name: "run -h", args: []string{"run", "-h"}, code: exitOK, stdoutHas: "--config string"},
		{name: "run --help", args: []string{"run", "--help"}, code: exitOK, stdoutHas: "Examples:\n  turbo run --config app.yaml"},
		{name: "run single-dash long flag", args: []string{"run", "-config", "x.yaml"}, code: exitUsage, stderrHas: []string{"unknown shorthand flag: 'c' in -config"}, stdoutNone: true},
		{name: "run bool flag with a bad value", args: []string{"run", "--exit-on-idle=maybe"}, code: exitUsage, stderrHas: []string{"exit-on-idle"}, stdoutNone: true},
		{name: "config alone", args: []string{"config"}, code: exitOK, stdoutHas: "Available Commands:\n  check"},
		{name: "config unknown subcommand", args: []string{"config", "show"}, code: exitUsage, stderrHas: []string{`unknown command "show" for "turbo config"`}, stdoutNone: true},
		{name: "config check without --config", args: []string{"config", "check"}, code: exitUsage, stderrHas: []string{"--config is required"}, stdoutNone: true},
		{name: "config print without --config", args: []string{"config", "print"}, code: exitUsage, stderrHas: []string{"--config is required"}, stdoutNone: true},
		{name: "config check missing file", args: []string{"config", "check", "--config", "/nonexistent/app.yaml"}, code: exitUsage, stderrHas: []string{"/nonexistent/app.yaml"}, stdoutNone: true},
		{name: "completion without shell", args: []string{"completion"}, code: exitOK, stdoutHas: "bash"},
		{name: "completion unknown shell", args: []string{"completion", "tcsh"}, code: exitUsage, stderrHas: []string{"tcsh"}, stdoutNone: true},
		{name: "run without --config", args: []string{"run"}, code: exitUsage, stderrHas: []string{"--config"}, stdoutNone: true},
		{name: "run with empty --config", args: []string{"run", "--config", ""}, code: exitUsage, stderrHas: []string{"--config"}, stdoutNone: true},
		{name: "run unknown flag", args: []string{"run", "--bogus"}, code: exitUsage, stderrHas: []string{"bogus"}, stdoutNone: true},
		{name: "run flag missing its value", args: []string{"run", "--config"}, code: exitUsage, stderrHas: []string{"config"}, stdoutNone: true},
		{name: "run positional argument", args: []string{"run", "--config", "x.yaml", "extra"}, code: exitUsage, stderrHas: []string{`unexpected argument "extra"`, "See 'turbo run --help'."}, stdoutNone: true},
		{name: "produce without --brokers", args: []string{"produce", "--topic", "t", "--count", "1"}, code: exitUsage, stderrHas: []string{"--brokers"}, stdoutNone: true},
		{name: "produce with empty --brokers", args: []string{"produce", "--brokers", " , ", "--topic", "t", "--count", "1"}, code: exitUsage, stderrHas: []string{"--brokers"}, stdoutNone: true},
		{name: "produce without --topic", args: []string{"produce", "--brokers", "127.0.0.1:1", "--count", "1"}, code: exitUsage, stderrHas: []string{"--topic"}, stdoutNone: true},
		{name: "produce without --count", args: []string{"produce", "--brokers", "127.0.0.1:1", "--topic", "t"}, code: exitUsage, stderrHas: []string{"--count"}, stdoutNone: true},
		{name: "produce --count 0", args: []string{"produce", "--brokers", "127.0.0.1:1", "--topic", "t", "--count", "0"}, code: exitUsage, stderrHas: []string{"--count"}, stdoutNone: true},
		{name: "produce --count -5", args: []string{"produce", "--brokers", "127.0.0.1:1", "--topic", "t", "--count", "-5"}, code: exitUsage, stderrHas: []string{"--count"}, stdoutNone: true},
		{name: "produce --count abc", args: []string{"produce", "--brokers", "127.0.0.1:1", "--topic", "t", "--count", "abc"}, code: exitUsage, stderrHas: []string{"count"}, stdoutNone: true},
		{name: "produce --keys 0", args: []string{"produce", "--brokers", "127.0.0.1:1", "--topic", "t", "--count", "1", "--keys", "0"}, code: exitUsage, stderrHas: []string{"--keys"}, stdoutNone: true},
		{name: "produce --rate -1", args: []string{"produce", "--brokers", "127.0.0.1:1", "--topic", "t", "--count", "1", "--rate", "-1"}, code: exitUsage, stderrHas: []string{"--rate"}, stdoutNone: true},
		{name: "dev --partitions 0", args: []string{"dev", "--partitions", "0"}, code: exitUsage, stderrHas: []string{"--partitions"}, stdoutNone: true},
		{name: "dev --partitions -2", args: []string{"dev", "--partitions", "-2"}, code: exitUsage, stderrHas: []string{"--partitions"}, stdoutNone: true},
		{name: "dev --partitions 1e9", args: []string{"dev", "--partitions", "1000000000"}, code: exitUsage, stderrHas: []string{"--partitions must be between 1 and 1000 (got 1000000000)"}, stdoutNone: true},
		{name: "dev positional argument", args: []string{"dev", "now"}, code: exitUsage, stderrHas: []string{`unexpected argument "now"`}, stdoutNone: true},
		{name: "dev unknown flag", args: []string{"dev", "--port", "9092"}, code: exitUsage, stderrHas: []string{"port"}, stdoutNone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit code = %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.code, r.stdout, r.stderr)
			}
			if tt.stdoutHas != "" && !strings.Contains(r.stdout, tt.stdoutHas) {
				t.Errorf("stdout does not contain %q:\n%s", tt.stdoutHas, r.stdout)
			}
			if tt.stdoutNone && r.stdout != "" {
				t.Errorf("stdout should be empty, got:\n%s", r.stdout)
			}
			for _, w := range tt.stderrHas {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		content string
		file    string   // file name; config.yaml when empty
		extra   []string // flags after --config FILE
		want    []string // substrings of stderr
	}{
		{name: "unknown top-level key", content: withTop("colour: blue"), want: []string{"unknown key colour"}},
		{name: "unknown key in consumer", content: withConsumer("concurency: 4"), want: []string{"consumers[0].concurency", `did you mean "concurrency"`}},
		{name: "unknown key in kafka", content: withKafka("broker: [x:1]"), want: []string{"kafka.broker"}},
		{name: "wrong type", content: withConsumer("concurrency: abc"), want: []string{"consumers[0].concurrency", `"abc"`}},
		{name: "list expected", content: strings.Replace(validYAML, "topics: [orders]", "topics: orders", 1), want: []string{"consumers[0].topics", "expected a list"}},
		{name: "bad duration", content: withConsumer("commit_interval: 5 parsecs"), want: []string{"consumers[0].commit_interval", "5 parsecs"}},
		{name: "bare number duration", content: withTop("shutdown_timeout: 30"), want: []string{"shutdown_timeout", "unit"}},
		{name: "bad ordering", content: withConsumer("ordering: sideways"), want: []string{"consumers[0].ordering", `"sideways"`}},
		{name: "bad initial_offset", content: withConsumer("initial_offset: middle"), want: []string{"consumers[0].initial_offset", `"middle"`}},
		{name: "bad log level", content: withTop("log: {level: loud}"), want: []string{"log.level", `"loud"`}},
		{name: "bad handler type", content: withConsumer("handler: {type: kafka}"), want: []string{"consumers[0].handler.type", `"kafka"`}},
		{name: "empty broker list", content: strings.Replace(validYAML, `["127.0.0.1:1"]`, "[]", 1), want: []string{"kafka.brokers"}},
		{name: "concurrency 0", content: withConsumer("concurrency: 0"), want: []string{"consumers[0].concurrency", "got 0"}},
		{name: "concurrency -3", content: withConsumer("concurrency: -3"), want: []string{"consumers[0].concurrency", "got -3"}},
		{name: "shutdown_timeout 0s", content: withTop("shutdown_timeout: 0s"), want: []string{"shutdown_timeout", "must be between 1s and 1h (got 0s)"}},
		{name: "hash handler without bytes", content: withConsumer("handler: {type: hash}"), want: []string{"consumers[0].handler.bytes", "got 0"}},
		{name: "hash handler with bytes abc", content: withConsumer("handler: {type: hash, bytes: abc}"), want: []string{"consumers[0].handler.bytes", `"abc"`}},
		{name: "http handler without url", content: withConsumer("handler: {type: http}"), want: []string{"consumers[0].handler.url"}},
		{name: "http handler with relative url", content: withConsumer("handler: {type: http, url: /hook}"), want: []string{"consumers[0].handler.url", `"/hook"`}},
		{name: "on_failure dlq without dlq_topic", content: withConsumer("on_failure: dlq"), want: []string{"consumers[0].dlq_topic", "required when on_failure is dlq"}},
		{name: "max_backoff below initial_backoff", content: withConsumer("retry: {initial_backoff: 1s, max_backoff: 500ms}"), want: []string{"consumers[0].retry.max_backoff", "retry.initial_backoff (1s)"}},
		{name: "retry max_attempts 0", content: withConsumer("retry:", "  max_attempts: 0"), want: []string{"consumers[0].retry.max_attempts", "got 0"}},
		{name: "no consumers", content: "kafka:\n  brokers: [\"127.0.0.1:1\"]\n", want: []string{"consumers"}},
		{name: "consumer without topics", content: strings.Replace(validYAML, "    topics: [orders]\n", "", 1), want: []string{"consumers[0].topics"}},
		{name: "consumer without handler", content: strings.Replace(validYAML, "    handler: {type: noop}\n", "", 1), want: []string{"consumers[0].handler", "is missing", "{type: noop}"}},
		{name: "kafka.client misspelt", content: withKafka("client: franz"), want: []string{"kafka.client", `"franz"`, "franz-go"}},
		{name: "consumer protocol on sarama", content: withKafka("group_protocol: consumer"), want: []string{"kafka.group_protocol", "kafka.client: franz-go"}},
		{name: "kafka.version banana", content: withKafka("version: banana"), want: []string{"kafka.version", `"banana"`}},
		{name: "kafka.version 3-part before 1.0", content: withKafka(`version: "0.10.2"`), want: []string{"kafka.version", "0.10.2"}},
		// sarama's cooperative-sticky strategy refuses versions below 2.4;
		// the node retried that forever as "cannot reach Kafka".
		{name: "kafka.version 2.3.0", content: withKafka(`version: "2.3.0"`), want: []string{"kafka.version", "at least 2.4.0", `"2.3.0"`}},
		{name: "kafka.version 1.0.0", content: withKafka(`version: "1.0.0"`), want: []string{"kafka.version", `"1.0.0"`}},
		{name: "kafka.version 0.10.2.0", content: withKafka(`version: "0.10.2.0"`), want: []string{"kafka.version", `"0.10.2.0"`}},
		{name: "concurrency 1e9", content: withConsumer("concurrency: 1000000000"), want: []string{"consumers[0].concurrency", "between 1 and 10000"}},
		{name: "max_buffered max int64", content: withConsumer("max_buffered: 9223372036854775807"), want: []string{"consumers[0].max_buffered", "between 0 and 100000"}},
		{name: "commit_interval 1ns", content: withConsumer("commit_interval: 1ns"), want: []string{"consumers[0].commit_interval", "between 10ms and 24h"}},
		{name: "broker without port", content: strings.Replace(validYAML, `["127.0.0.1:1"]`, "[no-port]", 1), want: []string{"kafka.brokers[0]", `"no-port"`}},
		{name: "topic with a space", content: strings.Replace(validYAML, "topics: [orders]", `topics: ["a b"]`, 1), want: []string{"consumers[0].topics[0]", `"a b"`}},
		{name: "kafka.version 4-part after 1.0", content: withKafka(`version: "3.6.0.1"`), want: []string{"kafka.version", "3.6.0.1"}},
		{name: "unparseable yaml", content: "kafka: [unclosed\n", want: []string{"cannot parse", "config.yaml"}},
		{name: "unsupported extension", file: "config.ini", content: validYAML, want: []string{"config.ini", "extension"}},
		{name: "include unknown consumer", content: validYAML, extra: []string{"--include-consumers", "nope"}, want: []string{"--include-consumers", `"nope"`}},
		{name: "exclude unknown consumer", content: validYAML, extra: []string{"--exclude-consumers", "orders,nope"}, want: []string{"--exclude-consumers", `"nope"`}},
		{name: "filters leave nothing", content: validYAML, extra: []string{"--include-topics", "payments"}, want: []string{"consumers", "nothing left to run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.file
			if file == "" {
				file = "config.yaml"
			}
			path := writeConfig(t, file, tt.content)
			r := call(t, append([]string{"run", "--config", path}, tt.extra...)...)
			expectUsageError(t, r, tt.want...)
			if !strings.HasPrefix(r.stderr, "turbo: ") {
				t.Errorf("stderr should start with \"turbo: \", got:\n%s", r.stderr)
			}
		})
	}
}

func TestRunMissingConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "does-not-exist.yaml")
	r := call(t, "run", "--config", path)
	expectUsageError(t, r, path)
}

func TestRunBadEnvOverride(t *testing.T) {
	tests := []struct {
		env, value string
		want       []string
	}{
		{"TURBO_CONSUMERS_0_CONCURRENCY", "zero", []string{"consumers[0].concurrency", "TURBO_CONSUMERS_0_CONCURRENCY"}},
		{"TURBO_CONSUMERS_0_CONCURRENCY", "0", []string{"consumers[0].concurrency", "TURBO_CONSUMERS_0_CONCURRENCY"}},
		{"TURBO_SHUTDOWN_TIMEOUT", "soon", []string{"shutdown_timeout", "TURBO_SHUTDOWN_TIMEOUT"}},
		{"TURBO_LOG_LEVEL", "loud", []string{"log.level", "TURBO_LOG_LEVEL"}},
		{"TURBO_KAFKA_BROKER", "k:1", []string{"TURBO_KAFKA_BROKER", "names no configuration key", "did you mean TURBO_KAFKA_BROKERS?"}},
		{"TURBO_CONSUMERS_5_CONCURRENCY", "4", []string{"TURBO_CONSUMERS_5_CONCURRENCY", "the file has no consumers[5]"}},
	}
	for _, tt := range tests {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.env, tt.value)
			path := writeConfig(t, "config.yaml", validYAML)
			r := call(t, "run", "--config", path)
			expectUsageError(t, r, tt.want...)
		})
	}
}

func TestSwarmRejectsBadConfigAndFlags(t *testing.T) {
	tests := []struct {
		name    string
		content string
		args    []string
		want    []string
	}{
		{name: "report timeout not above interval", content: withTop("swarm: {node_report_interval: 10s, node_report_timeout: 5s}"), want: []string{"swarm.node_report_timeout", "between 3 × swarm.node_report_interval (30s) and 24h (got 5s)"}},
		{name: "liveness_listen replaced", content: withTop("swarm: {liveness_listen: \"127.0.0.1:8080\"}"), want: []string{"swarm.liveness_listen", "replaced by http.listen"}},
		{name: "http.listen not an address", content: withTop("http: {listen: not an address}"), want: []string{"http.listen", `"not an address"`}},
		{name: "node_report_interval 1ns", content: withTop("swarm: {node_report_interval: 1ns, node_report_timeout: 2ns}"), want: []string{"swarm.node_report_interval", "between 100ms and 24h (got 1ns)"}},
		{name: "supervision_interval 1ns", content: withTop("swarm: {supervision_interval: 1ns}"), want: []string{"swarm.supervision_interval", "between 10ms and 24h (got 1ns)"}},
		{name: "unknown swarm key", content: withTop("swarm: {nodez: 2}"), want: []string{"swarm.nodez"}},
		{name: "bad memory limit", content: withTop("swarm: {memory_limit: huge}"), want: []string{"swarm.memory_limit", `"huge"`}},
		{name: "nodes 0 flag", content: validYAML, args: []string{"--nodes", "0"}, want: []string{"--nodes", "got 0"}},
		{name: "nodes not a number", content: validYAML, args: []string{"--nodes", "many"}, want: []string{"nodes"}},
		{name: "embedded broker", content: strings.Replace(validYAML, `["127.0.0.1:1"]`, "[embedded]", 1), want: []string{"kafka.brokers", "turbo dev"}},
		{name: "include unknown consumer", content: validYAML, args: []string{"--include-consumers", "nope"}, want: []string{"--include-consumers", `"nope"`}},
		{name: "no config", args: []string{}, want: []string{"--config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"swarm"}
			if tt.content != "" {
				args = append(args, "--config", writeConfig(t, "config.yaml", tt.content))
			}
			r := call(t, append(args, tt.args...)...)
			expectUsageError(t, r, tt.want...)
		})
	}
}

// TestNodeEnvironmentIsNoConfiguration: a node reads its configuration with
// the whole environment its supervisor gave it; the variables the supervisor
// adds for the node must not make that configuration invalid.
func TestNodeEnvironmentIsNoConfiguration(t *testing.T) {
	path := writeConfig(t, "config.yaml", validYAML)
	for _, name := range []string{supervisor.EnvSocket, supervisor.EnvIndex, supervisor.EnvNodes, supervisor.EnvObserve, supervisor.EnvExitOnIdle} {
		t.Setenv(name, "1")
	}
	t.Setenv("TURBO_LOG_LEVEL", "debug")
	cfg, err := loadSelected(path, &selection{})
	if err != nil {
		t.Fatalf("loadSelected in a node's environment: %v", err)
	}
	if cfg.Log.Level != config.LogDebug {
		t.Errorf("log.level = %q, want debug from TURBO_LOG_LEVEL", cfg.Log.Level)
	}
}

// TestVersionLine: the version, the commit (12 characters, -dirty for a
// modified tree), the Go version and the platform, from build information;
// something sensible without it.
func TestVersionLine(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "94f114f60935aa11bb22cc33dd44ee55ff667788"}, {Key: "vcs.modified", Value: "true"},
		{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
	}}
	if got, want := versionLine(bi, true), "turbo v1.4.0 (94f114f60935-dirty, go1.26.8, linux/arm64)"; got != want {
		t.Fatalf("versionLine = %q, want %q", got, want)
	}
	bi.Settings = bi.Settings[2:]
	if got, want := versionLine(bi, true), "turbo v1.4.0 (unknown commit, go1.26.8, linux/arm64)"; got != want {
		t.Fatalf("without VCS stamps: %q, want %q", got, want)
	}
	if got := versionLine(nil, false); got != "turbo (no build information)" {
		t.Fatalf("without build information: %q", got)
	}
	// The binary under test has its own: the line names this Go.
	if got := versionLine(debug.ReadBuildInfo()); !strings.Contains(got, runtime.Version()) {
		t.Fatalf("this build: %q does not name %s", got, runtime.Version())
	}
}

// turbo config check names the Kafka client and the group protocol a valid
// file runs with.
func TestConfigCheckShowsTheKafkaSide(t *testing.T) {
	for _, tt := range []struct {
		kafka []string
		want  string
	}{
		{nil, "Kafka client sarama, classic group protocol"},
		{[]string{"client: franz-go"}, "Kafka client franz-go, classic group protocol"},
		{[]string{"client: franz-go", "group_protocol: consumer"}, "Kafka client franz-go, consumer group protocol"},
	} {
		path := writeConfig(t, "config.yaml", withKafka(tt.kafka...))
		r := call(t, "config", "check", "--config", path)
		if r.code != exitOK || !strings.Contains(r.stdout, ": valid (1 consumer: orders; "+tt.want+")") {
			t.Errorf("kafka %v: exit %d, stdout %q; want 0 and %q", tt.kafka, r.code, r.stdout, tt.want)
		}
	}
}
