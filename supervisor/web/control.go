package web

import (
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Controller pauses and resumes the consumers of a process by name.
type Controller interface {
	// Pause and Resume return ErrNoConsumer for a name the process does
	// not run.
	Pause(name string) error
	Resume(name string) error
}

// ErrNoConsumer: the process runs no consumer of that name.
var ErrNoConsumer = errors.New("web: no such consumer")

// WithControl adds POST /consumers/{name}/pause and /resume to h. With ctl
// nil they answer 403 (http.control is off). They answer only clients on
// the loopback interface, and refuse a request that carries an Origin
// header: a browser sends one across origins, so a web page cannot pause a
// consumer on the machine it runs on. The answer is {"ok":..,"reason":..}
// like a probe's; 404 for an unknown consumer or action.
func WithControl(h http.Handler, ctl Controller) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("POST /consumers/{name}/{action}", func(w http.ResponseWriter, r *http.Request) {
		code, c := control(r, ctl)
		writeJSON(w, code, c)
	})
	return mux
}

func control(r *http.Request, ctl Controller) (int, Check) {
	if ctl == nil {
		return http.StatusForbidden, Check{Reason: "control is off: set http.control: true"}
	}
	if !fromLoopback(r.RemoteAddr) {
		return http.StatusForbidden, Check{Reason: "control answers clients on the loopback interface only"}
	}
	if r.Header.Get("Origin") != "" {
		return http.StatusForbidden, Check{Reason: "control refuses requests sent by a browser (an Origin header)"}
	}
	name, action := r.PathValue("name"), r.PathValue("action")
	var err error
	switch action {
	case "pause":
		err = ctl.Pause(name)
	case "resume":
		err = ctl.Resume(name)
	default:
		return http.StatusNotFound, Check{Reason: fmt.Sprintf("no action %q: pause or resume", action)}
	}
	switch {
	case errors.Is(err, ErrNoConsumer):
		return http.StatusNotFound, Check{Reason: fmt.Sprintf("no consumer %q", name)}
	case err != nil:
		return http.StatusInternalServerError, Check{Reason: err.Error()}
	}
	return http.StatusOK, Check{OK: true, Reason: fmt.Sprintf("consumer %q %sd", name, action)}
}

// fromLoopback reports whether a request's remote address is on the
// loopback interface.
func fromLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
