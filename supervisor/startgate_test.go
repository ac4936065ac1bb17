package supervisor

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestAwaitStart(t *testing.T) {
	if !(Node{}).AwaitStart(nil, time.Hour) {
		t.Fatal("a node without a gate (a restart) waited")
	}
	gate := filepath.Join(t.TempDir(), "start")
	n := Node{StartGate: gate}
	if n.AwaitStart(nil, 20*time.Millisecond) {
		t.Fatal("the gate opened without its file")
	}
	done := make(chan struct{})
	close(done)
	if n.AwaitStart(done, time.Hour) {
		t.Fatal("a stopped node's wait said the gate opened")
	}
	opened := make(chan bool)
	go func() { opened <- n.AwaitStart(nil, time.Minute) }()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-opened:
		if !ok {
			t.Fatal("the wait ended without the gate")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not see the gate's file within 10 s")
	}
}

func TestNodeFromEnvReadsTheGate(t *testing.T) {
	env := map[string]string{EnvSocket: "/s", EnvIndex: "1", EnvNodes: "3", EnvStartGate: "/g/start"}
	n, ok, err := NodeFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil || !ok || n.StartGate != "/g/start" || n.Index != 1 || n.Nodes != 3 {
		t.Fatalf("NodeFromEnv = %+v, %v, %v", n, ok, err)
	}
}
