package web

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound what a client of the listener can hold.
//
// Whoever can reach the listener must not be able to starve the process:
// measured on the swarm supervisor before these limits, 1,000 idle
// keep-alive connections took it from 16 to 1,016 open files, and with a
// 1,024 limit every node restart then failed with "too many open files". So
// connections are timed out and at most MaxConns are held at once; the rest
// wait in the kernel's accept queue, holding none of the process's
// descriptors.
type Limits struct {
	ReadHeader time.Duration // to send the request headers
	Read       time.Duration // to send the whole request
	// Write is the time to take the whole response, from the end of the
	// request's headers: at least a Prometheus scrape's default timeout
	// (10 s), so that a slow but legitimate scrape is not cut.
	Write    time.Duration
	Idle     time.Duration // between two requests on a keep-alive connection
	MaxConns int           // connections held at once
	// PerPeer is the most of them one client address may hold: a client
	// that opens many and dribbles its headers (slowloris) takes at most
	// these, and the probes from elsewhere still find a free one. A
	// connection over it is closed as soon as it is accepted.
	PerPeer int
}

// MaxConns is the most connections a listener holds at once by default;
// callers lower it when descriptors are scarce (the swarm supervisor keeps
// enough for node restarts).
const MaxConns = 64

// DefaultLimits are generous for probes (a kubelet opens one short
// connection per probe), for Prometheus (one keep-alive connection per
// scraper), for a browser on the console and for a human with curl.
var DefaultLimits = Limits{
	ReadHeader: 5 * time.Second,
	Read:       10 * time.Second,
	Write:      10 * time.Second,
	Idle:       10 * time.Second,
	MaxConns:   MaxConns,
	PerPeer:    MaxConns / 4,
}

// withDefaults fills every unset (zero or negative) field from
// DefaultLimits: a zero Limits is DefaultLimits, and no timeout is ever
// "none".
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.ReadHeader <= 0 {
		l.ReadHeader = d.ReadHeader
	}
	if l.Read <= 0 {
		l.Read = d.Read
	}
	if l.Write <= 0 {
		l.Write = d.Write
	}
	if l.Idle <= 0 {
		l.Idle = d.Idle
	}
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	if l.PerPeer <= 0 {
		l.PerPeer = max(l.MaxConns/4, 1)
	}
	l.PerPeer = min(l.PerPeer, l.MaxConns)
	return l
}

// limitListener holds at most cap accepted connections at once: Accept
// waits for one to close before it takes the next from the kernel's queue.
// (golang.org/x/net/netutil.LimitListener does the same.) And it holds at
// most perPeer of them per client address: one over that is closed at
// once, without taking a slot, so that one client cannot hold them all.
type limitListener struct {
	net.Listener
	slots     chan struct{} // one token per held connection
	done      chan struct{} // closed by Close: a waiting Accept returns
	closeOnce sync.Once
	perPeer   int

	mu      sync.Mutex
	peers   map[string]int // held connections by client address
	refused atomic.Int64   // connections closed for their address's cap
}

func newLimitListener(ln net.Listener, n, perPeer int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{}), perPeer: perPeer, peers: map[string]int{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		peer := peerOf(c)
		if !l.take(peer) {
			l.refused.Add(1)
			_ = c.Close()
			<-l.slots
			continue
		}
		return &limitConn{Conn: c, release: func() { l.give(peer); <-l.slots }}, nil
	}
}

// take counts a connection of peer, unless peer holds perPeer already.
func (l *limitListener) take(peer string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.peers[peer] >= l.perPeer {
		return false
	}
	l.peers[peer]++
	return true
}

func (l *limitListener) give(peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.peers[peer]--; l.peers[peer] <= 0 {
		delete(l.peers, peer)
	}
}

// peerOf is the client's address without its port (the whole address
// when it has none: a unix socket's).
func peerOf(c net.Conn) string {
	a := c.RemoteAddr()
	if a == nil {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back on the first Close (http.Server may close
// a connection more than once).
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
