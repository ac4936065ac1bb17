//go:build linux

// Package container builds turbo's container image (examples/container)
// from a static binary and runs it: the image's shape, `turbo version`, and
// a consumer inside the container that reads a `turbo dev` on the host.
package container

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// podman runs podman with the OCI runtime make tools chose
// (TURBO_TEST_OCI_RUNTIME: runc where crun refuses the host's cgroups).
func podman(t *testing.T, timeout time.Duration, args ...string) (string, error) {
	t.Helper()
	bin := os.Getenv("TURBO_TEST_PODMAN")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("podman"); err != nil {
			t.Fatalf("podman is needed (`make tools` installs it with apt-get, or set TURBO_TEST_PODMAN): %v", err)
		}
	}
	if rt := os.Getenv("TURBO_TEST_OCI_RUNTIME"); rt != "" {
		args = append([]string{"--runtime", rt}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// limits are the container's resource limits, below this sandbox's own:
// the runtime cannot set them as high as podman's defaults here.
var limits = []string{"--ulimit", "nofile=8192:8192", "--ulimit", "nproc=8192:8192"}

func TestContainerImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "turbo")
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", bin, "./cmd/turbo")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the static binary: %v\n%s", err, out)
	}
	assertStatic(t, bin)
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("the CA bundle the image carries: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca-certificates.crt"), ca, 0o644); err != nil {
		t.Fatal(err)
	}

	tag := fmt.Sprintf("localhost/turbo-test:%d", time.Now().UnixNano())
	dockerfile, _ := filepath.Abs(filepath.Join("..", "..", "examples", "container", "Dockerfile"))
	if out, err := podman(t, 5*time.Minute, "build", "--target", "prebuilt", "-f", dockerfile, "-t", tag, dir); err != nil {
		t.Fatalf("podman build: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = podman(t, time.Minute, "rmi", "-f", tag) })

	out, err := podman(t, time.Minute, "image", "inspect", tag)
	if err != nil {
		t.Fatalf("podman image inspect: %v\n%s", err, out)
	}
	var images []struct {
		Config struct {
			User         string
			Entrypoint   []string
			ExposedPorts map[string]any
			Healthcheck  any
		}
		Size int64
	}
	if err := json.Unmarshal([]byte(out), &images); err != nil || len(images) != 1 {
		t.Fatalf("podman image inspect: %v\n%s", err, out)
	}
	img := images[0]
	if img.Config.User != "65532:65532" || !slices.Equal(img.Config.Entrypoint, []string{"turbo"}) || img.Config.ExposedPorts["9464/tcp"] == nil || img.Config.Healthcheck != nil {
		t.Fatalf("image config: user %q, entrypoint %v, ports %v, healthcheck %v; want a non-root user, [turbo], 9464/tcp, none",
			img.Config.User, img.Config.Entrypoint, img.Config.ExposedPorts, img.Config.Healthcheck)
	}

	run := append([]string{"run", "--rm", "--network", "host"}, limits...)
	if out, err := podman(t, time.Minute, append(run, tag, "version")...); err != nil || !strings.HasPrefix(out, "turbo ") || !strings.Contains(out, "linux/amd64") {
		t.Fatalf("turbo version in the container: %v\n%s", err, out)
	}

	// A consumer in the container, a broker and records on the host.
	const records = 2000
	topic := testkit.TopicName("container")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, 50)
	cfg := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
kafka:
  brokers: [%q]
consumers:
  - name: orders
    group: %s
    topics: [%s]
    concurrency: 16
    handler: {type: sleep, duration: 1ms}
log: {format: json}
`, addr, topic, topic), 0o644); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	out, err = podman(t, 3*time.Minute, append(run, "-v", cfg+":/etc/turbo/app.yaml:ro", tag, "run", "--config", "/etc/turbo/app.yaml", "--exit-on-idle")...)
	if err != nil {
		t.Fatalf("turbo run --exit-on-idle in the container: %v\n%s", err, out)
	}
	var summary struct {
		Message   string
		Processed int
		Committed int
	}
	for line := range strings.Lines(out) {
		if json.Unmarshal([]byte(line), &summary) == nil && summary.Message == "exit summary" {
			break
		}
	}
	if summary.Message != "exit summary" || summary.Processed != records || summary.Committed != records {
		t.Fatalf("exit summary %+v, want %d processed and committed\n%s", summary, records, out)
	}
	t.Logf("FIGURES container records=%d run-in-container=%s binary=%d bytes",
		records, time.Since(started).Round(time.Millisecond), fileSize(t, bin))
}

// assertStatic checks what `ldd` would: the binary asks for no dynamic
// loader and no shared library, so it runs on an empty base.
func assertStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s asks for a dynamic loader: not static", path)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Fatalf("%s needs shared libraries %v (%v): not static", path, libs, err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
