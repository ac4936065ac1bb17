package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// liveness serves GET /healthz (200 while the control loop runs and every
// node reported in time, else 503) and GET /status (the node slots as JSON),
// for Kubernetes probes and humans.
//
// Whoever can reach it must not be able to starve the supervisor: measured
// before these limits, 1,000 idle keep-alive connections took the
// supervisor from 16 to 1,016 open files, and with a 1,024 limit every node
// restart then failed with "too many open files". So connections are timed
// out (livenessLimits) and at most MaxConns are held at once; the rest wait
// in the kernel's accept queue, holding none of the supervisor's
// descriptors.
type liveness struct {
	srv *http.Server
	ln  net.Listener
	wg  sync.WaitGroup
}

// livenessLimits bound what a client of the liveness endpoint can hold.
type livenessLimits struct {
	ReadHeader time.Duration // to send the request headers
	Read       time.Duration // to send the whole request
	Write      time.Duration // to take the whole response
	Idle       time.Duration // between two requests on a keep-alive connection
	MaxConns   int           // connections held at once
}

// defaultLivenessLimits are generous for probes (a kubelet opens one short
// connection per probe) and for a human with curl.
var defaultLivenessLimits = livenessLimits{
	ReadHeader: 5 * time.Second,
	Read:       10 * time.Second,
	Write:      10 * time.Second,
	Idle:       10 * time.Second,
	MaxConns:   maxLivenessConns,
}

// maxLivenessConns is the most connections the liveness endpoint holds at
// once; fewer when the descriptor limit is tight (livenessConnCap).
const maxLivenessConns = 64

// What the supervisor needs in descriptors besides the liveness
// connections, so that a crowd of clients cannot leave it unable to start a
// node (livenessConnCap).
const (
	// fdsPerNode: a node's pidfd and health connection, and what starting
	// (fork's error pipe, the new pidfd) and measuring it (/proc/PID/status)
	// take for a moment.
	fdsPerNode = 5
	// fdReserve: everything else — the health listener, connections to
	// the health socket before they are refused, the runtime's own.
	fdReserve = 32
)

// livenessConnCap is how many liveness connections the supervisor may hold
// and still start every node: what the soft RLIMIT_NOFILE leaves after the
// descriptors open now, fdsPerNode per node and fdReserve, between 1 and
// maxLivenessConns. (Go raises the soft limit to the hard one at start and
// gives children the original back, so the soft limit here is usually the
// hard one; with `ulimit -n 1024` both are 1,024.)
func livenessConnCap(softLimit uint64, open, nodes int) int {
	need := uint64(max(open, 0)) + uint64(nodes)*fdsPerNode + fdReserve
	if softLimit <= need {
		return 1
	}
	return int(min(softLimit-need, maxLivenessConns))
}

type statusSource interface {
	Healthy() bool
	Status() []NodeStatus
}

func livenessHandler(src statusSource) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if src.Healthy() {
			fmt.Fprintln(w, "ok")
			return
		}
		http.Error(w, "unhealthy", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(struct {
			Healthy bool         `json:"healthy"`
			Nodes   []NodeStatus `json:"nodes"`
		}{src.Healthy(), src.Status()})
	})
	return mux
}

// startLiveness listens on addr; an empty addr serves nothing.
func startLiveness(addr string, src statusSource, lim livenessLimits, log zerolog.Logger) (*liveness, error) {
	l := &liveness{}
	if addr == "" {
		return l, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("swarm.liveness_listen: %w", err)
	}
	l.ln = newLimitListener(ln, max(lim.MaxConns, 1))
	l.srv = &http.Server{
		Handler:           livenessHandler(src),
		ReadHeaderTimeout: lim.ReadHeader,
		ReadTimeout:       lim.Read,
		WriteTimeout:      lim.Write,
		IdleTimeout:       lim.Idle,
		MaxHeaderBytes:    8 << 10, // a probe's request is a few hundred bytes
		ErrorLog:          stdlog.New(log.With().Str("component", "liveness").Logger(), "", 0),
	}
	log.Info().Str("addr", ln.Addr().String()).Int("max_connections", max(lim.MaxConns, 1)).
		Stringer("idle_timeout", lim.Idle).Msg("liveness endpoint listening")
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := l.srv.Serve(l.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("liveness endpoint failed")
		}
	}()
	return l, nil
}

// addr is the address the endpoint listens on.
func (l *liveness) addr() string { return l.ln.Addr().String() }

func (l *liveness) stop() {
	if l.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil {
		l.srv.Close()
	}
	l.wg.Wait()
}

// limitListener holds at most cap accepted connections at once: Accept
// waits for one to close before it takes the next from the kernel's queue.
// (golang.org/x/net/netutil.LimitListener does the same; this is the few
// lines turbo needs, without the dependency.)
type limitListener struct {
	net.Listener
	slots     chan struct{} // one token per held connection
	done      chan struct{} // closed by Close: a waiting Accept returns
	closeOnce sync.Once
}

func newLimitListener(ln net.Listener, n int) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
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
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
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
