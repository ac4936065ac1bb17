package web

import (
	"crypto/sha256"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestWrongTokensTakeTheSameTime: a wrong token that differs from the
// right one at its first byte and one that differs only at its last take
// the same time to refuse, so that timing refusals tells a client guessing
// tokens nothing about how much of one it got right. With a 4 KiB token, a
// check comparing the tokens themselves until the first difference would
// take tens of times longer for the second.
//
// Timing is noisy on a shared machine, so the two are measured in turns,
// in many small rounds, and their medians compared with a wide margin: a
// constant-time check lands near 1.0, an early-exit one far off it.
func TestWrongTokensTakeTheSameTime(t *testing.T) {
	right := strings.Repeat("k", 4096)
	want := sha256.Sum256([]byte(right))
	early := "x" + right[1:]           // wrong at the first byte
	late := right[:len(right)-1] + "x" // wrong at the last
	if tokenMatches(want, early) || tokenMatches(want, late) || !tokenMatches(want, right) {
		t.Fatal("tokenMatches lets a wrong token in, or refuses the right one")
	}
	const rounds, per = 301, 50
	round := func(tok string) time.Duration {
		start := time.Now()
		for range per {
			tokenMatches(want, tok)
		}
		return time.Since(start)
	}
	var a, b []time.Duration
	for i := range rounds {
		if i%2 == 0 { // alternate which goes first
			a, b = append(a, round(early)), append(b, round(late))
		} else {
			b, a = append(b, round(late)), append(a, round(early))
		}
	}
	slices.Sort(a)
	slices.Sort(b)
	ma, mb := a[rounds/2], b[rounds/2]
	ratio := float64(mb) / float64(ma)
	t.Logf("FIGURES token refusal: median %v per %d checks of a token wrong at the first byte, %v wrong at the last (ratio %.3f)", ma, per, mb, ratio)
	if ratio < 0.8 || ratio > 1.25 {
		t.Fatalf("refusing a token wrong at the last byte takes %.2f× as long as one wrong at the first (medians %v, %v): the check is not constant-time", ratio, mb, ma)
	}
}
