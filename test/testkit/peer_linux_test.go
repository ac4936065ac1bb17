package testkit

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"
)

// peerPID names the process at the other end of a loopback connection:
// this one, and a child that connects by itself.
func TestPeerPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	own, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	accepted := accept(t, ln)
	if got := peerPID(accepted.RemoteAddr().String(), accepted.LocalAddr().String()); got != os.Getpid() {
		t.Errorf("peerPID of this process's connection = %d, want %d", got, os.Getpid())
	}

	child := exec.Command("bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/"+port+"; read -t 30 -u 3")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	accepted = accept(t, ln)
	if got := peerPID(accepted.RemoteAddr().String(), accepted.LocalAddr().String()); got != child.Process.Pid {
		t.Errorf("peerPID of the child's connection = %d, want %d", got, child.Process.Pid)
	}
	if mine, _ := family(os.Getpid()); !slices.Contains(mine, child.Process.Pid) || mine[0] != os.Getpid() {
		t.Errorf("family(%d) = %v: want this process first, and its child %d among them", os.Getpid(), mine, child.Process.Pid)
	}
	if got := peerPID("127.0.0.1:1", ln.Addr().String()); got != 0 {
		t.Errorf("peerPID of an address nobody holds = %d, want 0", got)
	}
	// The client's port with another destination names no socket of ours.
	if got := peerPID(accepted.RemoteAddr().String(), "127.0.0.1:1"); got != 0 {
		t.Errorf("peerPID with the wrong server end = %d, want 0", got)
	}
}

func accept(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("waiting 30 s for a connection: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
