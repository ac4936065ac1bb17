package actors

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// controlLog bounds the lines Pause and Resume log: a client that toggles a
// consumer in a loop (16,540 requests made 8,270 lines) must not flood the
// log. The first change in a window is logged at once; later ones in the
// same window are counted, and one line at the window's end says how many
// there were and where they left the consumer, so the last state is always
// in the log. Close ends it: a summary due then is written at once, and no
// timer outlives it.
type controlLog struct {
	log    zerolog.Logger
	window time.Duration
	state  func() (paused bool, pausedPartitions int)

	mu      sync.Mutex
	until   time.Time // the current window's end; changes before it are counted
	quiet   int       // changes counted, not logged, in this window
	timer   *time.Timer
	stopped bool
}

// controlLogWindow is the least time between two of a consumer's pause or
// resume lines.
const controlLogWindow = time.Second

func newControlLog(log zerolog.Logger, state func() (bool, int)) *controlLog {
	return &controlLog{log: log, window: controlLogWindow, state: state}
}

// change logs a pause or a resume, or counts it when one was logged in
// this window.
func (l *controlLog) change(write func(zerolog.Logger)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.stopped || now.After(l.until) {
		write(l.log)
		l.until = now.Add(l.window)
		return
	}
	l.quiet++
	if l.timer == nil {
		l.timer = time.AfterFunc(l.until.Sub(now), l.summarize)
	}
}

// summarize writes the window's count, and opens a new window: a change
// right after it is counted again.
func (l *controlLog) summarize() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	if l.quiet == 0 {
		return
	}
	l.summaryLocked()
	l.until = time.Now().Add(l.window)
}

func (l *controlLog) summaryLocked() {
	paused, parts := l.state()
	l.log.Info().Int("changes", l.quiet).Stringer("window", l.window).Bool("paused", paused).Int("paused_partitions", parts).
		Msg("more pauses and resumes than one line a window: counted, not logged one by one; the state they left")
	l.quiet = 0
}

// close stops the timer and writes a summary still due.
func (l *controlLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if l.quiet > 0 {
		l.summaryLocked()
	}
}
