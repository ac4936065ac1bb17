// Package web is the HTTP face of a turbo process: GET /metrics
// (Prometheus), /healthz (liveness), /readyz (readiness), /status (JSON)
// and / (the live console, console.html), behind the hardening every
// listener of turbo has (Limits). `turbo run` serves its consumers with it,
// the swarm supervisor every node's.
//
// It imports neither the actor tree nor a Kafka client: what it shows comes
// through Source and a prometheus.Gatherer, so that both modes, and tests,
// can feed it.
package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Options configure Start.
type Options struct {
	// Addr is the host:port to listen on; "" serves nothing (Start returns
	// a Server whose Stop is a no-op).
	Addr string
	// Key is the configuration key Addr came from, e.g. "http.listen":
	// listen errors name it.
	Key string
	// Gatherer is served on /metrics; nil serves no /metrics (404).
	Gatherer prometheus.Gatherer
	// Source is what /healthz, /readyz, /status and the console show.
	Source Source
	// Control carries out control commands (POST
	// /consumers/{name}/{action}: WithControl); nil answers those routes
	// 403 (http.control is off).
	Control Controller
	// ControlTokenFile is http.control_token_file: commands need its token
	// as a bearer token; "" lets loopback clients in only.
	ControlTokenFile string
	// TLS, when set, serves HTTPS (http.tls: config.ListenerTLS.ServerConfig);
	// a client certificate it verified lets control commands in.
	TLS *tls.Config
	// Limits: the zero value is DefaultLimits, and unset fields take
	// DefaultLimits'.
	Limits Limits
	Log    zerolog.Logger
}

// Server is a listener serving Handler (or, for Listen, any handler).
type Server struct {
	srv      *http.Server
	ln       net.Listener
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// stopTimeout bounds Stop: requests in progress get this long to finish
// before their connections are closed under them.
const stopTimeout = 2 * time.Second

// Start listens on o.Addr and serves Handler(o.Gatherer, o.Source) until
// Stop.
func Start(o Options) (*Server, error) {
	if o.Addr == "" {
		return &Server{}, nil
	}
	if o.Source == nil {
		return nil, fmt.Errorf("web: %s: Options.Source is nil", o.Key)
	}
	lim := o.Limits.withDefaults()
	log := o.Log.With().Str("component", "http").Logger()
	ctl := NewControl(o.Control, o.ControlTokenFile, log)
	s, err := listen(o.Addr, o.Key, WithControl(Handler(o.Gatherer, withCommands{o.Source, ctl}, log), ctl), lim, log, o.TLS)
	if err != nil {
		return nil, err
	}
	log.Info().Str("addr", s.Addr()).Bool("tls", o.TLS != nil).Int("max_connections", lim.MaxConns).
		Stringer("idle_timeout", lim.Idle).Msg("http listening: /metrics /healthz /readyz /status, console on /")
	return s, nil
}

// withCommands is a Source whose Status shows the last control commands.
type withCommands struct {
	Source
	ctl *Control
}

func (w withCommands) Status() Status {
	st := w.Source.Status()
	st.Commands = w.ctl.Recent()
	if w.ctl != nil && w.ctl.ctl != nil {
		st.Control = &ControlState{Token: w.ctl.token != nil}
	}
	return st
}

// Listen serves h on addr with the limits lim (unset fields from
// DefaultLimits) until Stop. It is Start without turbo's routes, for a
// process that keeps its own (the swarm supervisor's liveness endpoint);
// key names addr's configuration key in the error when addr cannot be
// listened on. An empty addr serves nothing.
func Listen(addr, key string, h http.Handler, lim Limits, log zerolog.Logger) (*Server, error) {
	return listen(addr, key, h, lim, log, nil)
}

// listen is Listen, over TLS when tc is set.
func listen(addr, key string, h http.Handler, lim Limits, log zerolog.Logger, tc *tls.Config) (*Server, error) {
	s := &Server{}
	if addr == "" {
		return s, nil
	}
	lim = lim.withDefaults()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	s.ln = newLimitListener(ln, lim.MaxConns, lim.PerPeer)
	if tc != nil {
		// The limits hold connections before their handshake; the
		// server's read-header timeout bounds the handshake itself.
		s.ln = tls.NewListener(s.ln, tc)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
		h = loopbackHosts(h)
	}
	s.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeader,
		ReadTimeout:       lim.Read,
		WriteTimeout:      lim.Write,
		IdleTimeout:       lim.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          stdlog.New(log, "", 0),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("addr", ln.Addr().String()).Msg("http server failed")
		}
	}()
	return s, nil
}

// loopbackHosts answers only requests whose Host names the loopback
// interface (localhost, 127.0.0.0/8, ::1; any port; none at all): a
// listener on loopback is meant for this machine, and a web page whose
// name an attacker re-points at 127.0.0.1 (DNS rebinding) would otherwise
// read /status through the victim's browser. Its requests carry the
// page's name, and get 403.
func loopbackHosts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			writeJSON(w, http.StatusForbidden, Check{Reason: fmt.Sprintf("the Host header %q names no loopback address: this listener, on loopback, answers requests for localhost, 127.0.0.1 or ::1 only", r.Host)})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names the loopback interface.
func loopbackHost(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// maxHeaderBytes bounds a request's headers: a probe's or a scraper's
// request is a few hundred bytes, a browser's a few KiB with cookies of
// other sites on the same host.
const maxHeaderBytes = 16 << 10

// Addr is the bound address (useful with port 0); "" when serving nothing.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Stop closes the listener, lets requests in progress finish for up to
// stopTimeout, then closes their connections, and waits for the serving
// goroutine. Calling it more than once, or on a Server serving nothing, is
// fine.
func (s *Server) Stop() {
	if s.srv == nil {
		return
	}
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.srv.Close()
		}
	})
	s.wg.Wait()
}
