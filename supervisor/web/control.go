package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Command is one control command: an action on a consumer and its
// arguments. It is what a request to POST /consumers/{name}/{action}
// carries (the name and the action from the path, the rest from the JSON
// body) and what a Controller carries out.
type Command struct {
	Consumer string `json:"consumer"`
	Action   string `json:"action"`
	Args
}

// Args are a command's arguments: the JSON body of its request.
type Args struct {
	// Topic and Partition narrow pause and resume: a topic (every partition
	// of it), or one partition of it; neither, the whole consumer. With
	// Offset, they name the record skip skips. Seek moves the partition
	// (without one, every partition of the topic the process owns) to
	// Offset, or to the first record at or after Time.
	Topic     string     `json:"topic,omitempty"`
	Partition *int32     `json:"partition,omitempty"`
	Offset    *int64     `json:"offset,omitempty"`
	Time      *time.Time `json:"time,omitempty"` // RFC 3339
	// Concurrency, Rate and Burst are retune's: the most handler calls at
	// once, the rate limit in records a second (0 lifts it) and its burst.
	Concurrency *int     `json:"concurrency,omitempty"`
	Rate        *float64 `json:"rate,omitempty"`
	Burst       *int     `json:"burst,omitempty"`
}

// The actions of Command.Action.
const (
	ActionPause  = "pause"
	ActionResume = "resume"
	ActionRetune = "retune"
	ActionSkip   = "skip"
	ActionSeek   = "seek"
)

// check refuses a command whose arguments do not fit its action.
func (c Command) check() error {
	switch c.Action {
	case ActionSkip:
		if c.Topic == "" || c.Partition == nil || c.Offset == nil || c.Time != nil || c.Concurrency != nil || c.Rate != nil || c.Burst != nil {
			return fmt.Errorf("%w: skip takes a topic, a partition and an offset, and nothing else", ErrBadCommand)
		}
	case ActionSeek:
		if c.Topic == "" || (c.Offset == nil) == (c.Time == nil) || c.Concurrency != nil || c.Rate != nil || c.Burst != nil {
			return fmt.Errorf("%w: seek takes a topic, a partition or none (every partition of the topic this process owns), and an offset or a time (RFC 3339), not both", ErrBadCommand)
		}
		if c.Offset != nil && *c.Offset < 0 {
			return fmt.Errorf("%w: offset %d is below 0", ErrBadCommand, *c.Offset)
		}
	case ActionPause, ActionResume:
		if c.Offset != nil || c.Time != nil {
			return fmt.Errorf("%w: %s takes no offset", ErrBadCommand, c.Action)
		}
		if c.Concurrency != nil || c.Rate != nil || c.Burst != nil {
			return fmt.Errorf("%w: %s takes a topic and a partition, not concurrency, rate or burst", ErrBadCommand, c.Action)
		}
		if c.Partition != nil && c.Topic == "" {
			return fmt.Errorf("%w: a partition needs its topic", ErrBadCommand)
		}
	case ActionRetune:
		if c.Topic != "" || c.Partition != nil || c.Offset != nil || c.Time != nil {
			return fmt.Errorf("%w: retune applies to the whole consumer: no topic, partition or offset", ErrBadCommand)
		}
		if c.Concurrency == nil && c.Rate == nil {
			return fmt.Errorf("%w: retune needs concurrency, rate, or both", ErrBadCommand)
		}
		if c.Burst != nil && c.Rate == nil {
			return fmt.Errorf("%w: a burst needs its rate", ErrBadCommand)
		}
	default:
		return fmt.Errorf("%w: no action %q: pause, resume, retune, skip or seek", errNoAction, c.Action)
	}
	return nil
}

// Controller carries out control commands on the consumers of a process.
type Controller interface {
	// Do carries out cmd, which has passed its checks, and says what it
	// did. It returns ErrNoConsumer for a name the process does not run,
	// and an error wrapping ErrBadCommand for arguments the consumer
	// refuses (a concurrency out of bounds). Doing a command twice leaves
	// the consumer as doing it once.
	Do(cmd Command) (string, error)
}

