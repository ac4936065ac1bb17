package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHTTPHeadersLoad: each source of a header's value, as a file gives it.
func TestHTTPHeadersLoad(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secret, []byte("s3cr3t-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(writeConfig(t, "app.yaml", oneConsumer([]string{
		"handler:",
		"  type: http",
		"  url: http://h/x",
		"  headers:",
		"    - {name: Authorization, value_file: " + secret + ", prefix: \"Bearer \"}",
		"    - {name: X-Team, value: orders}",
		"    - {name: x-api-key, value_env: API_KEY}",
	})), noEnv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := []HTTPHeader{
		{Name: "Authorization", ValueFile: secret, Prefix: "Bearer "},
		{Name: "X-Team", Value: "orders"},
		{Name: "x-api-key", ValueEnv: "API_KEY"},
	}
	eq(t, "headers", c.Consumers[0].Handler.Headers, want)
}

// TestHTTPHeadersRefused: a bad header is an error naming it, and never
// shows a value.
func TestHTTPHeadersRefused(t *testing.T) {
	dir := t.TempDir()
	empty, twoLines := filepath.Join(dir, "empty"), filepath.Join(dir, "two")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(twoLines, []byte("a-secret\nsecond-line"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		header  string
		wantKey string
		wantIn  string
	}{
		{"no value", "{name: X-A}", "headers[0]", "exactly one of value, value_env and value_file"},
		{"two values", "{name: X-A, value: a-secret, value_env: A}", "headers[0]", "exactly one"},
		{"not a name", "{name: \"X A\", value: a-secret}", "headers[0].name", `"X A"`},
		{"the handler's own", "{name: kafka-topic, value: a-secret}", "headers[0].name", "Kafka-Topic is set by the handler itself"},
		{"host", "{name: Host, value: a-secret}", "headers[0].name", "Host is set by the handler itself"},
		{"given twice", "{name: X-A, value: a-secret}, {name: x-a, value: b}", "headers[1].name", "X-A is given twice"},
		{"line break in the value", "{name: X-A, value: \"a-secret\\r\\nX-B: injected\"}", "headers[0].value", "without line breaks"},
		{"bad env name", "{name: X-A, value_env: \"1A\"}", "headers[0].value_env", `"1A"`},
		{"missing file", "{name: X-A, value_file: " + filepath.Join(dir, "nope") + "}", "headers[0].value_file", "nope"},
		{"empty file", "{name: X-A, value_file: " + empty + "}", "headers[0].value_file", "is empty"},
		{"two lines in the file", "{name: X-A, value_file: " + twoLines + "}", "headers[0].value_file", "one printable line"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, "app.yaml", oneConsumer([]string{
				"handler: {type: http, url: \"http://h/x\", headers: [" + tt.header + "]}",
			})), noEnv)
			checkInvalid(t, err, "consumers[0].handler."+tt.wantKey, tt.wantIn)
			if strings.Contains(err.Error(), "a-secret") {
				t.Fatalf("the error shows a header's value: %v", err)
			}
		})
	}
	var many []string
	for i := range MaxHTTPHeaders + 1 {
		many = append(many, "{name: X-H"+strings.Repeat("a", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26))+", value: v}")
	}
	_, err := Load(writeConfig(t, "app.yaml", oneConsumer([]string{
		"handler: {type: http, url: \"http://h/x\", headers: [" + strings.Join(many, ", ") + "]}",
	})), noEnv)
	checkInvalid(t, err, "consumers[0].handler.headers", "at most 64")
}

// TestUnixSocketURLs: unix:///socket:/path is a handler URL; a relative or
// too long socket path, or a request path without its /, is refused.
func TestUnixSocketURLs(t *testing.T) {
	for _, tt := range []struct {
		url, socket, path string
		ok                bool
	}{
		{"unix:///run/app.sock:/records", "/run/app.sock", "/records", true},
		{"unix:///run/app.sock", "/run/app.sock", "/", true},
		{"unix://run/app.sock:/records", "run/app.sock", "/records", false},
		{"unix:///run/app.sock:records", "/run/app.sock", "records", false},
		{"unix:///" + strings.Repeat("s", 107) + ":/x", "/" + strings.Repeat("s", 107), "/x", false},
	} {
		socket, path, isUnix := UnixURL(tt.url)
		if !isUnix || socket != tt.socket || path != tt.path {
			t.Errorf("UnixURL(%q) = %q, %q, %v; want %q, %q", tt.url, socket, path, isUnix, tt.socket, tt.path)
		}
		_, err := Load(writeConfig(t, "app.yaml", oneConsumer([]string{"handler: {type: http, url: \"" + tt.url + "\"}"})), noEnv)
		if tt.ok && err != nil {
			t.Errorf("%s: %v", tt.url, err)
		}
		if !tt.ok {
			checkInvalid(t, err, "consumers[0].handler.url", "unix://<absolute socket path")
		}
	}
	if _, _, ok := UnixURL("http://h/x"); ok {
		t.Error("UnixURL took an http URL")
	}
}
