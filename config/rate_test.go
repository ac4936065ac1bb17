package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRateLoads: the rate block as a file gives it, defaults (no limit)
// when it is left out.
func TestRateLoads(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  Rate
	}{
		{"left out: no limit", nil, Rate{}},
		{"whole number", []string{"rate: {limit: 200}"}, Rate{Limit: 200}},
		{"fraction and burst", []string{"rate:", "  limit: 0.5", "  burst: 3"}, Rate{Limit: 0.5, Burst: 3}},
		{"lowest", []string{"rate: {limit: 0.01}"}, Rate{Limit: 0.01}},
		{"highest", []string{"rate: {limit: 10000000, burst: 100000}"}, Rate{Limit: MaxRateLimit, Burst: MaxRateBurst}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", oneConsumer(tt.lines)), noEnv)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := c.Consumers[0].Rate; got != tt.want {
				t.Fatalf("rate = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestRateRefused: every value out of bounds is an error naming its key and
// what was given.
func TestRateRefused(t *testing.T) {
	tests := []struct {
		name    string
		lines   []string
		wantKey string
		wantIn  []string
	}{
		{"negative", []string{"rate: {limit: -1}"}, "consumers[0].rate.limit", []string{"must be 0 (no limit) or between 0.01 and 10000000", "got -1"}},
		{"too slow", []string{"rate: {limit: 0.001}"}, "consumers[0].rate.limit", []string{"got 0.001"}},
		{"too fast", []string{"rate: {limit: 10000001}"}, "consumers[0].rate.limit", []string{"got 1.0000001e+07"}},
		{"infinite", []string{"rate: {limit: .inf}"}, "consumers[0].rate.limit", []string{"got +Inf"}},
		{"burst without a limit", []string{"rate: {burst: 5}"}, "consumers[0].rate.burst", []string{"needs consumers[0].rate.limit"}},
		{"negative burst", []string{"rate: {limit: 5, burst: -1}"}, "consumers[0].rate.burst", []string{"got -1"}},
		{"burst too large", []string{"rate: {limit: 5, burst: 100001}"}, "consumers[0].rate.burst", []string{"got 100001"}},
		{"not a number", []string{"rate: {limit: fast}"}, "consumers[0].rate.limit", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", oneConsumer(tt.lines)), noEnv)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", c.Consumers[0].Rate)
			}
			checkInvalid(t, err, tt.wantKey, tt.wantIn...)
		})
	}
	// In code, NaN passes no comparison and must still be refused.
	c := validConfig()
	c.Consumers[0].Rate.Limit = math.NaN()
	checkInvalid(t, c.Validate(), "consumers[0].rate.limit", "got NaN")
}

// TestRateBucket: the bucket a rate runs as, and a swarm node's share.
func TestRateBucket(t *testing.T) {
	for _, tt := range []struct {
		r           Rate
		nodes       int
		wantPerSec  float64
		wantBurst   int
		wantLimited bool
	}{
		{Rate{}, 1, 0, 0, false},
		{Rate{}, 4, 0, 0, false},
		{Rate{Limit: 200}, 1, 200, 20, true}, // a tenth of a second's worth
		{Rate{Limit: 5}, 1, 5, 1, true},      // at least 1
		{Rate{Limit: 200, Burst: 7}, 1, 200, 7, true},
		{Rate{Limit: 200}, 4, 50, 5, true}, // each node an equal share
		{Rate{Limit: 200, Burst: 7}, 4, 50, 1, true},
		{Rate{Limit: 0.01}, 3, 0.01 / 3, 1, true},
	} {
		perSec, burst, ok := tt.r.PerNode(tt.nodes).Bucket()
		if math.Abs(perSec-tt.wantPerSec) > 1e-12 || burst != tt.wantBurst || ok != tt.wantLimited {
			t.Errorf("%+v on %d nodes: %g/s burst %d limited %v, want %g/s burst %d limited %v",
				tt.r, tt.nodes, perSec, burst, ok, tt.wantPerSec, tt.wantBurst, tt.wantLimited)
		}
	}
}

