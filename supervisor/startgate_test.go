package supervisor

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/proto/swarmpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// supervisorEnd is the supervisor's side of one node's connection, played
// by the test: it listens, accepts the node and reads its hello.
type supervisorEnd struct {
	ln   net.Listener
	conn net.Conn
	fr   *frameReader
}

func listenAsSupervisor(t *testing.T) (*supervisorEnd, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "turbo-gate-") // short: a socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := &supervisorEnd{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		if s.conn != nil {
			s.conn.Close()
		}
	})
	return s, path
}

// accept takes the node's connection and its hello.
func (s *supervisorEnd) accept(t *testing.T) {
	t.Helper()
	c, err := s.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	s.conn, s.fr = c, newFrameReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := s.fr.next()
	if err != nil || f.GetHello() == nil {
		t.Fatalf("the node's first frame: %v, %v; want a hello", f, err)
	}
}

// join makes a node of n that reports to s every hour (only its hello and
// first report matter here), and accepts it.
func join(t *testing.T, s *supervisorEnd, n Node) *Link {
	t.Helper()
	l, err := n.Join(NodeOptions{Version: "test", Interval: time.Hour, Report: func() *swarmpb.Report { return &swarmpb.Report{} }, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	s.accept(t)
	return l
}

// awaitStart runs l.AwaitStart(done, max) and returns its result, failing
// the test if it has not returned within limit.
func awaitStart(t *testing.T, l *Link, done <-chan struct{}, max, limit time.Duration) (bool, time.Duration) {
	t.Helper()
	got := make(chan bool, 1)
	began := time.Now()
	go func() { got <- l.AwaitStart(done, max) }()
	select {
	case ok := <-got:
		return ok, time.Since(began)
	case <-time.After(limit):
		t.Fatalf("AwaitStart(max %s) had not returned after %s", max, limit)
		return false, 0
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// A node the supervisor did not ask to wait (a restart) starts at once.
func TestAwaitStartReturnsAtOnceForANodeNotAsked(t *testing.T) {
	s, path := listenAsSupervisor(t)
	l := join(t, s, Node{Nodes: 2, Socket: path})
	if ok, _ := awaitStart(t, l, nil, time.Hour, 10*time.Second); !ok {
		t.Fatal("a node not asked to wait did not start")
	}
}

// A node asked to wait starts on the supervisor's Start frame, however
// long its bound.
func TestAwaitStartOpensOnTheStartFrame(t *testing.T) {
	s, path := listenAsSupervisor(t)
	l := join(t, s, Node{Nodes: 2, Socket: path, AwaitStart: true})
	if ok, _ := awaitStart(t, l, nil, 20*time.Millisecond, 10*time.Second); ok {
		t.Fatal("the wait ended as started without a Start frame")
	}
	if err := writeFrame(s.conn, &swarmpb.Frame{Body: &swarmpb.Frame_Start{Start: &swarmpb.Start{}}}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := awaitStart(t, l, nil, time.Hour, 10*time.Second); !ok {
		t.Fatal("the wait ended without a start after the Start frame")
	}
	// Every later wait (another consumer's) passes at once.
	if ok, _ := awaitStart(t, l, closedChan(), time.Hour, 10*time.Second); !ok {
		t.Fatal("a second wait after the Start frame did not pass")
	}
	select {
	case <-l.Lost():
		t.Fatal("the link counts the supervisor as gone after its Start frame")
	default:
	}
}

// The wait is bounded, and ends when the node stops or its supervisor goes.
func TestAwaitStartEnds(t *testing.T) {
	s, path := listenAsSupervisor(t)
	l := join(t, s, Node{Nodes: 2, Socket: path, AwaitStart: true})
	if ok, took := awaitStart(t, l, nil, 50*time.Millisecond, 10*time.Second); ok || took < 50*time.Millisecond {
		t.Fatalf("AwaitStart(max 50ms) without a Start frame = %v after %s, want false after 50ms", ok, took)
	}
	if ok, _ := awaitStart(t, l, closedChan(), time.Hour, 10*time.Second); ok {
		t.Fatal("a stopped node's wait said it started")
	}
	s.conn.Close()
	if ok, _ := awaitStart(t, l, nil, time.Hour, 10*time.Second); ok {
		t.Fatal("the wait said started when the supervisor was gone")
	}
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed within 10 s of the supervisor closing the connection")
	}
}

// The node reads the supervisor's frames with the same bounded reader as
// the supervisor reads its nodes': a frame announcing more than maxFrame
// is not read (nothing is allocated for it), and the node leaves the swarm.
func TestNodeRefusesAMalformedFrame(t *testing.T) {
	s, path := listenAsSupervisor(t)
	l := join(t, s, Node{Nodes: 2, Socket: path, AwaitStart: true})
	if _, err := s.conn.Write(protowire.AppendVarint(nil, maxFrame+1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("a frame over maxFrame from the supervisor did not end the link within 10 s")
	}
	if ok, _ := awaitStart(t, l, nil, time.Hour, 10*time.Second); ok {
		t.Fatal("the wait said started after a malformed frame")
	}
}

// Close stops the link's goroutines (its reader among them) and waits for
// them; a second Close is fine.
func TestLinkCloseStopsItsGoroutines(t *testing.T) {
	s, path := listenAsSupervisor(t)
	before := runtime.NumGoroutine()
	l := join(t, s, Node{Nodes: 2, Socket: path, AwaitStart: true})
	l.Close()
	l.Close()
	select {
	case <-l.Lost():
		t.Fatal("Close made the link count the supervisor as gone")
	default:
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines 5 s after Close, %d before Join", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
}
