package module

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
)

// TestOutsideModule proves that an embedder can follow the README with
// turbo fetched as a module, not through a replace directive. A module of
// its own (example.com/outside) runs the Embedding section's `go get` line
// against a file-based module proxy serving HEAD, with the real proxy behind
// it for turbo's dependencies (their checksums verified as usual); then,
// from the copy of turbo the go command downloaded:
//   - examples/embedded, the complete service the section points to, builds,
//     and so does the section's own code, compiled as a function;
//   - the "Testing a handler" section's code (actors/README.md) runs as a test, with a handler
//     that succeeds on every record, and each `expression // value` line in
//     it checks that the expression prints that value.
//
// It fails when the module zip refuses what is committed, when turbo's
// go.mod works only inside this repository, or when the README's code no
// longer matches the API. Like TestModuleZips it sees only what HEAD
// holds: commit first. Dependencies come from the shared module and build
// caches; turbo is fetched at a pseudo-version of this run alone, and
// removed from the module cache afterwards.
func TestOutsideModule(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command: %v", err)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c := headCommit(ctx, t)
	// The time is the run's, not the commit's, so that no earlier or
	// concurrent run's copy in the shared module cache stands in for the
	// proxy's.
	version := c.pseudoVersion(began)

	proxy := t.TempDir()
	writeProxy(t, proxy, c, version, began)
	env := outsideEnv(ctx, t, proxy)
	t.Cleanup(func() { forget(t, env, version) })

	outside := t.TempDir()
	goVersion := "1.26"
	if f, err := modfile.ParseLax("go.mod", c.goMod, nil); err == nil && f.Go != nil {
		goVersion = f.Go.Version
	}
	write(t, filepath.Join(outside, "go.mod"), "module example.com/outside\n\ngo "+goVersion+"\n")

	// The README of the commit, to find the line to run before anything is
	// fetched; the rest comes from the fetched copy.
	readme, err := c.read("README.md")
	if err != nil {
		t.Fatal(err)
	}
	get := goGetArgs(t, section(t, string(readme), "## Embedding"), version)
	step(ctx, t, "go get", outside, env, 3*time.Minute, get...)

	fetched := strings.TrimSpace(step(ctx, t, "go list", outside, env, time.Minute, "list", "-m", "-f", "{{.Dir}}", modulePath))
	if !strings.Contains(fetched, modulePath+"@"+version) {
		t.Fatalf("turbo is not at %s in the outside module but in %s", version, fetched)
	}
	readme = read(t, filepath.Join(fetched, "README.md"))
	embedding := section(t, string(readme), "## Embedding")
	if !strings.Contains(embedding, "examples/embedded") {
		t.Errorf("the README's Embedding section no longer points to examples/embedded, which this test builds as its complete example")
	}
	write(t, filepath.Join(outside, "main.go"), string(read(t, filepath.Join(fetched, "examples", "embedded", "main.go"))))
	write(t, filepath.Join(outside, "readme_embedding.go"), embeddingSource(goBlock(t, embedding, "Embedding")))
	step(ctx, t, "go build", outside, env, 5*time.Minute, "build", "-o", filepath.Join(t.TempDir(), "outside"), ".")

	// The guide beside the runtime holds the harness's example.
	guide := read(t, filepath.Join(fetched, "actors", "README.md"))
	handlerTest := section(t, string(guide), "## Testing a handler")
	write(t, filepath.Join(outside, "readme_handler_test.go"), handlerTestSource(t, goBlock(t, handlerTest, "Testing a handler")))
	out := step(ctx, t, "go test", outside, env, 5*time.Minute, "test", "-count=1", "-v", "-run", "^TestReadmeTestingAHandler$", ".")
	if !strings.Contains(out, "--- PASS: TestReadmeTestingAHandler") {
		t.Fatalf("the README's handler test did not run:\n%s", out)
	}
	t.Logf("fetched %s@%s from the file proxy, built its embedding examples and ran the README's handler test in %s",
		modulePath, version, time.Since(began).Round(10*time.Millisecond))
}

// writeProxy writes a file-based module proxy (`go help goproxy`) serving
// the commit as turbo at version, made at time at.
func writeProxy(t *testing.T, dir string, c commit, version string, at time.Time) {
	t.Helper()
	v := filepath.Join(dir, filepath.FromSlash(modulePath), "@v")
	if err := os.MkdirAll(v, 0o755); err != nil {
		t.Fatal(err)
	}
	zipFile, err := os.Create(filepath.Join(v, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zipFile.Close()
	if err := c.moduleZip(zipFile, version); err != nil {
		t.Fatal(err)
	}
	if err := zipFile.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, at.UTC().Truncate(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(v, version+".info"), string(info))
	write(t, filepath.Join(v, version+".mod"), string(c.goMod))
	write(t, filepath.Join(v, "list"), version+"\n")
}

// outsideEnv is the environment of the go commands run in the outside
// module: the file proxy first, then this machine's proxies for turbo's
// dependencies, whose checksums are verified as usual (turbo's own cannot
// be: the checksum database has never seen this zip); this machine's module
// and build caches, and its toolchain.
func outsideEnv(ctx context.Context, t *testing.T, proxy string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "env", "-json", "GOPROXY", "GOMODCACHE", "GOCACHE")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	var goEnv struct{ GOPROXY, GOMODCACHE, GOCACHE string }
	if err := json.Unmarshal(out, &goEnv); err != nil {
		t.Fatalf("go env: %v", err)
	}
	proxies := (&url.URL{Scheme: "file", Path: filepath.ToSlash(proxy)}).String()
	if goEnv.GOPROXY != "" && goEnv.GOPROXY != "off" {
		proxies += "," + goEnv.GOPROXY
	}
	set := map[string]string{
		"GOPROXY":     proxies,
		"GONOSUMDB":   modulePath,
		"GOPRIVATE":   "",
		"GONOPROXY":   "",
		"GOFLAGS":     "-mod=mod",
		"GOWORK":      "off",
		"GOTOOLCHAIN": "local",
		"GOMODCACHE":  goEnv.GOMODCACHE,
		"GOCACHE":     goEnv.GOCACHE,
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !hasKey(set, k) {
			env = append(env, kv)
		}
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

// forget removes turbo at version from the shared module cache, so that
// runs do not pile up copies of it there.
func forget(t *testing.T, env []string, version string) {
	var cache string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOMODCACHE="); ok {
			cache = v
		}
	}
	if cache == "" {
		return
	}
	paths := []string{filepath.Join(cache, filepath.FromSlash(modulePath)+"@"+version)}
	downloads, _ := filepath.Glob(filepath.Join(cache, "cache", "download", filepath.FromSlash(modulePath), "@v", version+".*"))
	for _, p := range append(paths, downloads...) {
		// The go command makes what it extracts read-only.
		_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(path, 0o755)
			}
			return nil
		})
		if err := os.RemoveAll(p); err != nil {
			t.Logf("leaving %s in the module cache: %v", p, err)
		}
	}
}