// TestRateFromEnv: the environment sets a rate like any other key (its
// values are strings, parsed as numbers), and a bad one names the variable.
func TestRateFromEnv(t *testing.T) {
	path := writeConfig(t, "app.yaml", oneConsumer(nil))
	c, err := Load(path, []string{"TURBO_CONSUMERS_0_RATE_LIMIT=2.5", "TURBO_CONSUMERS_0_RATE_BURST=4"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := c.Consumers[0].Rate; got != (Rate{Limit: 2.5, Burst: 4}) {
		t.Fatalf("rate = %+v, want limit 2.5 burst 4", got)
	}
	_, err = Load(path, []string{"TURBO_CONSUMERS_0_RATE_LIMIT=lots"})
	checkInvalid(t, err, "consumers[0].rate.limit", "TURBO_CONSUMERS_0_RATE_LIMIT", `cannot parse "lots" as a number`)
}

// TestHTTPControl: http.control is off by default, loads with http.listen,
// and is refused without it (the routes would be served nowhere).
func TestHTTPControl(t *testing.T) {
	c, err := Load(writeConfig(t, "app.yaml", oneConsumer(nil)), noEnv)
	if err != nil || c.HTTP.Control {
		t.Fatalf("default: control %v, %v; want off", c.HTTP.Control, err)
	}
	c, err = Load(writeConfig(t, "app.yaml", oneConsumer(nil, "http: {listen: \"127.0.0.1:0\", control: true}")), noEnv)
	if err != nil || !c.HTTP.Control {
		t.Fatalf("with listen: control %v, %v; want on", c.HTTP.Control, err)
	}
	_, err = Load(writeConfig(t, "app.yaml", oneConsumer(nil, "http: {control: true}")), noEnv)
	checkInvalid(t, err, "http.control", "needs http.listen")
}

// TestHTTPControlToken: a listener other hosts can reach takes control only
// with a token file; the token file needs control, and one that is short,
// missing or not a regular file is refused with its path named and its
// content never shown.
func TestHTTPControlToken(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	if err := os.WriteFile(good, []byte("  s3cr3t-t0ken-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("tiny-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, listen := range []string{":9100", "0.0.0.0:9100", "192.0.2.1:9100", "[::]:9100"} {
		_, err := Load(writeConfig(t, "app.yaml", oneConsumer(nil, fmt.Sprintf("http: {listen: %q, control: true}", listen))), noEnv)
		checkInvalid(t, err, "http.control", "needs http.control_token_file")
		c, err := Load(writeConfig(t, "app.yaml", oneConsumer(nil, fmt.Sprintf("http: {listen: %q, control: true, control_token_file: %q}", listen, good))), noEnv)
		if err != nil || c.HTTP.ControlTokenFile != good {
			t.Fatalf("%s with a token file: %v", listen, err)
		}
	}
	for _, listen := range []string{"127.0.0.1:0", "localhost:9100", "[::1]:9100"} {
		if _, err := Load(writeConfig(t, "app.yaml", oneConsumer(nil, fmt.Sprintf("http: {listen: %q, control: true}", listen))), noEnv); err != nil {
			t.Fatalf("%s (loopback) without a token file: %v", listen, err)
		}
	}
	_, err := Load(writeConfig(t, "app.yaml", oneConsumer(nil, fmt.Sprintf("http: {listen: \"127.0.0.1:0\", control_token_file: %q}", good))), noEnv)
	checkInvalid(t, err, "http.control_token_file", "needs http.control")
	for path, want := range map[string]string{
		short:                        "shorter than 16 bytes",
		filepath.Join(dir, "absent"): "cannot read",
		fifo:                         "not a regular file",
	} {
		_, err := Load(writeConfig(t, "app.yaml", oneConsumer(nil, fmt.Sprintf("http: {listen: \"127.0.0.1:0\", control: true, control_token_file: %q}", path))), noEnv)
		checkInvalid(t, err, "http.control_token_file", want, path)
		if err != nil && strings.Contains(err.Error(), "tiny-secret") {
			t.Fatalf("the error shows the token: %v", err)
		}
	}
	b, err := ReadControlToken(good)
	if err != nil || string(b) != "s3cr3t-t0ken-0123456789abcdef" {
		t.Fatalf("ReadControlToken = %q, %v; want the token without its white space", b, err)
	}
}