var (
	// ErrNoConsumer: the process runs no consumer of that name.
	ErrNoConsumer = errors.New("web: no such consumer")
	// ErrBadCommand: the command's arguments are refused.
	ErrBadCommand = errors.New("web: bad command")
	// ErrNotHere: what the command is about is not in this process (a
	// record to skip that is not in flight here, a partition to seek that
	// another member owns).
	ErrNotHere = errors.New("web: not here")
	// ErrBusy: the consumer cannot take the command now (restarting, or
	// still applying the last one): try again.
	ErrBusy     = errors.New("web: busy")
	errNoAction = errors.New("web: no such action")
)

// Answer is what a control request gets back: the verdict and what was
// done, or why nothing was.
type Answer struct {
	OK      bool     `json:"ok"`
	Reason  string   `json:"reason,omitempty"`
	Command *Command `json:"command,omitempty"`
}

// CommandEntry is one control request in Status.Commands and the log: who
// sent it, how it was let in, and what came of it.
type CommandEntry struct {
	At      time.Time `json:"at"`
	From    string    `json:"from"` // the client's address
	Auth    string    `json:"auth"` // "token", "loopback", or "client certificate" and its subject
	Command Command   `json:"command"`
	OK      bool      `json:"ok"`
	Result  string    `json:"result"`
}

// Control is the control routes' state: the controller, how clients are
// let in, and the last commands.
type Control struct {
	ctl   Controller // nil: control is off
	token *tokenFile // nil: loopback clients only
	log   zerolog.Logger

	mu      sync.Mutex
	recent  []CommandEntry // the last maxRecent, oldest first
	refused refusals
}

// maxRecent is how many commands Status.Commands shows.
const maxRecent = 20

// maxCommandBody bounds a command's JSON body.
const maxCommandBody = 4 << 10

// NewControl returns the control routes' state for ctl (nil: control is
// off, every request 403). With tokenPath set, a request needs the token
// it holds as a bearer token, from any client; without one, only loopback
// clients are let in.
func NewControl(ctl Controller, tokenPath string, log zerolog.Logger) *Control {
	c := &Control{ctl: ctl, log: log}
	if tokenPath != "" {
		c.token = &tokenFile{path: tokenPath}
	}
	return c
}

// Recent lists the last commands, oldest first.
func (c *Control) Recent() []CommandEntry {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]CommandEntry(nil), c.recent...)
}

// WithControl adds POST /consumers/{name}/{action} to h, guarded by c (nil:
// every request 403, control is off). A request is let in when:
//   - control is on;
//   - it comes with a client certificate the TLS listener verified
//     (http.tls.client_ca_file), or carries the bearer token of
//     http.control_token_file, or, without one configured, comes from the
//     loopback interface;
//   - it does not come from another origin: a browser's Origin header, when
//     there is one, names this listener, and its Sec-Fetch-Site says
//     same-origin;
//   - its body, empty or not, is declared application/json (a form a page
//     posts across origins cannot be).
//
// Refusals answer 403 (415 for the content type) with {"ok":false,
// "reason":…}; a command the consumer refuses 400, an unknown consumer or
// action 404. Every command let in is logged as one audit line and kept in
// Recent; refusals are logged at most once a second, with a count.
func WithControl(h http.Handler, c *Control) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("POST /consumers/{name}/{action}", func(w http.ResponseWriter, r *http.Request) {
		code, a := c.serve(r)
		writeJSON(w, code, a)
	})
	return mux
}

func (c *Control) serve(r *http.Request) (int, Answer) {
	if c == nil || c.ctl == nil {
		return http.StatusForbidden, Answer{Reason: "control is off: set http.control: true"}
	}
	auth, code, why := c.admit(r)
	if why != "" {
		c.refused.note(c.log, r.RemoteAddr, why)
		return code, Answer{Reason: why}
	}
	cmd := Command{Consumer: r.PathValue("name"), Action: r.PathValue("action")}
	if err := readArgs(r, &cmd); err != nil {
		return http.StatusBadRequest, Answer{Reason: err.Error()}
	}
	if err := cmd.check(); err != nil {
		if errors.Is(err, errNoAction) {
			return http.StatusNotFound, Answer{Reason: strings.TrimPrefix(err.Error(), errNoAction.Error()+": ")}
		}
		return http.StatusBadRequest, Answer{Reason: reason(err)}
	}
	did, err := c.ctl.Do(cmd)
	code = http.StatusOK
	switch {
	case errors.Is(err, ErrNoConsumer):
		code, did = http.StatusNotFound, fmt.Sprintf("no consumer %q", cmd.Consumer)
	case errors.Is(err, ErrBadCommand):
		code, did = http.StatusBadRequest, reason(err)
	case errors.Is(err, ErrNotHere):
		code, did = http.StatusConflict, strings.TrimPrefix(err.Error(), ErrNotHere.Error()+": ")
	case errors.Is(err, ErrBusy):
		code, did = http.StatusServiceUnavailable, strings.TrimPrefix(err.Error(), ErrBusy.Error()+": ")
	case err != nil:
		code, did = http.StatusInternalServerError, err.Error()
	}
	c.record(CommandEntry{At: time.Now(), From: r.RemoteAddr, Auth: auth, Command: cmd, OK: err == nil, Result: did})
	return code, Answer{OK: err == nil, Reason: did, Command: &cmd}
}

