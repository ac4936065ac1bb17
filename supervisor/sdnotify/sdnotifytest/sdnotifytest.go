// Package sdnotifytest is a fake systemd for tests: a unixgram socket that
// collects the sd_notify messages a service sends.
package sdnotifytest

import (
	"net"
	"testing"
)

// Listen listens on the unix datagram socket name (a path, or "\x00name"
// for an abstract one) until the test ends; every message comes on the
// channel (buffered: 10,000).
func Listen(t testing.TB, name string) <-chan string {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan string, 10_000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return msgs
}
