package main

// clearLine moves the cursor to the start of the line and erases it.
const clearLine = "\r\033[K"

// liveLine is what a terminal shows of the live status line, and what a
// write must add around log output so that no log line is ever written into
// the live line: clear it before the log output, draw it again after.
//
// It is pure bookkeeping (no I/O, no lock, no clock): each method appends
// to dst the bytes to write and updates the state, so the logSink can apply
// it under its own mutex, to the bytes it queues, in queue order. Without
// it, the status ticker's "\r\033[K..." and the loggers' lines interleaved:
// a log line started at the end of the live line ("  12 rec/s ...  lag
// 3{"level":"warn",...}") and the next redraw erased the last line logged.
type liveLine struct {
	text    string // the live line shown after log output; "" when none
	shown   bool   // text is on screen now, the cursor at its end
	midLine bool   // the last log output did not end its line: drawing now would erase it
}

// appendLog appends log output p, framed: the live line is cleared first
// and drawn again after p once p ends its line.
func (l *liveLine) appendLog(dst, p []byte) []byte {
	if len(p) == 0 {
		return dst
	}
	if l.shown {
		dst = append(dst, clearLine...)
		l.shown = false
	}
	dst = append(dst, p...)
	l.midLine = p[len(p)-1] != '\n'
	if !l.midLine && l.text != "" {
		dst = append(dst, l.text...)
		l.shown = true
	}
	return dst
}

// appendShow sets the live line to text ("" hides it) and draws it, unless
// a log line is unfinished: then it is drawn after that line ends.
func (l *liveLine) appendShow(dst []byte, text string) []byte {
	if text == "" {
		return l.appendHide(dst)
	}
	l.text = text
	if l.midLine {
		return dst
	}
	// The cursor is at the end of the old live line, or at the start of an
	// empty line: clearing is right in both cases.
	dst = append(dst, clearLine...)
	dst = append(dst, text...)
	l.shown = true
	return dst
}

// appendHide erases the live line and shows none until the next
// appendShow: what follows (the exit summary) starts on a clean line.
func (l *liveLine) appendHide(dst []byte) []byte {
	l.text = ""
	if l.shown {
		dst = append(dst, clearLine...)
		l.shown = false
	}
	return dst
}

// overhead is the most appendLog adds to a write: the queue's bound
// counts it.
func (l *liveLine) overhead() int {
	if l.text == "" && !l.shown {
		return 0
	}
	return len(clearLine) + len(l.text)
}

// oneRow makes s fit one terminal row of the given width: control
// characters (a newline in a Kafka error) become spaces, and s is cut to at
// most width-1 runes, because "\r\033[K" erases only the row the cursor is
// on and a wrapped line would leave its first rows behind at every redraw.
// width <= 1 (not known) cuts nothing.
func oneRow(s string, width int) string {
	b := make([]rune, 0, len(s))
	for _, r := range s {
		if width > 1 && len(b) == width-1 {
			break
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			r = ' '
		}
		b = append(b, r)
	}
	return string(b)
}
