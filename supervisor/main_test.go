package supervisor

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/proto/swarmpb"
)

// envFakeNode makes the test binary a fake node (TestMain): a real process
// speaking the real protocol through Join, behaving as the mode says.
const envFakeNode = "TURBO_TEST_FAKE_NODE"

// envHelperSupervisor makes the test binary a supervisor process of its own
// (TestMain), for tests that must act on the supervisor as a process:
// SIGSTOP it, lower its file limit. Its nodes are fake nodes (envFakeNode).
const envHelperSupervisor = "TURBO_TEST_HELPER_SUPERVISOR"

// helperSupervisor runs the helper supervisor (set where it exists: Linux).
var helperSupervisor func(mode string) int

func TestMain(m *testing.M) {
	if mode := os.Getenv(envFakeNode); mode != "" {
		os.Exit(fakeNode(mode))
	}
	if mode := os.Getenv(envHelperSupervisor); mode != "" && helperSupervisor != nil {
		os.Exit(helperSupervisor(mode))
	}
	os.Exit(m.Run())
}

// fakeNode modes:
//
//	ok       report OK until SIGTERM or the supervisor is gone, exit 0
//	exit     exit 1 at once, before joining
//	brief    join, then exit 0 after 50 ms
//	alloc    join, then hold 200 MiB of touched memory
//	garbage  say hello on a raw connection, send garbage, then join properly
//	slow     handle no signal for 5 s (a runtime still starting), then as ok
func fakeNode(mode string) int {
	n, ok, err := NodeFromEnv(os.LookupEnv)
	if err != nil || !ok {
		fmt.Fprintln(os.Stderr, "fake node without a supervisor:", err)
		return 3
	}
	if mode == "exit" {
		return 1
	}
	if mode == "slow" {
		time.Sleep(5 * time.Second)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if mode == "garbage" {
		c, err := net.Dial("unix", n.Socket)
		if err != nil {
			return 4
		}
		writeFrame(c, &swarmpb.Frame{Body: &swarmpb.Frame_Hello{Hello: &swarmpb.Hello{Index: uint32(n.Index), Pid: int32(os.Getpid())}}})
		c.Write([]byte{0x05, 0xff, 0xff, 0xff, 0xff, 0xff})
		var b [1]byte
		c.Read(b[:]) // the supervisor closes it
		c.Close()
	}
	var held atomic.Int64
	link, err := n.Join(NodeOptions{
		Version:  "test",
		Interval: 100 * time.Millisecond,
		Report:   func() *swarmpb.Report { return &swarmpb.Report{RssBytes: selfRSS(), Processed: held.Load()} },
		Log:      zerolog.Nop(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 5
	}
	defer link.Close()
	switch mode {
	case "brief":
		time.Sleep(50 * time.Millisecond)
		return 0
	case "alloc":
		hold := make([]byte, 200<<20)
		for i := 0; i < len(hold); i += 4096 {
			hold[i] = 1
		}
		held.Store(int64(len(hold)))
		defer runtime.KeepAlive(hold)
	}
	select {
	case <-term:
	case <-link.Lost():
	}
	return 0
}
