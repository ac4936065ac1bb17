package supervisor

import (
	"strings"
	"testing"
)

// TestNodeFromEnv: a node knows its slot and the swarm's size (its share of
// a consumer-wide rate limit); a process no supervisor started is no node;
// a broken environment is an error naming the variable.
func TestNodeFromEnv(t *testing.T) {
	for _, tt := range []struct {
		name    string
		env     map[string]string
		want    Node
		ok      bool
		wantErr string
	}{
		{"no supervisor", map[string]string{}, Node{}, false, ""},
		{"node 1 of 3", map[string]string{EnvSocket: "/s", EnvIndex: "1", EnvNodes: "3"}, Node{Index: 1, Nodes: 3, Socket: "/s"}, true, ""},
		{"bad index", map[string]string{EnvSocket: "/s", EnvIndex: "x", EnvNodes: "3"}, Node{}, false, EnvIndex},
		{"no size", map[string]string{EnvSocket: "/s", EnvIndex: "0"}, Node{}, false, EnvNodes},
		{"size not above the index", map[string]string{EnvSocket: "/s", EnvIndex: "3", EnvNodes: "3"}, Node{}, false, EnvNodes},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, ok, err := NodeFromEnv(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if n != tt.want || ok != tt.ok {
				t.Fatalf("NodeFromEnv = %+v, %v; want %+v, %v", n, ok, tt.want, tt.ok)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want one naming %q", err, tt.wantErr)
			}
		})
	}
}
