//go:build linux

package web

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// serverConns counts this process's descriptors that are established TCP
// connections whose local port is port: the server's side of its
// connections (/proc/self/fd matched against /proc/net/tcp{,6}).
func serverConns(t *testing.T, port int) int {
	t.Helper()
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] != "01" { // 01: ESTABLISHED
				continue
			}
			_, lport, ok := strings.Cut(fs[1], ":")
			if p, err := strconv.ParseInt(lport, 16, 32); ok && err == nil && int(p) == port {
				inodes[fs[9]] = true
			}
		}
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(target, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
			n++
		}
	}
	return n
}

// The HTTP server, moved here from the supervisor's liveness
// endpoint with the limits: idle keep-alive connections are closed after the
// idle timeout, and no more than MaxConns are held at once — the others wait
// in the kernel's accept queue, holding no descriptor of the process, and
// are served in turn.
func TestServerBoundsConnections(t *testing.T) {
	const clients = 100
	// Every client comes from 127.0.0.1: the per-client cap is the whole
	// cap here (TestSlowClientsCannotStarveTheProbes tests it).
	lim := Limits{ReadHeader: time.Second, Read: time.Second, Write: time.Second, Idle: 200 * time.Millisecond, MaxConns: 10, PerPeer: 10}
	live, err := Start(Options{Addr: "127.0.0.1:0", Key: "http.listen", Source: &fakeSource{}, Limits: lim, Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop()
	_, portStr, _ := net.SplitHostPort(live.Addr())
	port, _ := strconv.Atoi(portStr)

	var served, closed atomic.Int64
	var mu sync.Mutex
	var failures []error
	fail := func(err error) { mu.Lock(); failures = append(failures, err); mu.Unlock() }
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", live.Addr())
			if err != nil {
				fail(err)
				return
			}
			defer c.Close()
			// Keep-alive: one request, then the connection stays idle.
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
				fail(err)
				return
			}
			c.SetReadDeadline(time.Now().Add(30 * time.Second)) // queued behind the others: up to 10 rounds
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				fail(fmt.Errorf("no response: %w", err))
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			served.Add(1)
			// The server must close the idle connection after lim.Idle.
			c.SetReadDeadline(time.Now().Add(lim.Idle + 2*time.Second))
			if _, err := br.ReadByte(); errors.Is(err, io.EOF) {
				closed.Add(1)
			} else {
				fail(fmt.Errorf("an idle connection was not closed within idle timeout + 2 s: %v", err))
			}
		}()
	}
	// Sample the server's side while the clients run.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	peak := 0
	deadline := time.After(60 * time.Second)
sampling:
	for {
		peak = max(peak, serverConns(t, port))
		select {
		case <-done:
			break sampling
		case <-deadline:
			t.Fatalf("timed out after 60 s waiting for %d clients to be served and closed (%d served, %d closed)", clients, served.Load(), closed.Load())
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Logf("%d clients: %d served, %d closed by the server after idling; at most %d connections held by the server at once (cap %d)",
		clients, served.Load(), closed.Load(), peak, lim.MaxConns)
	mu.Lock()
	for i, err := range failures {
		if i < 5 {
			t.Error(err)
		}
	}
	if len(failures) > 5 {
		t.Errorf("… and %d more failures", len(failures)-5)
	}
	mu.Unlock()
	if served.Load() != clients || closed.Load() != clients {
		t.Errorf("%d of %d served, %d of %d closed when idle; want all", served.Load(), clients, closed.Load(), clients)
	}
	if peak > lim.MaxConns {
		t.Errorf("the server held %d connections at once, want at most %d", peak, lim.MaxConns)
	}
}

// Slowloris: 500 connections from one client address (127.0.0.2), each
// dribbling a header byte every 200 ms and opening a new one when its
// connection is closed, while a probe from another address (127.0.0.1)
// asks /healthz every 100 ms with a 1 s timeout, as a kubelet would. The
// flood holds at most PerPeer connections; every probe is answered in
// time, and the server never holds more than MaxConns.
func TestSlowClientsCannotStarveTheProbes(t *testing.T) {
	const attackers = 500
	srv, err := Start(Options{Addr: "127.0.0.1:0", Key: "http.listen", Source: &fakeSource{live: Check{OK: true}}, Log: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	_, portStr, _ := net.SplitHostPort(srv.Addr())
	port, _ := strconv.Atoi(portStr)
	lim := DefaultLimits

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var dials atomic.Int64
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: time.Second}
	for range attackers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := attacker.Dial("tcp", srv.Addr())
				if err != nil {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					continue
				}
				dials.Add(1)
				_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\n")
				tick := time.NewTicker(200 * time.Millisecond)
			dribble:
				for {
					select {
					case <-stop:
						break dribble
					case <-tick.C:
						if _, err := io.WriteString(c, "X"); err != nil {
							break dribble // closed by the server
						}
					}
				}
				tick.Stop()
				c.Close()
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	testkitEventually(t, 10*time.Second, "the flood to hold its share of the connections", func() bool {
		return serverConns(t, port) >= lim.MaxConns/4
	})

	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var worst time.Duration
	peak := 0
	for i := range 30 {
		began := time.Now()
		resp, err := probe.Get("http://" + srv.Addr() + "/healthz")
		took := time.Since(began)
		if err != nil {
			t.Fatalf("probe %d under the flood: %v after %s", i, err, took.Round(time.Millisecond))
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("probe %d under the flood: %d", i, resp.StatusCode)
		}
		worst = max(worst, took)
		peak = max(peak, serverConns(t, port))
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d slow clients (%d connections opened): 30 probes from another address, the slowest answered in %s; at most %d connections held (cap %d, %d per client)",
		attackers, dials.Load(), worst.Round(time.Millisecond), peak, lim.MaxConns, lim.PerPeer)
	if peak > lim.MaxConns {
		t.Errorf("the server held %d connections, want at most %d", peak, lim.MaxConns)
	}
}

// testkitEventually polls cond every 10 ms until it holds or the deadline
// passes (this package cannot import testkit, which imports it).
func testkitEventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
