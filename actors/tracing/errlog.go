package tracing

import (
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
)

// errorEvery is how often one distinct message of the SDK is logged at
// most: an unreachable collector fails every batch (every BatchTimeout), and
// its retries would flood the log otherwise.
const errorEvery = 10 * time.Second

// maxMessages bounds the distinct messages remembered within errorEvery;
// beyond it, new messages are dropped until old ones age out.
const maxMessages = 64

// maxMessageLen bounds a logged message: an export error can carry the
// collector's answer.
const maxMessageLen = 512

// sdkLog is where the SDK's errors and warnings go. It is process-wide
// because the SDK's error handler and logger are: the last Start's logger
// receives them.
var sdkLog = &errorLog{lim: limiter{every: errorEvery, max: maxMessages}, now: time.Now}

var installOnce sync.Once

// routeErrors sends the SDK's errors and warnings to log from now on, until
// release(gen) with the generation it returns.
func routeErrors(log zerolog.Logger) (gen uint64) {
	gen = sdkLog.setLogger(log)
	installOnce.Do(func() {
		otel.SetErrorHandler(sdkLog)
		// The SDK's own logger writes to stderr in a format of its own,
		// which would break a JSON log.
		otel.SetLogger(logr.New(sdkSink{sdkLog}))
	})
	return gen
}

// errorLog logs the SDK's reports, rate-limited.
type errorLog struct {
	mu  sync.Mutex
	log zerolog.Logger
	gen uint64 // counts setLogger calls
	lim limiter
	now func() time.Time
}

func (e *errorLog) setLogger(log zerolog.Logger) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gen++
	e.log = log
	return e.gen
}

// release stops logging to the logger of generation gen, unless a later
// Start replaced it already: a stopped provider's logger (a finished test's,
// say) must not receive what the SDK reports afterwards.
func (e *errorLog) release(gen uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gen == gen {
		e.log = zerolog.Nop()
	}
}

// Handle implements otel.ErrorHandler.
func (e *errorLog) Handle(err error) {
	if err != nil {
		e.emit(zerolog.WarnLevel, err.Error(), "OpenTelemetry reported an error; spans may be lost")
	}
}

func (e *errorLog) emit(level zerolog.Level, detail, msg string) {
	detail = truncate(detail, maxMessageLen)
	e.mu.Lock()
	ok, suppressed := e.lim.allow(detail, e.now())
	log := e.log
	e.mu.Unlock()
	if !ok {
		return
	}
	ev := log.WithLevel(level).Str("error", detail)
	if suppressed > 0 {
		ev = ev.Int("repeated", suppressed)
	}
	ev.Msg(msg)
}

// sdkSink is the SDK's logr logger. It keeps errors and warnings (logr
// level 1, the SDK's Warn) and drops the SDK's info and debug chatter, and
// never logs the key/value pairs: the SDK puts raw configuration values in
// them (a malformed OTEL_EXPORTER_OTLP_HEADERS value, say).
type sdkSink struct{ e *errorLog }

func (sdkSink) Init(logr.RuntimeInfo)            {}
func (sdkSink) Enabled(level int) bool           { return level <= 1 }
func (s sdkSink) WithValues(...any) logr.LogSink { return s }
func (s sdkSink) WithName(string) logr.LogSink   { return s }

func (s sdkSink) Info(level int, msg string, _ ...any) {
	if level <= 1 {
		s.e.emit(zerolog.WarnLevel, msg, "OpenTelemetry warning")
	}
}

func (s sdkSink) Error(err error, msg string, _ ...any) {
	detail := msg
	if err != nil {
		detail = msg + ": " + err.Error()
	}
	s.e.emit(zerolog.WarnLevel, detail, "OpenTelemetry reported an error; spans may be lost")
}

// limiter lets each distinct message through at most once per every, and
// counts the repeats it held back. It is pure: the caller passes the time.
type limiter struct {
	every time.Duration
	max   int // distinct messages remembered at most
	seen  map[string]*seen
}

type seen struct {
	at         time.Time // last let through
	suppressed int       // held back since
}

// allow reports whether msg may be logged at now and, if so, how many
// repeats were held back since it last was.
func (l *limiter) allow(msg string, now time.Time) (ok bool, suppressed int) {
	if l.seen == nil {
		l.seen = make(map[string]*seen)
	}
	if s := l.seen[msg]; s != nil {
		if now.Sub(s.at) < l.every {
			s.suppressed++
			return false, 0
		}
		n := s.suppressed
		s.at, s.suppressed = now, 0
		return true, n
	}
	if len(l.seen) >= l.max {
		for m, s := range l.seen {
			if now.Sub(s.at) >= l.every {
				delete(l.seen, m) // its held-back repeats are forgotten
			}
		}
		if len(l.seen) >= l.max {
			return false, 0
		}
	}
	l.seen[msg] = &seen{at: now}
	return true, 0
}

// truncate cuts s to at most n bytes, on a UTF-8 boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
