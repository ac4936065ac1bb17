package supervisor

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

type fakeSource struct {
	healthy bool
	nodes   []NodeStatus
}

func (f fakeSource) Healthy() bool        { return f.healthy }
func (f fakeSource) Status() []NodeStatus { return f.nodes }

func TestLivenessEndpoints(t *testing.T) {
	nodes := []NodeStatus{{Index: 0, PID: 42, State: "running", StatusName: "STATUS_OK", Processed: 7, Lag: 3}}
	for _, healthy := range []bool{true, false} {
		srv := httptest.NewServer(livenessHandler(fakeSource{healthy: healthy, nodes: nodes}))
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusOK
		if !healthy {
			want = http.StatusServiceUnavailable
		}
		if resp.StatusCode != want {
			t.Errorf("healthy %v: /healthz %d, want %d", healthy, resp.StatusCode, want)
		}
		resp, err = http.Get(srv.URL + "/status")
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Healthy bool         `json:"healthy"`
			Nodes   []NodeStatus `json:"nodes"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if body.Healthy != healthy || len(body.Nodes) != 1 || body.Nodes[0].PID != 42 || body.Nodes[0].Processed != 7 {
			t.Errorf("/status = %+v", body)
		}
		if r, _ := http.Post(srv.URL+"/healthz", "text/plain", nil); r != nil && r.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /healthz = %d, want 405", r.StatusCode)
		}
		srv.Close()
	}
}
