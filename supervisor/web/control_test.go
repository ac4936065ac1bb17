package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

type fakeControl struct{ calls []string }

func (f *fakeControl) Do(cmd Command) (string, error) {
	switch {
	case cmd.Consumer == "ghost":
		return "", ErrNoConsumer
	case cmd.Concurrency != nil && *cmd.Concurrency > 100:
		return "", fmt.Errorf("%w: concurrency must be 1 to 100", ErrBadCommand)
	case cmd.Offset != nil && *cmd.Offset == 99:
		return "", fmt.Errorf("%w: t/0@99 is not in flight here", ErrNotHere)
	case cmd.Offset != nil && *cmd.Offset == 98:
		return "", fmt.Errorf("%w: a seek is under way", ErrBusy)
	}
	b, _ := json.Marshal(cmd)
	f.calls = append(f.calls, string(b))
	return cmd.Action + " done", nil
}

// request is one control request of the tests.
type request struct {
	method, path, remote string
	body, contentType    string
	header               map[string]string
}

func (r request) serve(t *testing.T, c *Control) (*httptest.ResponseRecorder, Answer) {
	t.Helper()
	method := r.method
	if method == "" {
		method = "POST"
	}
	req := httptest.NewRequest(method, r.path, strings.NewReader(r.body))
	req.RemoteAddr = r.remote
	if req.RemoteAddr == "" {
		req.RemoteAddr = "127.0.0.1:5000"
	}
	if r.contentType != "-" {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	base := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	WithControl(base, c).ServeHTTP(rec, req)
	var a Answer
	if rec.Code != http.StatusNotFound || strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
			t.Fatalf("%s %s: the answer is not JSON: %q", method, r.path, rec.Body)
		}
	}
	return rec, a
}

