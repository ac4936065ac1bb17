package supervisor

import (
	"fmt"
	"math"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestHTTPConnCap(t *testing.T) {
	for _, c := range []struct {
		soft        uint64
		open, nodes int
		want        int
	}{
		{soft: 1 << 20, open: 16, nodes: 256, want: maxHTTPConns}, // Go raised the soft limit
		{soft: math.MaxUint64, open: 16, nodes: 3, want: maxHTTPConns},
		{soft: 1024, open: 16, nodes: 3, want: maxHTTPConns},
		{soft: 100, open: 16, nodes: 3, want: 100 - 16 - 3*fdsPerNode - fdReserve},
		{soft: 64, open: 16, nodes: 3, want: 1},     // no room: still one, for a probe
		{soft: 1024, open: 16, nodes: 256, want: 1}, // 256 nodes want 1,280
	} {
		if got := httpConnCap(c.soft, c.open, c.nodes); got != c.want {
			t.Errorf("httpConnCap(soft %d, open %d, nodes %d) = %d, want %d", c.soft, c.open, c.nodes, got, c.want)
		}
	}
}

func TestOwnResourceErr(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{syscall.EMFILE, true},
		{syscall.ENFILE, true},
		{syscall.EAGAIN, true},
		{syscall.ENOMEM, true},
		{fmt.Errorf("pidfd of 42: %w", syscall.EMFILE), true},
		{&os.SyscallError{Syscall: "accept4", Err: syscall.EMFILE}, true},
		{syscall.ENOENT, false}, // the node's binary is gone: the node's problem
		{syscall.EACCES, false},
		{syscall.ENOEXEC, false},
		{nil, false},
	} {
		if got := ownResourceErr(c.err); got != c.want {
			t.Errorf("ownResourceErr(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestAcceptRetryDelay(t *testing.T) {
	if d := acceptRetryDelay(1); d != 5*time.Millisecond {
		t.Errorf("first retry after %s, want 5ms", d)
	}
	if d := acceptRetryDelay(2); d != 10*time.Millisecond {
		t.Errorf("second retry after %s, want 10ms", d)
	}
	if d := acceptRetryDelay(1000); d != time.Second {
		t.Errorf("retry after many failures: %s, want 1s", d)
	}
}
