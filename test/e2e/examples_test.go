package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

// TestEveryExampleRuns runs every example of the commands' --help and every
// turbo command line of the shell blocks of README.md and the guides beside
// the code (every README.md of the module), against a broker of the test's
// own: app.yaml becomes a configuration for that broker, the docs'
// 127.0.0.1:9092 its address. A command that ends must exit 0; one
// that runs until a signal (run, swarm, dev) must become ready and then
// stop with exit 0 on SIGTERM.
func TestEveryExampleRuns(t *testing.T) {
	t.Parallel()
	examples := helpExamples(t)
	if n := len(examples); n < 10 {
		t.Fatalf("only %d examples in the commands' help", n)
	}
	readme := readmeExamples(t)
	for _, e := range readme {
		if !slices.Contains(examples, e) {
			examples = append(examples, e)
		}
	}
	topic := testkit.TopicName("examples")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, 500, 50)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: orders
    group: %s
    topics: [%s]
    concurrency: 8
    commit_interval: 100ms
    handler: {type: noop}
shutdown_timeout: 8s
log: {level: info, format: json}
http: {listen: "127.0.0.1:0"}
swarm:
  node_report_interval: 200ms
  node_report_timeout: 5s
  supervision_interval: 100ms
`, addr, topic, topic))
	for _, line := range examples {
		t.Run(line, func(t *testing.T) {
			env, args := exampleArgs(t, line, cfg, addr, topic)
			for k, v := range env {
				testkit.Setenv(t, k, v)
			}
			if untilSignal(args) {
				runUntilReady(t, args)
				return
			}
			p := testkit.Start(t, nil, args...)
			if code, how := p.WaitHow(t, 3*time.Minute); code != 0 {
				t.Fatalf("%s: %s, want exit code 0", line, how)
			}
		})
	}
}

// helpExamples are the example lines of every command's help, as `turbo
// docs` prints them.
func helpExamples(t *testing.T) []string {
	out, err := exec.Command(testkit.Binary(t), "docs").Output()
	if err != nil {
		t.Fatalf("turbo docs: %v", err)
	}
	var examples []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "Examples:":
			in = true
		case in && strings.HasPrefix(line, "  "):
			examples = append(examples, strings.TrimSpace(line))
		default:
			in = false
		}
	}
	return examples
}

// readmeExamples are the turbo command lines in ```sh blocks of README.md
// and of the guides (every README.md in the module's folders), without
// repeats. The front page must show at least three, and the docs together
// a good number more.
func readmeExamples(t *testing.T) []string {
	docs := []string{"../../README.md"}
	for _, pattern := range []string{"../../*/README.md", "../../*/*/README.md", "../../*/*/*/README.md"} {
		found, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			if rel := strings.TrimPrefix(f, "../../"); !strings.HasPrefix(rel, ".") { // not .git, .cache, .bench
				docs = append(docs, f)
			}
		}
	}
	var out []string
	for i, doc := range docs {
		lines := shellTurboLines(t, doc)
		if i == 0 && len(lines) < 3 {
			t.Fatalf("only %d turbo command lines in README.md's shell blocks", len(lines))
		}
		for _, l := range lines {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	if len(out) < 8 {
		t.Fatalf("only %d turbo command lines in the shell blocks of %d docs", len(out), len(docs))
	}
	return out
}

// shellTurboLines are one file's turbo command lines in ```sh blocks.
func shellTurboLines(t *testing.T, path string) []string {
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	for line := range strings.SplitSeq(string(text), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && strings.HasPrefix(line, "turbo "):
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// exampleArgs turns an example line into the environment and arguments of
// a run against the test's broker.
func exampleArgs(t *testing.T, line, cfg, addr, topic string) (map[string]string, []string) {
	env := map[string]string{}
	fields := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), "&"))
	for len(fields) > 0 && strings.Contains(fields[0], "=") && fields[0] != "turbo" {
		k, v, _ := strings.Cut(fields[0], "=")
		env[k] = v
		fields = fields[1:]
	}
	if len(fields) < 2 || fields[0] != "turbo" {
		t.Fatalf("example %q is not a turbo command line", line)
	}
	args := fields[1:]
	for i := 1; i < len(args); i++ {
		switch prev := args[i-1]; {
		case prev == "--config" && args[i] == "app.yaml":
			args[i] = cfg
		case prev == "--brokers" && args[i] == "127.0.0.1:9092":
			args[i] = addr
		case prev == "--listen":
			args[i] = "127.0.0.1:0" // a port of its own: never the docs'
		case prev == "--topic" && args[i] == "orders":
			args[i] = topic
		case prev == "--data-dir":
			args[i] = t.TempDir()
		}
	}
	return env, args
}

// untilSignal reports whether the command runs until it is stopped.
func untilSignal(args []string) bool {
	switch args[0] {
	case "dev":
		return true
	case "run", "swarm":
		return !slices.Contains(args, "--exit-on-idle")
	}
	return false
}

// runUntilReady starts a command that runs until a signal, waits until it
// is ready (dev: it says where it listens; run and swarm: /readyz is 200),
// stops it with SIGTERM and expects exit 0.
func runUntilReady(t *testing.T, args []string) {
	var p *testkit.Proc
	if args[0] == "dev" {
		var out testkit.Buffer
		p = testkit.Start(t, &out, args...)
		testkit.Eventually(t, 30*time.Second, "turbo dev to say it listens", func() bool {
			return strings.Contains(out.String(), "listening on")
		})
	} else {
		var live string
		p, live = testkit.StartHTTP(t, nil, nil, args...)
		testkit.Eventually(t, 2*time.Minute, "/readyz to answer 200", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+live+"/readyz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	p.Signal(t, syscall.SIGTERM)
	if code, how := p.WaitHow(t, time.Minute); code != 0 {
		t.Fatalf("turbo %s after SIGTERM: %s, want exit code 0", strings.Join(args, " "), how)
	}
}