// TestControlRoutes: from loopback without a token, commands with a JSON
// content type are carried out with their arguments; everything else is
// refused with a status and a reason that says why, and the controller is
// not called.
func TestControlRoutes(t *testing.T) {
	for _, tt := range []struct {
		name       string
		off        bool
		req        request
		wantCode   int
		wantReason string
		wantCall   string
	}{
		{"pause", false, request{path: "/consumers/orders/pause"}, 200, "pause done", `{"consumer":"orders","action":"pause"}`},
		{"pause a partition", false, request{path: "/consumers/orders/pause", body: `{"topic":"t","partition":3}`}, 200, "pause done",
			`{"consumer":"orders","action":"pause","topic":"t","partition":3}`},
		{"resume a topic over IPv6 loopback", false, request{path: "/consumers/orders/resume", remote: "[::1]:5000", body: `{"topic":"t"}`}, 200, "resume done",
			`{"consumer":"orders","action":"resume","topic":"t"}`},
		{"retune", false, request{path: "/consumers/orders/retune", body: `{"concurrency":4,"rate":50.5,"burst":5}`}, 200, "retune done",
			`{"consumer":"orders","action":"retune","concurrency":4,"rate":50.5,"burst":5}`},
		{"skip", false, request{path: "/consumers/orders/skip", body: `{"topic":"t","partition":0,"offset":7}`}, 200, "skip done",
			`{"consumer":"orders","action":"skip","topic":"t","partition":0,"offset":7}`},
		{"seek to an offset", false, request{path: "/consumers/orders/seek", body: `{"topic":"t","partition":2,"offset":40}`}, 200, "seek done",
			`{"consumer":"orders","action":"seek","topic":"t","partition":2,"offset":40}`},
		{"seek a topic to a time", false, request{path: "/consumers/orders/seek", body: `{"topic":"t","time":"2026-11-28T19:00:00Z"}`}, 200, "seek done",
			`{"consumer":"orders","action":"seek","topic":"t","time":"2026-11-28T19:00:00Z"}`},
		{"seek with both", false, request{path: "/consumers/orders/seek", body: `{"topic":"t","offset":4,"time":"2026-11-28T19:00:00Z"}`}, 400, "an offset or a time", ""},
		{"seek with neither", false, request{path: "/consumers/orders/seek", body: `{"topic":"t","partition":0}`}, 400, "an offset or a time", ""},
		{"seek without a topic", false, request{path: "/consumers/orders/seek", body: `{"offset":4}`}, 400, "takes a topic", ""},
		{"seek below 0", false, request{path: "/consumers/orders/seek", body: `{"topic":"t","offset":-2}`}, 400, "below 0", ""},
		{"seek to a time that is not one", false, request{path: "/consumers/orders/seek", body: `{"topic":"t","time":"yesterday"}`}, 400, "not a command's JSON object", ""},
		{"seek while busy", false, request{path: "/consumers/orders/seek", body: `{"topic":"t","offset":98}`}, 503, "a seek is under way", ""},
		{"skip what is not here", false, request{path: "/consumers/orders/skip", body: `{"topic":"t","partition":0,"offset":99}`}, 409, "not in flight here", ""},
		{"skip without an offset", false, request{path: "/consumers/orders/skip", body: `{"topic":"t","partition":0}`}, 400, "a topic, a partition and an offset", ""},
		{"pause with an offset", false, request{path: "/consumers/orders/pause", body: `{"topic":"t","partition":0,"offset":7}`}, 400, "takes no offset", ""},
		{"same origin", false, request{path: "/consumers/orders/pause", header: map[string]string{"Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"}}, 200, "pause done",
			`{"consumer":"orders","action":"pause"}`},
		{"control off", true, request{path: "/consumers/orders/pause"}, 403, "control is off", ""},
		{"from another host", false, request{path: "/consumers/orders/pause", remote: "192.0.2.7:5000"}, 403, "loopback interface only", ""},
		{"cross-origin", false, request{path: "/consumers/orders/pause", header: map[string]string{"Origin": "http://evil.example"}}, 403, "another origin", ""},
		{"cross-site fetch", false, request{path: "/consumers/orders/pause", header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403, "another origin", ""},
		{"no content type", false, request{path: "/consumers/orders/pause", contentType: "-"}, 415, "application/json", ""},
		{"a form", false, request{path: "/consumers/orders/pause", contentType: "application/x-www-form-urlencoded", body: "topic=t"}, 415, "application/json", ""},
		{"text/plain", false, request{path: "/consumers/orders/pause", contentType: "text/plain", body: `{}`}, 415, "application/json", ""},
		{"unknown consumer", false, request{path: "/consumers/ghost/pause"}, 404, `no consumer \"ghost\"`, ""},
		{"unknown action", false, request{path: "/consumers/orders/stop"}, 404, `no action \"stop\"`, ""},
		{"unknown argument", false, request{path: "/consumers/orders/pause", body: `{"topik":"t"}`}, 400, "not a command's JSON object", ""},
		{"two objects", false, request{path: "/consumers/orders/pause", body: `{} {}`}, 400, "more than one", ""},
		{"a body too large", false, request{path: "/consumers/orders/pause", body: `{"topic":"` + strings.Repeat("t", 5000) + `"}`}, 400, "at most 4096 bytes", ""},
		{"partition without topic", false, request{path: "/consumers/orders/pause", body: `{"partition":1}`}, 400, "needs its topic", ""},
		{"pause with concurrency", false, request{path: "/consumers/orders/pause", body: `{"concurrency":1}`}, 400, "not concurrency", ""},
		{"retune with nothing", false, request{path: "/consumers/orders/retune"}, 400, "needs concurrency, rate, or both", ""},
		{"retune a topic", false, request{path: "/consumers/orders/retune", body: `{"topic":"t","concurrency":2}`}, 400, "whole consumer", ""},
		{"burst without rate", false, request{path: "/consumers/orders/retune", body: `{"concurrency":2,"burst":3}`}, 400, "burst needs its rate", ""},
		{"refused by the consumer", false, request{path: "/consumers/orders/retune", body: `{"concurrency":1000}`}, 400, "concurrency must be 1 to 100", ""},
		{"GET is not control", false, request{method: "GET", path: "/consumers/orders/pause"}, 404, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeControl{}
			var ctl Controller = fake
			if tt.off {
				ctl = nil
			}
			rec, a := tt.req.serve(t, NewControl(ctl, "", zerolog.Nop()))
			if rec.Code != tt.wantCode {
				t.Fatalf("%d, want %d (%s)", rec.Code, tt.wantCode, rec.Body)
			}
			if tt.wantReason != "" && (!strings.Contains(rec.Body.String(), tt.wantReason) || a.OK != (tt.wantCode == 200)) {
				t.Fatalf("body %s, want ok=%v and a reason with %q", rec.Body, tt.wantCode == 200, tt.wantReason)
			}
			if got := strings.Join(fake.calls, ","); got != tt.wantCall {
				t.Fatalf("controller calls %s, want %s", got, tt.wantCall)
			}
		})
	}
}