// reason is err's message without the sentinel's prefix.
func reason(err error) string {
	return strings.TrimPrefix(err.Error(), ErrBadCommand.Error()+": ")
}

// admit decides whether r may command: how it was let in, or the status
// and the reason it is refused.
func (c *Control) admit(r *http.Request) (auth string, code int, why string) {
	if why := crossOrigin(r); why != "" {
		return "", http.StatusForbidden, why
	}
	switch {
	case r.TLS != nil && len(r.TLS.VerifiedChains) > 0:
		// http.tls.client_ca_file verified it at the handshake.
		auth = "client certificate " + r.TLS.VerifiedChains[0][0].Subject.String()
	case c.token != nil:
		if why := c.token.admit(r.Header.Get("Authorization")); why != "" {
			return "", http.StatusForbidden, why
		}
		auth = "token"
	default:
		if !fromLoopback(r.RemoteAddr) {
			return "", http.StatusForbidden, "control answers clients on the loopback interface only (set http.control_token_file, or http.tls.client_ca_file, to command from elsewhere)"
		}
		auth = "loopback"
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return "", http.StatusUnsupportedMediaType, "a command is sent as application/json (Content-Type), its body empty or a JSON object"
	}
	return auth, 0, ""
}

// crossOrigin says why r was sent from another origin, or "": a browser
// names the page's origin in Origin and the relation in Sec-Fetch-Site.
// A client that is not a browser sends neither.
func crossOrigin(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return fmt.Sprintf("control refuses requests a browser sends from another origin (Sec-Fetch-Site: %s)", site)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if !strings.EqualFold(origin, scheme+"://"+r.Host) {
		return "control refuses requests a browser sends from another origin (Origin is not this listener)"
	}
	return ""
}

// readArgs reads a command's JSON body (empty: no arguments) into cmd's
// arguments.
func readArgs(r *http.Request, cmd *Command) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxCommandBody+1))
	dec.DisallowUnknownFields()
	switch err := dec.Decode(&cmd.Args); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		cmd.Args = Args{}
		return fmt.Errorf("the body is not a command's JSON object (topic, partition, offset, concurrency, rate, burst; at most %d bytes): %v", maxCommandBody, err)
	case dec.More():
		return errors.New("the body holds more than one JSON object")
	}
	return nil
}

// record logs a command as one audit line and keeps it in Recent.
func (c *Control) record(e CommandEntry) {
	ev := c.log.Info()
	if !e.OK {
		ev = c.log.Warn()
	}
	ev.Str("from", e.From).Str("auth", e.Auth).Str("consumer", e.Command.Consumer).Str("action", e.Command.Action).
		Interface("command", e.Command).Bool("ok", e.OK).Str("result", e.Result).Msg("control command")
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.recent) == maxRecent {
		c.recent = append(c.recent[:0], c.recent[1:]...)
	}
	c.recent = append(c.recent, e)
}

// refusals bounds the lines refused requests log: a client retrying with a
// wrong token in a loop must not flood the log.
type refusals struct {
	mu      sync.Mutex
	last    time.Time
	counted int // refused since the last line
}

func (f *refusals) note(log zerolog.Logger, from, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counted++
	now := time.Now()
	if now.Sub(f.last) < time.Second {
		return
	}
	log.Warn().Str("from", from).Str("reason", why).Int("refused", f.counted).Msg("control request refused")
	f.last, f.counted = now, 0
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
