package actors

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// max_partitions: over it at the start, the consumer gives up naming the
// count; within it, every matching set is taken in; a later set over it
// is not — the last admitted set stays, less the topics gone — and that is
// logged once per refused set; once the matching set fits again, it is
// taken in.
func TestPartitionCap(t *testing.T) {
	sizes := map[string]int{"a": 40, "b": 40, "c": 30, "d": 50}
	count := func(ts []string) int {
		n := 0
		for _, t := range ts {
			n += sizes[t]
		}
		return n
	}
	var log bytes.Buffer
	c := newPartitionCap(100, zerolog.New(&log))

	var capErr *capError
	all := []string{"a", "b", "c", "d"}
	if err := c.check(all, 160); !errors.As(err, &capErr) || !strings.Contains(err.Error(), "160 partitions of 4 topics, more than max_partitions 100") {
		t.Fatalf("check over the cap at start = %v, want a capError naming 160 of 100", err)
	}
	var fatal fatalDial
	if !errors.As(error(capErr), &fatal) {
		t.Error("a capError is not a fatalDial: the consumer would retry for ever")
	}
	if err := c.check([]string{"a", "b"}, 80); err != nil {
		t.Fatalf("check within the cap = %v", err)
	}
	if got := c.admit([]string{"a", "b"}, count); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("admit within the cap = %v", got)
	}
	if err := c.check(all, 160); err != nil {
		t.Fatalf("check over the cap after a set was admitted (a restarted tree) = %v, want nil: admit keeps the old set", err)
	}
	for range 3 { // the same refused set, seen at every refresh: logged once
		if got := c.admit([]string{"a", "b", "c", "d"}, count); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("admit over the cap = %v, want the admitted a, b", got)
		}
	}
	if n := strings.Count(log.String(), "cover more partitions than max_partitions"); n != 1 {
		t.Errorf("%d error lines for one refused set seen three times, want 1: %s", n, log.String())
	}
	if !strings.Contains(log.String(), `"left_out":["c","d"]`) || !strings.Contains(log.String(), `"partitions":160`) {
		t.Errorf("the error does not name the count and the topics left out: %s", log.String())
	}
	// b is deleted, c and d still match: still over (120); a stays alone.
	if got := c.admit([]string{"a", "c", "d"}, count); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("admit over the cap with an admitted topic gone = %v, want a", got)
	}
	if got := c.admit([]string{"a", "c"}, count); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("admit of a set that fits again = %v, want a, c", got)
	}
}
