package supervisor

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/turbokafka/turbo/supervisor/web"
)

// liveness serves GET /healthz (200 while the control loop runs and every
// node reported in time, else 503) and GET /status (the node slots as JSON),
// for Kubernetes probes and humans, on a web.Server: timed-out connections,
// at most Limits.MaxConns held at once (see web.Limits for the measurement
// that made these limits).
type liveness struct {
	srv *web.Server
}

// defaultLivenessLimits are web's: generous for probes (a kubelet opens one
// short connection per probe) and for a human with curl.
var defaultLivenessLimits = web.DefaultLimits

// maxLivenessConns is the most connections the liveness endpoint holds at
// once; fewer when the descriptor limit is tight (livenessConnCap).
const maxLivenessConns = web.MaxConns

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
func startLiveness(addr string, src statusSource, lim web.Limits, log zerolog.Logger) (*liveness, error) {
	srv, err := web.Listen(addr, "swarm.liveness_listen", livenessHandler(src), lim, log.With().Str("component", "liveness").Logger())
	if err != nil {
		return nil, err
	}
	if addr != "" {
		log.Info().Str("addr", srv.Addr()).Int("max_connections", max(lim.MaxConns, 1)).
			Stringer("idle_timeout", lim.Idle).Msg("liveness endpoint listening")
	}
	return &liveness{srv: srv}, nil
}

// addr is the address the endpoint listens on.
func (l *liveness) addr() string { return l.srv.Addr() }

func (l *liveness) stop() { l.srv.Stop() }
