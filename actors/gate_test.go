package actors

import (
	"math/rand/v2"
	"testing"
)

// The byte budget step by step: a share of 1,000 bytes and a record budget
// far larger, so only the bytes stop the reading.
func TestGateByteBudget(t *testing.T) {
	type step struct {
		op    string // take, charge, give
		n     int
		bytes int64
		want  int   // take: credits taken; charge: 1 if more may be read
		avail int64 // byte credits after the step
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"small records until the share is used", []step{
			{op: "take", n: 100, want: 100, avail: 1000},
			{op: "charge", bytes: 400, want: 1, avail: 600},
			{op: "charge", bytes: 400, want: 1, avail: 200},
			// The last record overshoots: read, then nothing more.
			{op: "charge", bytes: 400, want: 0, avail: -200},
			{op: "give", n: 97, avail: -200}, // unused record credits back
			{op: "take", n: 100, want: 0, avail: -200},
			{op: "give", n: 1, bytes: 400, avail: 200},
			{op: "take", n: 100, want: 100, avail: 200},
		}},
		{"a share used to the byte stops the batch", []step{
			{op: "take", n: 10, want: 10, avail: 1000},
			{op: "charge", bytes: 1000, want: 0, avail: 0},
			{op: "give", n: 9, avail: 0},
			{op: "take", n: 10, want: 0, avail: 0},
		}},
		{"a record larger than the whole share is read, alone", []step{
			{op: "take", n: 10, want: 10, avail: 1000},
			{op: "charge", bytes: 5000, want: 0, avail: -4000},
			{op: "give", n: 9, avail: -4000},
			{op: "take", n: 10, want: 0, avail: -4000},
			// Once it finished the whole share is back.
			{op: "give", n: 1, bytes: 5000, avail: 1000},
			{op: "take", n: 10, want: 10, avail: 1000},
		}},
		{"empty records cost no bytes", []step{
			{op: "take", n: 3, want: 3, avail: 1000},
			{op: "charge", bytes: 0, want: 1, avail: 1000},
			{op: "charge", bytes: 0, want: 1, avail: 1000},
			{op: "charge", bytes: 0, want: 1, avail: 1000},
			{op: "take", n: 3, want: 3, avail: 1000},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newGate(1000, 1000)
			for i, s := range c.steps {
				switch s.op {
				case "take":
					if got := g.take(s.n); got != s.want {
						t.Fatalf("step %d: take(%d) = %d, want %d", i, s.n, got, s.want)
					}
				case "charge":
					more := g.charge(s.bytes)
					if more != (s.want == 1) {
						t.Fatalf("step %d: charge(%d) = %v, want %v", i, s.bytes, more, s.want == 1)
					}
				case "give":
					g.give(s.n, s.bytes)
				}
				if got := g.availableBytes(); got != s.avail {
					t.Fatalf("step %d (%s): %d byte credits, want %d", i, s.op, got, s.avail)
				}
			}
		})
	}
}

// A claim stopped by bytes (not by records) pauses at once; one stopped by
// records, or held, does not count as out of bytes.
func TestGateOutOfBytes(t *testing.T) {
	g := newGate(10, 100)
	g.take(10)
	if g.outOfBytes() {
		t.Fatal("out of bytes with 100 byte credits")
	}
	g.charge(150)
	g.give(9, 0)
	if !g.outOfBytes() {
		t.Fatal("not out of bytes with -50 byte credits and 9 record credits")
	}
	g.hold(true)
	if g.outOfBytes() {
		t.Fatal("a held gate is out of reading, not of bytes")
	}
	g = newGate(10, 100)
	g.take(10)
	if g.outOfBytes() {
		t.Fatal("out of records too: the record budget's rule (pause after a while) applies")
	}
}

