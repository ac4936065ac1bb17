package actors

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// A dead letter keeps to its limit: what would not fit leaves first the
// value, then the record's headers, then its key, each named in a header;
// the error text is cut; a small one is the record as it was.
func TestDeadLetterKeepsToItsLimit(t *testing.T) {
	type hdr struct{ k, v string }
	mk := func(k string, v []byte) hdr { return hdr{k, string(v)} }
	base := func(key, value int, headers int) *envelope {
		rec := &envelope{}
		rec.Topic, rec.Partition, rec.Offset, rec.attempts = "in", 2, 41, 3
		if key > 0 {
			rec.Key = []byte(strings.Repeat("k", key))
		}
		rec.Value = []byte(strings.Repeat("v", value))
		for i := range headers {
			rec.Headers = append(rec.Headers, Header{Key: "h", Value: []byte(strings.Repeat("x", 100+i))})
		}
		return rec
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const limit = 10_000
	for _, c := range []struct {
		name                        string
		rec                         *envelope
		err                         error
		wantKey, wantValue, wantOwn int // bytes, bytes, headers kept
		wantDropped                 map[string]string
	}{
		{"small", base(5, 100, 2), errors.New("boom"), 5, 100, 2, map[string]string{}},
		{"large value", base(5, 20_000, 2), errors.New("boom"), 5, 0, 2, map[string]string{"turbo-value-dropped": "20000"}},
		{"large headers", base(5, 10, 100), errors.New("boom"), 5, 0, 0, map[string]string{"turbo-value-dropped": "10", "turbo-headers-dropped": "100"}},
		{"large key", base(20_000, 10, 1), errors.New("boom"), 0, 0, 0, map[string]string{"turbo-value-dropped": "10", "turbo-headers-dropped": "1", "turbo-key-dropped": "20000"}},
		{"long error", base(5, 100, 0), errors.New(strings.Repeat("e", 9000)), 5, 100, 0, map[string]string{}},
		{"long error of wide characters", base(5, 100, 0), errors.New(strings.Repeat("€", 3000)), 5, 100, 0, map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			key, value, headers := deadLetter(recordFailure{rec: c.rec, err: c.err}, at, limit, mk)
			size := len(key) + len(value)
			own := 0
			got := map[string]string{}
			for _, h := range headers {
				size += len(h.k) + len(h.v) + headerOverhead
				switch {
				case h.k == "h":
					own++
				case strings.HasSuffix(h.k, "-dropped"):
					got[h.k] = h.v
				}
			}
			if len(key) != c.wantKey || len(value) != c.wantValue || own != c.wantOwn || size > limit {
				t.Errorf("key %d bytes, value %d, %d own headers, %d in all; want %d, %d, %d, at most %d", len(key), len(value), own, size, c.wantKey, c.wantValue, c.wantOwn, limit)
			}
			if len(got) != len(c.wantDropped) {
				t.Errorf("dropped %v; want %v", got, c.wantDropped)
			}
			for k, v := range c.wantDropped {
				if got[k] != v {
					t.Errorf("dropped %v; want %v", got, c.wantDropped)
				}
			}
			want := map[string]string{"turbo-original-topic": "in", "turbo-original-partition": "2", "turbo-original-offset": "41",
				"turbo-attempts": "3", "turbo-failed-at": "2026-01-02T03:04:05Z"}
			for _, h := range headers {
				if w, ok := want[h.k]; ok && w != h.v {
					t.Errorf("header %s = %q; want %q", h.k, h.v, w)
				}
				if h.k == "turbo-error" && (len(h.v) > maxDeadLetterError+len("…") || !utf8.ValidString(h.v) || !strings.HasPrefix(c.err.Error(), strings.TrimSuffix(h.v, "…"))) {
					t.Errorf("turbo-error of %d bytes (%.20q…); want the error, cut to %d", len(h.v), h.v, maxDeadLetterError)
				}
			}
		})
	}
}
