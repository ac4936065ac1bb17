package testkit

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// Each broker gets a port of its own, which it reports and accepts
// connections on.
func TestDevBindsAPortOfItsOwnAndSaysWhich(t *testing.T) {
	seen := map[string]bool{}
	for i := range 3 {
		a := Dev(t, "--partitions", "1")
		if seen[a] {
			t.Fatalf("two brokers said they listen on %s", a)
		}
		seen[a] = true
		if !Reachable(a) {
			t.Errorf("broker %d said it listens on %s, and nothing accepts connections there", i, a)
		}
	}
}

// The bound address is read from turbo's JSON line, however the output is
// split into writes, and everything is passed on unchanged.
func TestWatchHTTPAddrReadsTheLoggedLine(t *testing.T) {
	out := `{"level":"info","message":"starting"}
{"level":"info","addr":"127.0.0.1:9","message":"not it: http listening comes first in the real one"}
{"level":"info","addr":"127.0.0.1:41234","max_connections":64,"message":"http listening: /metrics /healthz /readyz /status, console on /"}
{"level":"info","addr":"127.0.0.1:5","message":"http listening: a second one does not count"}
`
	for _, size := range []int{1, 7, len(out)} {
		var next bytes.Buffer
		w, said := WatchHTTPAddr(t, &next)
		for s := out; s != ""; {
			n := min(size, len(s))
			if _, err := w.Write([]byte(s[:n])); err != nil {
				t.Fatalf("write: %v", err)
			}
			s = s[n:]
		}
		select {
		case a := <-said:
			if a != "127.0.0.1:41234" {
				t.Errorf("writes of %d bytes: address %q, want 127.0.0.1:41234", size, a)
			}
		default:
			t.Errorf("writes of %d bytes: no address found", size)
		}
		if next.String() != out {
			t.Errorf("writes of %d bytes: passed on %q, want the output unchanged", size, next.String())
		}
	}
}

func TestHTTPAddrIgnoresOtherLines(t *testing.T) {
	for _, line := range []string{
		"http listening on 127.0.0.1:1",   // not JSON
		`{"message":"http listening: x"}`, // no addr
		`{"message":"shutting down","addr":"127.0.0.1:1","note":"http listening"}`,
		strings.Repeat("x", 100),
	} {
		if a, ok := httpAddr(line); ok {
			t.Errorf("httpAddr(%q) = %q: want no address", line, a)
		}
	}
	if a, ok := httpAddr(fmt.Sprintf(`{"addr":%q,"message":"http listening: /"}`, "[::1]:80")); !ok || a != "[::1]:80" {
		t.Errorf("httpAddr of a real line = %q, %v", a, ok)
	}
}

func TestMain(m *testing.M) { Main(m) }
