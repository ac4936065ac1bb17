package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// logSink is what turbo writes its standard error through: logs, the status
// line, the exit summary, messages about signals. A write never blocks: it
// queues the line (bounded) for one writer goroutine, and drops and counts
// it when the queue is full.
//
// Why: with stderr a pipe nobody reads (a stuck log shipper), every write
// blocked once the pipe's 64 KiB were full — the handler logging a warning
// per record stopped, the pipeline with it (248 of 20,000 records
// committed), and so did the signal path, which wrote "second signal" to
// stderr before acting: SIGTERM, a second SIGTERM and SIGQUIT were all
// ignored. A lost log line is cheap; a stuck consumer is not.
//
// When lines were dropped and the output moves again, one line says how
// many (SetNotice: in the log's own format); Dropped gives the total for the
// exit summary. Zerolog's diode writer is the same idea, but its
// Close waits for the writer goroutine without a bound (and closes the
// wrapped file), which is the hang this type exists to avoid.
//
// On a terminal the sink also keeps the live status line (ShowLive,
// HideLive) out of the way of log lines: one mutex orders both, and every
// queued log write is framed by liveLine (see there).
type logSink struct {
	out   io.Writer
	limit int // bytes queued at most

	mu      sync.Mutex
	queue   []byte
	pending int64    // lines dropped since the last notice
	closing bool     // Close was called: the writer returns once the queue is empty
	exited  bool     // the writer returned: nothing more is written
	live    liveLine // the live status line, framed into the queue

	json atomic.Bool // the run logs JSON: turbo's own messages are JSON too

	dropped atomic.Int64
	notice  atomic.Pointer[func(n, total int64) []byte]
	wake    chan struct{} // 1-buffered: something is queued, or Close
	done    chan struct{} // closed when the writer goroutine returns
}

// logSinkLimit bounds what waits for a slow standard error: a few thousand
// log lines.
const logSinkLimit = 1 << 20

// newLogSink starts the writer goroutine; Close stops it.
func newLogSink(out io.Writer, limit int) *logSink {
	s := &logSink{
		out: out, limit: limit,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	s.SetNotice(func(n, total int64) []byte {
		return fmt.Appendf(nil, "turbo: %d lines of standard error were dropped (%d in all): it was not read fast enough\n", n, total)
	})
	go s.loop()
	return s
}

// SetNotice sets how the line reporting dropped lines is formatted (n since
// the last notice, total in all), e.g. in the log's own format. The writer
// goroutine writes it with the next batch of lines once the output moves,
// not through the queue, which may be full again by then. f is called with
// the sink's mutex held: it must not write to the sink.
func (s *logSink) SetNotice(f func(n, total int64) []byte) { s.notice.Store(&f) }

// Write queues p whole, or drops it when the queue is full or the writer
// has returned; it never blocks and never fails.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.exited || len(s.queue)+len(p)+s.live.overhead() > s.limit {
		s.pending++
		s.mu.Unlock()
		s.dropped.Add(1)
		return len(p), nil
	}
	s.queue = s.live.appendLog(s.queue, p)
	s.mu.Unlock()
	s.signal()
	return len(p), nil
}

// ShowLive sets the live status line and draws it (see liveLine): log lines
// written meanwhile clear it and draw it again after them. Like Write it
// never blocks; a redraw that does not fit the queue is skipped (the next
// tick draws again) and counts as no dropped line.
func (s *logSink) ShowLive(text string) {
	s.mu.Lock()
	if !s.exited && len(s.queue)+len(clearLine)+len(text) <= s.limit {
		s.queue = s.live.appendShow(s.queue, text)
	}
	s.mu.Unlock()
	s.signal()
}

// HideLive erases the live line and draws it no more: what is written next
// starts on a clean line.
func (s *logSink) HideLive() {
	s.mu.Lock()
	if len(s.queue)+len(clearLine) <= s.limit {
		s.queue = s.live.appendHide(s.queue)
	} else {
		// No room to erase it now: the next write that fits does (a shown
		// line is cleared before any log output), and none redraws it.
		s.live.text = ""
	}
	s.mu.Unlock()
	s.signal()
}

func (s *logSink) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// setJSON records whether the run logs JSON (newLogger does): turbo's own
// messages on this stderr (exit summary, exit error, signal notices) follow.
func (s *logSink) setJSON(on bool) { s.json.Store(on) }

// JSON reports whether the run logs JSON.
func (s *logSink) JSON() bool { return s.json.Load() }

// Dropped returns how many writes were dropped in all.
func (s *logSink) Dropped() int64 { return s.dropped.Load() }

// Underlying returns the writer the sink writes to (to tell a terminal).
func (s *logSink) Underlying() io.Writer { return s.out }

func (s *logSink) loop() {
	defer close(s.done)
	var buf []byte
	for {
		s.mu.Lock()
		buf, s.queue = s.queue, buf[:0]
		if len(buf) > 0 && s.pending > 0 {
			// Say what was lost since the last batch, right after the lines
			// that could be queued, and framed like them: it goes out with
			// this batch, not through the queue, which may be full again by
			// then.
			buf = s.live.appendLog(buf, (*s.notice.Load())(s.pending, s.dropped.Load()))
			s.pending = 0
		} else if len(buf) == 0 && s.closing {
			s.exited = true
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if len(buf) == 0 {
			<-s.wake
			continue
		}
		// A write error (EPIPE: the reader is gone) loses these lines like a
		// full queue would; there is nobody left to tell.
		_, _ = s.out.Write(buf)
	}
}

// Close writes what is queued and stops the writer goroutine, waiting at
// most timeout: a standard error that never drains cannot hold the exit (the
// goroutine, blocked in its write, then ends with the process). It reports
// whether everything queued was written. Writes once it returned are
// dropped.
func (s *logSink) Close(timeout time.Duration) bool {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.done:
		return true
	case <-t.C:
		return false
	}
}

// ownJSON returns a logger for turbo's own messages on w (the exit summary,
// the exit error, signal notices) when the run logs JSON, so that every
// line of standard error is then a JSON object; ok is false when they are
// plain text (console logs, or before the configuration is read: usage
// errors). These messages are written whatever log.level says, like their
// plain form.
func ownJSON(w io.Writer) (log zerolog.Logger, ok bool) {
	s, isSink := w.(*logSink)
	if !isSink || !s.JSON() {
		return zerolog.Nop(), false
	}
	return zerolog.New(s).With().Timestamp().Logger(), true
}