// TestControlToken: with a token file, a command needs its token from any
// client: none or a wrong one is 403, the right one from another host is
// let in; a token rotated in the file works at once and the old one no
// longer does; a file gone refuses everything. Neither token appears in an
// answer, the log or Status.
func TestControlToken(t *testing.T) {
	const old, rotated = "first-token-0123456789abcdef", "second-token-fedcba9876543210"
	path := filepath.Join(t.TempDir(), "token")
	write := func(token string) {
		t.Helper()
		// Through a rename, as a secret mount rotates; the time is moved
		// on so that the change shows whatever the clock's resolution.
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(old)
	var logs bytes.Buffer
	fake := &fakeControl{}
	c := NewControl(fake, path, zerolog.New(&logs))
	var answers strings.Builder
	try := func(token, remote string, wantCode int, wantReason string) {
		t.Helper()
		req := request{path: "/consumers/orders/pause", remote: remote}
		if token != "" {
			req.header = map[string]string{"Authorization": "Bearer " + token}
		}
		rec, a := req.serve(t, c)
		answers.WriteString(rec.Body.String())
		if rec.Code != wantCode || !strings.Contains(a.Reason, wantReason) {
			t.Fatalf("token %q from %s: %d %s, want %d and a reason with %q", token, remote, rec.Code, rec.Body, wantCode, wantReason)
		}
	}
	try("", "192.0.2.7:5000", 403, "needs a bearer token")
	try("wrong-token-0123456789abcdef", "192.0.2.7:5000", 403, "not control's")
	try(old[:len(old)-1], "127.0.0.1:5000", 403, "not control's")
	try(old, "192.0.2.7:5000", 200, "pause done")
	write(rotated)
	try(old, "192.0.2.7:5000", 403, "not control's")
	try(rotated, "192.0.2.7:5000", 200, "pause done")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	try(rotated, "192.0.2.7:5000", 403, "token file cannot be used")
	if len(fake.calls) != 2 {
		t.Fatalf("%d commands carried out, want 2", len(fake.calls))
	}
	recent := c.Recent()
	if len(recent) != 2 || recent[0].Auth != "token" || recent[0].From != "192.0.2.7:5000" || !recent[1].OK {
		t.Fatalf("Recent() = %+v", recent)
	}
	status, _ := json.Marshal(recent)
	for _, secret := range []string{old, rotated} {
		for what, text := range map[string]string{"an answer": answers.String(), "the log": logs.String(), "Status.Commands": string(status)} {
			if strings.Contains(text, secret) {
				t.Fatalf("%s shows a token: %s", what, text)
			}
		}
	}
	if !strings.Contains(logs.String(), `"message":"control command"`) || !strings.Contains(logs.String(), `"message":"control request refused"`) {
		t.Fatalf("no audit line or refusal line in the log:\n%s", logs.String())
	}
}

// TestControlRecentIsBounded: Status shows the last 20 commands, oldest
// first, and each is one audit line.
func TestControlRecentIsBounded(t *testing.T) {
	var logs bytes.Buffer
	c := NewControl(&fakeControl{}, "", zerolog.New(&logs))
	for i := range 25 {
		request{path: "/consumers/orders/retune", body: fmt.Sprintf(`{"concurrency":%d}`, i+1)}.serve(t, c)
	}
	recent := c.Recent()
	if len(recent) != maxRecent || *recent[0].Command.Concurrency != 6 || *recent[maxRecent-1].Command.Concurrency != 25 {
		t.Fatalf("%d recent, first %+v", len(recent), recent[0])
	}
	if n := strings.Count(logs.String(), `"message":"control command"`); n != 25 {
		t.Fatalf("%d audit lines for 25 commands", n)
	}
	if time.Since(recent[0].At) > time.Minute {
		t.Fatalf("a command's time is %s", recent[0].At)
	}
}
