package sdnotify

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turbokafka/turbo/supervisor/sdnotify/sdnotifytest"
)

// listen is a fake systemd on name.
func listen(t *testing.T, name string) (string, <-chan string) {
	t.Helper()
	return name, sdnotifytest.Listen(t, name)
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// await returns the first message containing want, failing after 5 s.
func await(t *testing.T, msgs <-chan string, want string) string {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m := <-msgs:
			if slices.Contains(strings.Split(m, "\n"), want) {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q from the notifier within 5 s", want)
		}
	}
}

// TestRunReportsToSystemd: STATUS at every tick, READY=1 once when ready,
// WATCHDOG=1 while live and not when the service is not, STOPPING=1 at the
// end.
func TestRunReportsToSystemd(t *testing.T) {
	path, msgs := listen(t, filepath.Join(t.TempDir(), "notify"))
	n, err := FromEnv(env(map[string]string{SocketEnv: path, WatchdogEnv: "100000", WatchdogPIDEnv: "42"}), 42)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Watchdog() != 50*time.Millisecond {
		t.Fatalf("Watchdog() = %s, want half of 100ms", n.Watchdog())
	}
	var ready, dead atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Run(ctx, time.Second, Service{
			Ready:  ready.Load,
			Live:   func() error { return map[bool]error{true: errors.New("a handler hung")}[dead.Load()] },
			Status: func() string { return "2 consumers, 10 processed" },
		}, nil)
	}()
	if m := await(t, msgs, "WATCHDOG=1"); strings.Contains(m, "READY=1") || !strings.Contains(m, "STATUS=2 consumers, 10 processed") {
		t.Fatalf("first ping %q: want a status and no READY yet", m)
	}
	ready.Store(true)
	await(t, msgs, "READY=1")
	if m := await(t, msgs, "WATCHDOG=1"); strings.Contains(m, "READY=1") {
		t.Fatalf("READY=1 sent again: %q", m)
	}
	dead.Store(true)
	m := await(t, msgs, "STATUS=not live: a handler hung")
	if strings.Contains(m, "WATCHDOG=1") {
		t.Fatalf("%q: a ping while not live", m)
	}
	cancel()
	<-done
	await(t, msgs, "STOPPING=1")
}

// TestFromEnv: no socket, no notifier; an abstract socket; a watchdog for
// another process is not ours; bad values are errors naming the variable.
func TestFromEnv(t *testing.T) {
	if n, err := FromEnv(env(nil), 1); n != nil || err != nil {
		t.Fatalf("without %s: %v, %v; want nothing", SocketEnv, n, err)
	}
	name := "@turbo-test-" + filepath.Base(t.TempDir())
	_, msgs := listen(t, "\x00"+name[1:])
	n, err := FromEnv(env(map[string]string{SocketEnv: name, WatchdogEnv: "1000000", WatchdogPIDEnv: "7"}), 8)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Watchdog() != 0 {
		t.Fatalf("a watchdog for pid 7 taken by pid 8")
	}
	if err := n.Send("READY=1"); err != nil {
		t.Fatal(err)
	}
	await(t, msgs, "READY=1")
	for _, bad := range []map[string]string{{SocketEnv: "relative/path"}, {SocketEnv: name, WatchdogEnv: "soon"}} {
		if _, err := FromEnv(env(bad), 1); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
	var none *Notifier
	if none.Send("READY=1") != nil || none.Watchdog() != 0 {
		t.Fatal("a nil Notifier must do nothing")
	}
}

// TestStripEnv: children do not inherit the right to speak for the service.
func TestStripEnv(t *testing.T) {
	got := StripEnv([]string{"PATH=/bin", SocketEnv + "=/run/x", WatchdogEnv + "=1", WatchdogPIDEnv + "=2", "NOTIFY_SOCKETS=keep"})
	if !slices.Equal(got, []string{"PATH=/bin", "NOTIFY_SOCKETS=keep"}) {
		t.Fatalf("StripEnv = %v", got)
	}
}