// The wake signal needs a quarter of both budgets free.
func TestGateWakesOnAQuarterOfBothBudgets(t *testing.T) {
	g := newGate(100, 1000)
	g.take(100)
	g.charge(1000)
	g.give(50, 100) // half the records, a tenth of the bytes
	select {
	case <-g.wake:
		t.Fatal("woke with 100 of 1000 byte credits free")
	default:
	}
	g.give(0, 150)
	select {
	case <-g.wake:
	default:
		t.Fatal("did not wake with half the records and a quarter of the bytes free")
	}
}

// TestGateModel drives a gate as a claim and the coordinator do — the claim
// takes record credits, reads records of random sizes (some larger than the
// whole share) charging each, returns the credits it did not use and waits
// for the wake signal when it gets none; the coordinator finishes records in
// any order; the proxy resizes the shares — and checks it against a naive
// model (the list of records in flight) at every step:
//   - credits are conserved: available = share − in flight, for records and bytes;
//   - a record is read only while the bytes in flight are below the share, so
//     they never exceed it by more than the one record that overshoots;
//   - never stuck: with nothing in flight the claim always gets credits, and a
//     claim waiting for credits has a wake signal once everything finished.
func TestGateModel(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		share, shareBytes := 1+rng.IntN(20), int64(1+rng.IntN(4000))
		g := newGate(share, shareBytes)
		var inFlight []int64 // sizes
		var bytesInFlight int64
		waiting := false // the claim got no credits and waits for wake
		check := func(step int, what string) {
			t.Helper()
			if got, want := g.available(), share-len(inFlight); got != want {
				t.Fatalf("seed %d step %d (%s): %d record credits, want %d", seed, step, what, got, want)
			}
			if got, want := g.availableBytes(), shareBytes-bytesInFlight; got != want {
				t.Fatalf("seed %d step %d (%s): %d byte credits, want %d", seed, step, what, got, want)
			}
		}
		size := func() int64 {
			if rng.IntN(10) == 0 {
				return shareBytes + int64(rng.IntN(10000)) // larger than the whole share
			}
			return int64(rng.IntN(int(shareBytes)/3 + 2))
		}
		for step := range 2000 {
			switch op := rng.IntN(10); {
			case op < 5: // the claim reads a batch
				if waiting {
					select {
					case <-g.wake:
						waiting = false
					default:
						continue // still waiting
					}
				}
				n := g.take(1 + rng.IntN(8))
				if n == 0 {
					if len(inFlight) == 0 {
						t.Fatalf("seed %d step %d: no credits with nothing in flight (share %d, %d bytes)", seed, step, share, shareBytes)
					}
					waiting = true
					continue
				}
				read := 0
				for read < n {
					if bytesInFlight >= shareBytes {
						t.Fatalf("seed %d step %d: reading a record with %d bytes in flight, share %d", seed, step, bytesInFlight, shareBytes)
					}
					s := size()
					inFlight = append(inFlight, s)
					bytesInFlight += s
					read++
					if !g.charge(s) {
						break
					}
				}
				g.give(n-read, 0)
				check(step, "read")
			case op < 9: // a record finishes
				if len(inFlight) == 0 {
					continue
				}
				i := rng.IntN(len(inFlight))
				s := inFlight[i]
				inFlight = append(inFlight[:i], inFlight[i+1:]...)
				bytesInFlight -= s
				g.give(1, s)
				check(step, "finish")
			default: // partitions come or go: new shares
				share, shareBytes = 1+rng.IntN(20), int64(1+rng.IntN(4000))
				g.resize(share, shareBytes)
				check(step, "resize")
			}
		}
		// Everything finishes: a waiting claim is woken and reads again.
		for _, s := range inFlight {
			g.give(1, s)
		}
		if waiting {
			select {
			case <-g.wake:
			default:
				t.Fatalf("seed %d: a claim waiting for credits got no wake signal once everything finished", seed)
			}
		}
		if n := g.take(1); n != 1 {
			t.Fatalf("seed %d: take(1) = %d with nothing in flight", seed, n)
		}
	}
}
