package supervisor

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/supervisor/web"
	"github.com/turbokafka/turbo/test/testkit"
)

// TestCommandsReachTheNodeOverTheHealthSocket: a command routed by the
// supervisor's router travels the health socket to a node's Link, which
// carries it out on a goroutine of its own while reports go on, and its
// answer comes back named after the node; a node taking no commands says
// so; commands beyond the node's bound are answered busy.
func TestCommandsReachTheNodeOverTheHealthSocket(t *testing.T) {
	events := make(chan event, 64)
	quit := make(chan struct{})
	h, err := listenHealth(zerolog.Nop(), events, quit, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(quit); h.close() })
	go func() { // the control loop's part: drain the events
		for {
			select {
			case <-events:
			case <-quit:
				return
			}
		}
	}()
	h.admit(os.Getpid(), 3)
	var got atomic.Value
	release := make(chan struct{})
	n := Node{Index: 3, Nodes: 4, Socket: h.path}
	link, err := n.Join(NodeOptions{Version: "test", Interval: 10 * time.Millisecond, Report: func() *swarmpb.Report { return &swarmpb.Report{} }, Log: zerolog.Nop(),
		Command: func(b []byte) (swarmpb.CommandOutcome, string) {
			got.Store(string(b))
			if strings.Contains(string(b), `"slow"`) {
				<-release
			}
			return swarmpb.CommandOutcome_COMMAND_OUTCOME_DONE, "partition t/1 of consumer \"orders\" paused"
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Close)
	testkit.Eventually(t, 10*time.Second, "the node connected to the health socket", func() bool { return len(h.connected()) == 1 })

	r := nodeRouter{h}
	p := int32(1)
	res, err := r.Do(web.Command{Consumer: "orders", Action: web.ActionPause, Args: web.Args{Topic: "t", Partition: &p}})
	if err != nil || res != `node 3: partition t/1 of consumer "orders" paused` {
		t.Fatalf("Do = %q, %v", res, err)
	}
	if s, _ := got.Load().(string); s != `{"consumer":"orders","action":"pause","topic":"t","partition":1}` {
		t.Fatalf("the node got %s", s)
	}

	// maxNodeCommands slow commands fill the node; the next is busy.
	done := make(chan error, maxNodeCommands)
	for range maxNodeCommands {
		go func() {
			_, err := r.Do(web.Command{Consumer: "slow", Action: web.ActionResume})
			done <- err
		}()
	}
	testkit.Eventually(t, 10*time.Second, "the node to be busy with the slow commands", func() bool { return len(link.commands) == maxNodeCommands })
	if _, err := r.Do(web.Command{Consumer: "orders", Action: web.ActionResume}); !errors.Is(err, web.ErrBusy) {
		t.Fatalf("a command beyond the node's bound: %v, want busy", err)
	}
	close(release)
	for range maxNodeCommands {
		if err := <-done; err != nil {
			t.Fatalf("a slow command: %v", err)
		}
	}
}
