package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type fakeControl struct{ calls []string }

func (f *fakeControl) Pause(name string) error  { return f.do("pause " + name) }
func (f *fakeControl) Resume(name string) error { return f.do("resume " + name) }
func (f *fakeControl) do(call string) error {
	if strings.HasSuffix(call, " ghost") {
		return ErrNoConsumer
	}
	f.calls = append(f.calls, call)
	return nil
}

// TestControlRoutes: pause and resume by name from loopback; everything
// else refused with a status and a reason that says why, and the
// controller not called.
func TestControlRoutes(t *testing.T) {
	base := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	for _, tt := range []struct {
		name       string
		ctl        bool
		method     string
		path       string
		remote     string
		origin     string
		wantCode   int
		wantReason string
		wantCall   string
	}{
		{"pause", true, "POST", "/consumers/orders/pause", "127.0.0.1:5000", "", 200, `consumer \"orders\" paused`, "pause orders"},
		{"resume over IPv6 loopback", true, "POST", "/consumers/orders/resume", "[::1]:5000", "", 200, "resumed", "resume orders"},
		{"control off", false, "POST", "/consumers/orders/pause", "127.0.0.1:5000", "", 403, "control is off", ""},
		{"from another host", true, "POST", "/consumers/orders/pause", "192.0.2.7:5000", "", 403, "loopback interface only", ""},
		{"from a browser", true, "POST", "/consumers/orders/pause", "127.0.0.1:5000", "http://evil.example", 403, "Origin", ""},
		{"unknown consumer", true, "POST", "/consumers/ghost/pause", "127.0.0.1:5000", "", 404, `no consumer \"ghost\"`, ""},
		{"unknown action", true, "POST", "/consumers/orders/stop", "127.0.0.1:5000", "", 404, `no action \"stop\"`, ""},
		{"GET is not control", true, "GET", "/consumers/orders/pause", "127.0.0.1:5000", "", 404, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ctl Controller
			fake := &fakeControl{}
			if tt.ctl {
				ctl = fake
			}
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.RemoteAddr = tt.remote
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			rec := httptest.NewRecorder()
			WithControl(base, ctl).ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Fatalf("%s %s: %d, want %d (%s)", tt.method, tt.path, rec.Code, tt.wantCode, rec.Body)
			}
			if tt.wantReason != "" {
				var c Check
				if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil || !strings.Contains(rec.Body.String(), tt.wantReason) || c.OK != (tt.wantCode == 200) {
					t.Fatalf("body %s (%v), want ok=%v and a reason with %q", rec.Body, err, tt.wantCode == 200, tt.wantReason)
				}
			}
			if got := strings.Join(fake.calls, ","); got != tt.wantCall {
				t.Fatalf("controller calls %q, want %q", got, tt.wantCall)
			}
		})
	}
}
