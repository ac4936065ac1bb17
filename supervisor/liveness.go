package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// liveness serves GET /healthz (200 while the control loop runs and every
// node reported in time, else 503) and GET /status (the node slots as JSON),
// for Kubernetes probes and humans.
type liveness struct {
	srv *http.Server
	wg  sync.WaitGroup
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
func startLiveness(addr string, src statusSource, log zerolog.Logger) (*liveness, error) {
	l := &liveness{}
	if addr == "" {
		return l, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("swarm.liveness_listen: %w", err)
	}
	l.srv = &http.Server{Handler: livenessHandler(src), ReadHeaderTimeout: 5 * time.Second}
	log.Info().Str("addr", ln.Addr().String()).Msg("liveness endpoint listening")
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("liveness endpoint failed")
		}
	}()
	return l, nil
}

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
