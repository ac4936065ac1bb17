package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turbokafka/turbo/config"
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
		{"observed, exit on idle", map[string]string{EnvSocket: "/s", EnvIndex: "0", EnvNodes: "1", EnvObserve: "1", EnvExitOnIdle: "1"},
			Node{Nodes: 1, Socket: "/s", Observe: true, ExitOnIdle: true}, true, ""},
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

func lookupIn(env []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := "", false
		for _, kv := range env { // the last one wins, as in exec
			if k, val, _ := strings.Cut(kv, "="); k == name {
				v, ok = val, true
			}
		}
		return v, ok
	}
}

// TestNodeEnvironRoundTrips: what the supervisor writes into a node's
// environment is what the node reads, whatever the supervisor's own
// environment held under the node variables' names.
func TestNodeEnvironRoundTrips(t *testing.T) {
	base := []string{"PATH=/bin", EnvObserve + "=1", EnvExitOnIdle + "=1", EnvIndex + "=7"}
	for _, want := range []Node{
		{Index: 0, Nodes: 1, Socket: "/run/s"},
		{Index: 2, Nodes: 3, Socket: "/run/s", ExitOnIdle: true, Observe: true, AwaitStart: true},
	} {
		env := nodeEnviron(base, want)
		got, ok, err := NodeFromEnv(lookupIn(env))
		if err != nil || !ok || got != want {
			t.Errorf("NodeFromEnv(nodeEnviron(%+v)) = %+v, %v, %v", want, got, ok, err)
		}
		if v, _ := lookupIn(env)("PATH"); v != "/bin" {
			t.Errorf("PATH = %q, want the base environment's", v)
		}
	}
}

// TestNodeEnvironIsNoConfiguration: a node hands its whole environment to
// config.Load, which must accept every variable the supervisor set (they
// lie outside the configuration's namespace), and the names they had inside
// it are refused naming these.
func TestNodeEnvironIsNoConfiguration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(path, []byte("consumers:\n  - {name: a, topics: [t], handler: {type: noop}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := nodeEnviron(nil, Node{Index: 1, Nodes: 2, Socket: "/s", ExitOnIdle: true, Observe: true, AwaitStart: true})
	if _, err := config.Load(path, env); err != nil {
		t.Fatalf("config.Load(a node's environment %q): %v", env, err)
	}
	for old, now := range map[string]string{
		"TURBO_SWARM_SOCKET": EnvSocket, "TURBO_SWARM_NODE_INDEX": EnvIndex, "TURBO_SWARM_NODE_COUNT": EnvNodes,
		"TURBO_SWARM_EXIT_ON_IDLE": EnvExitOnIdle, "TURBO_SWARM_OBSERVE": EnvObserve,
	} {
		if _, err := config.Load(path, []string{old + "=1"}); err == nil || !strings.Contains(err.Error(), now) {
			t.Errorf("config.Load with %s: %v, want an error naming %s", old, err, now)
		}
	}
}
