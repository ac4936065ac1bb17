package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runMainEnv makes the test binary run main() instead of the tests: the
// SIGTERM test starts the real program that way, without a go build.
const runMainEnv = "OIDC_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// cliArgs returns a full command line for dir, with the secret file made.
func cliArgs(t *testing.T, dir string) (args []string, addrFile string) {
	t.Helper()
	secretFile := filepath.Join(dir, "client-secret")
	writeSecret(t, secretFile, testSecret+"\n")
	addrFile = filepath.Join(dir, "oidc.addr")
	return []string{
		"-listen", "127.0.0.1:0", "-addr-file", addrFile, "-client-id", testClientID,
		"-client-secret-file", secretFile, "-lifetime", "10s", "-audience", "turbo-test", "-issuer", "turbo-test-oidc",
	}, addrFile
}

// logSink collects a program's log and wakes waiters on every write; it
// never blocks the writer.
type logSink struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogSink() *logSink { return &logSink{changed: make(chan struct{}, 1)} }

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	s.buf.Write(p)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// await waits until the log contains want, failing after timeout.
func (s *logSink) await(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for !strings.Contains(s.String(), want) {
		select {
		case <-s.changed:
		case <-deadline:
			t.Fatalf("the log has no %q after %s:\n%s", want, timeout, s.String())
		}
	}
}

// checkServing reads the address file and fetches /jwks and a token there.
func checkServing(t *testing.T, addrFile string) {
	t.Helper()
	raw, err := os.ReadFile(addrFile)
	if err != nil {
		t.Fatalf("the address file: %v", err)
	}
	addr, ok := strings.CutSuffix(string(raw), "\n")
	if !ok || !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("address file holds %q, want \"127.0.0.1:PORT\\n\"", raw)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/jwks")
	if err != nil {
		t.Fatalf("GET /jwks: %v", err)
	}
	var set jwkSet
	err = json.NewDecoder(resp.Body).Decode(&set)
	resp.Body.Close()
	if err != nil || len(set.Keys) != 1 {
		t.Fatalf("GET /jwks: %v, %+v", err, set)
	}
	resp, err = client.PostForm("http://"+addr+"/token", map[string][]string{
		"grant_type": {"client_credentials"}, "client_id": {testClientID}, "client_secret": {testSecret},
	})
	if err != nil {
		t.Fatalf("POST /token: %v", err)
	}
	var tok tokenResponse
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /token: status %d, %v", resp.StatusCode, err)
	}
	verifyJWT(t, tok.AccessToken, set)
}

// TestRunServesUntilCancelled: run publishes its address, serves, and
// returns 0 when its context ends; the log never shows the secret.
func TestRunServesUntilCancelled(t *testing.T) {
	dir := t.TempDir()
	args, addrFile := cliArgs(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logged := newLogSink()
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, logged) }()
	// The addr file is written before this line is logged.
	logged.await(t, "listening on", 10*time.Second)
	checkServing(t, addrFile)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("run returned %d, want 0", code)
		}
	case <-time.After(shutdownTimeout + 5*time.Second):
		t.Fatal("run did not return after its context was cancelled")
	}
	out := logged.String()
	if !strings.Contains(out, `stopped: {TokensIssued:1 Refused:0 JWKSServed:1}`) {
		t.Errorf("log lacks the final stats line:\n%s", out)
	}
	if strings.Contains(out, testSecret) {
		t.Errorf("the log shows the secret:\n%s", out)
	}
	// Only the address file is left in dir, no temporary file.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "client-secret oidc.addr" {
		t.Errorf("dir holds %v, want client-secret and oidc.addr", names)
	}
}

// TestRunUsageErrors: a bad command line exits 2 with a message naming the
// flag, before listening.
func TestRunUsageErrors(t *testing.T) {
	dir := t.TempDir()
	good, addrFile := cliArgs(t, dir)
	with := func(flag, value string) []string {
		out := append([]string(nil), good...)
		for i := range out {
			if out[i] == flag {
				out[i+1] = value
			}
		}
		return out
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no addr file", with("-addr-file", ""), "-addr-file"},
		{"no client id", with("-client-id", ""), "-client-id"},
		{"fractional lifetime", with("-lifetime", "1500ms"), "-lifetime"},
		{"missing secret file", with("-client-secret-file", filepath.Join(dir, "nope")), "nope"},
		{"unknown flag", slices.Concat(good, []string{"-port", "1"}), "-port"},
		{"extra argument", slices.Concat(good, []string{"extra"}), "extra"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := run(context.Background(), c.args, &out); code != 2 {
				t.Fatalf("exit %d, want 2; output:\n%s", code, out.String())
			}
			if !strings.Contains(out.String(), c.want) {
				t.Fatalf("output does not name %q:\n%s", c.want, out.String())
			}
		})
	}
	if _, err := os.Stat(addrFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an address file was written on a usage error: %v", err)
	}
}

// TestRunListenError: an address in use is a failure (exit 1).
func TestRunListenError(t *testing.T) {
	dir := t.TempDir()
	args, _ := cliArgs(t, dir)
	ti := newTestIssuer(t, nil) // holds a port
	args[1] = strings.TrimPrefix(ti.srv.URL, "http://")
	var out bytes.Buffer
	if code := run(context.Background(), args, &out); code != 1 {
		t.Fatalf("exit %d, want 1; output:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "address already in use") {
		t.Fatalf("output does not say the address is in use:\n%s", out.String())
	}
}

// TestMainExitsOnSIGTERM: the real program, as kafka.sh runs it in the
// background, stops with exit code 0 on SIGTERM and on SIGINT.
func TestMainExitsOnSIGTERM(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			args, addrFile := cliArgs(t, t.TempDir())
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), runMainEnv+"=1")
			logged := newLogSink()
			cmd.Stderr = logged
			if err := cmd.Start(); err != nil {
				t.Fatalf("starting the program: %v", err)
			}
			// exited is closed once Wait returned waitErr.
			exited := make(chan struct{})
			var waitErr error
			go func() {
				waitErr = cmd.Wait()
				close(exited)
			}()
			t.Cleanup(func() {
				select {
				case <-exited:
				default: // the test failed with the program running
					_ = cmd.Process.Kill()
					<-exited
				}
			})
			logged.await(t, "listening on", 20*time.Second)
			checkServing(t, addrFile)

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatalf("signalling: %v", err)
			}
			select {
			case <-exited:
				if waitErr != nil {
					t.Fatalf("exit after %s: %v, want code 0; log:\n%s", sig, waitErr, logged)
				}
			case <-time.After(shutdownTimeout + 10*time.Second):
				t.Fatalf("the program did not exit within %s of %s", shutdownTimeout+10*time.Second, sig)
			}
			tail := logged.String()
			if !strings.Contains(tail, "stopped:") {
				t.Fatalf("no \"stopped:\" line after %s:\n%s", sig, tail)
			}
		})
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "addr")
	for _, content := range []string{"127.0.0.1:1\n", "127.0.0.1:2\n"} {
		if err := writeFileAtomic(path, []byte(content)); err != nil {
			t.Fatalf("writeFileAtomic: %v", err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("dir holds %v (%v), want only addr", entries, err)
	}
	err = writeFileAtomic(filepath.Join(dir, "missing", "addr"), []byte("x"))
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("writing into a missing dir: %v, want a wrapped ErrNotExist", err)
	}
}
