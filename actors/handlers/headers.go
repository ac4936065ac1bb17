package handlers

import (
	"fmt"
	"net/http"
	"net/textproto"
	"os"
	"sync"
	"time"

	"github.com/turbokafka/turbo/config"
)

// staticHeader is one of handler.headers: a fixed value (from the file or
// the environment at start), or a file read again when it changes.
type staticHeader struct {
	name, prefix string
	value        string // the whole value, prefix included; for a file, the last good read

	file    string
	mu      sync.Mutex
	checked time.Time // when the file was last looked at
	mtime   time.Time
	size    int64
	err     error // the last read's failure: requests fail until the file is good again
}

// fileRecheck is how often a header's file is looked at (a stat) at most.
const fileRecheck = time.Second

// newStaticHeaders resolves handler.headers; an error names the header and
// never holds a value.
func newStaticHeaders(hs []config.HTTPHeader) ([]*staticHeader, error) {
	out := make([]*staticHeader, 0, len(hs))
	for _, h := range hs {
		s := &staticHeader{name: textproto.CanonicalMIMEHeaderKey(h.Name), prefix: h.Prefix, file: h.ValueFile}
		switch {
		case h.ValueEnv != "":
			v, ok := os.LookupEnv(h.ValueEnv)
			if !ok || v == "" {
				return nil, fmt.Errorf("%w: handler.headers: %s: the environment variable %s is not set or empty", config.ErrInvalid, s.name, h.ValueEnv)
			}
			if !config.ValidHeaderValue(v) {
				return nil, fmt.Errorf("%w: handler.headers: %s: the environment variable %s must hold one printable line", config.ErrInvalid, s.name, h.ValueEnv)
			}
			s.value = h.Prefix + v
		case h.ValueFile != "":
			if err := s.reload(time.Now()); err != nil {
				return nil, fmt.Errorf("%w: handler.headers: %s: %w", config.ErrInvalid, s.name, err)
			}
		default:
			s.value = h.Prefix + h.Value.Reveal()
		}
		out = append(out, s)
	}
	return out, nil
}

// set puts the header on a request; a file that went bad since fails the
// request (a retryable failure naming the file) rather than send a stale
// or broken credential.
func (s *staticHeader) set(h http.Header, now time.Time) error {
	if s.file == "" {
		h[s.name] = []string{s.value}
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.checked) >= fileRecheck {
		s.checked = now
		if st, err := os.Stat(s.file); err != nil || !st.ModTime().Equal(s.mtime) || st.Size() != s.size {
			s.err = s.reloadLocked(now)
		}
	}
	if s.err != nil {
		return fmt.Errorf("handlers: header %s: %w", s.name, s.err)
	}
	h[s.name] = []string{s.value}
	return nil
}

func (s *staticHeader) reload(now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked(now)
}

// reloadLocked reads the file; its errors name the file, never its content.
func (s *staticHeader) reloadLocked(now time.Time) error {
	st, err := os.Stat(s.file)
	if err != nil {
		return err
	}
	v, err := config.ReadSecretFile(s.file)
	if err != nil {
		return err
	}
	if !config.ValidHeaderValue(v) {
		return fmt.Errorf("%s must hold one printable line (at most 64 KiB)", s.file)
	}
	s.value, s.mtime, s.size, s.checked = s.prefix+v, st.ModTime(), st.Size(), now
	return nil
}