// step runs the go command in dir with args, bounded by timeout, and returns
// what it printed; the test fails if it fails.
func step(ctx context.Context, t *testing.T, what, dir string, env []string, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (after %s)", ctx.Err(), timeout)
	}
	if err != nil {
		t.Fatalf("%s in the outside module: go %s: %v\n%s", what, strings.Join(args, " "), err, out)
	}
	t.Logf("%s: %s", what, time.Since(began).Round(10*time.Millisecond))
	return string(out)
}

// section returns the README's section under heading, up to the next
// heading of the same or a higher level.
func section(t *testing.T, readme, heading string) string {
	t.Helper()
	start := strings.Index(readme, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("the README has no %q section", heading)
	}
	level := strings.Index(heading, " ")
	rest := readme[start+1+len(heading):]
	end := regexp.MustCompile(fmt.Sprintf(`\n#{1,%d} `, level)).FindStringIndex(rest)
	if end == nil {
		return rest
	}
	return rest[:end[0]]
}

// goBlock returns the first Go code block of a README section.
func goBlock(t *testing.T, section, name string) string {
	t.Helper()
	_, code, ok := strings.Cut(section, "\n```go\n")
	if !ok {
		t.Fatalf("the README's %q section has no Go code block", name)
	}
	code, _, ok = strings.Cut(code, "\n```")
	if !ok {
		t.Fatalf("the README's %q section has an unterminated Go code block", name)
	}
	return code + "\n"
}

// goGetArgs returns the arguments of the README section's `go get` line,
// with the version it asks for replaced by version.
func goGetArgs(t *testing.T, section, version string) []string {
	t.Helper()
	for line := range strings.SplitSeq(section, "\n") {
		args := strings.Fields(line)
		if len(args) < 3 || args[0] != "go" || args[1] != "get" {
			continue
		}
		for i, arg := range args {
			if path, _, ok := strings.Cut(arg, "@"); ok && path == modulePath {
				args[i] = modulePath + "@" + version
				return args[1:]
			}
		}
	}
	t.Fatalf("the README's Embedding section has no `go get %s@…` line", modulePath)
	return nil
}

// embeddingSource is a file of the outside module's main package with the
// README's Embedding code as the body of a function: it must compile, and
// is never called.
func embeddingSource(code string) string {
	return `package main

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
)

// In case the README's code stops using one of them.
var (
	_ context.Context
	_ = time.Second
	_ actors.Options
	_ = config.Default
)

// readmeEmbedding is the README's Embedding code.
func readmeEmbedding(ctx context.Context, log zerolog.Logger) error {
` + indent(code) + `	return err
}
`
}

// checkLine is a line of the README's code that states what an expression
// gives: `h.HandledOffsets("alice") // [0 1]; and why`.
var checkLine = regexp.MustCompile(`^(\s*)(\S.*\)) // (\[[^\]]*\]|[^\s;]+)`)

// handlerTestSource is a test file of the outside module running the code
// of the README's "Testing a handler" section, with each line that states
// what an expression gives turned into a check of it.
func handlerTestSource(t *testing.T, code string) string {
	t.Helper()
	var body strings.Builder
	checks := 0
	for line := range strings.SplitSeq(strings.TrimSuffix(code, "\n"), "\n") {
		m := checkLine.FindStringSubmatch(line)
		if m == nil {
			body.WriteString(line + "\n")
			continue
		}
		checks++
		fmt.Fprintf(&body, "%sif got := fmt.Sprint(%s); got != %q {\n%s\tt.Errorf(\"README: %%s gives %%s, not %%s\", %q, got, %q)\n%s}\n",
			m[1], m[2], m[3], m[1], m[2], m[3], m[1])
	}
	if checks == 0 {
		t.Fatalf("the README's handler test states no result (a line `expression // value`) to check:\n%s", code)
	}
	return `package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
)

// In case the README's code stops using one of them.
var (
	_ = errors.New
	_ = fmt.Sprint
)

// myHandler is the handler the README's test wraps: every record succeeds.
var myHandler = actors.HandlerFunc(func(context.Context, *actors.Record) error { return nil })

// TestReadmeTestingAHandler is the README's "Testing a handler" code.
func TestReadmeTestingAHandler(t *testing.T) {
` + indent(body.String()) + `}
`
}

// indent indents code by one tab.
func indent(code string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSuffix(code, "\n"), "\n") {
		if line != "" {
			b.WriteString("\t")
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
