package actors

import (
	"math/rand/v2"
	"testing"
)

// readBatch reads records of the given sizes the way the claim loops do: it
// takes up to max record credits, reads while the batch's bytes are below
// the room it saw, and settles. It returns how many records it read.
func readBatch(g *gate, max int, sizes []int64) int {
	n, room := g.take(max, 0)
	var used int64
	read := 0
	for read < n && read < len(sizes) && used < room {
		used += sizes[read]
		read++
	}
	g.settle(n, read, used, 0)
	return read
}

// The byte budget step by step: a share of 1,000 bytes and a record budget
// far larger, so only the bytes stop the reading.
func TestGateByteBudget(t *testing.T) {
	t.Parallel()
	type step struct {
		read   []int64 // sizes offered to a batch (nil: a record finishes)
		finish int64   // size of the record that finishes
		want   int     // records the batch reads
		avail  int64   // byte credits after the step
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"small records until the share is used", []step{
			// The third record overshoots: read, then nothing more.
			{read: []int64{400, 400, 400, 400}, want: 3, avail: -200},
			{read: []int64{400}, want: 0, avail: -200},
			{finish: 400, avail: 200},
			{read: []int64{400, 400}, want: 1, avail: -200},
		}},
		{"a share used to the byte stops the batch", []step{
			{read: []int64{1000, 1}, want: 1, avail: 0},
			{read: []int64{1}, want: 0, avail: 0},
		}},
		{"a record larger than the whole share is read, alone", []step{
			{read: []int64{5000, 1}, want: 1, avail: -4000},
			{read: []int64{1}, want: 0, avail: -4000},
			// Once it finished the whole share is back.
			{finish: 5000, avail: 1000},
			{read: []int64{10, 10, 10}, want: 3, avail: 970},
		}},
		{"after small ones, an oversize record is read while any credit is left", []step{
			{read: []int64{999}, want: 1, avail: 1},
			{read: []int64{5000, 1}, want: 1, avail: -4999},
			{finish: 999, avail: -4000},
			{read: []int64{1}, want: 0, avail: -4000},
			{finish: 5000, avail: 1000},
		}},
		{"empty records cost no bytes", []step{
			{read: []int64{0, 0, 0}, want: 3, avail: 1000},
			{read: []int64{0, 0, 0}, want: 3, avail: 1000},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newGate(1000, 1000)
			for i, s := range c.steps {
				if s.read != nil {
					if got := readBatch(g, 100, s.read); got != s.want {
						t.Fatalf("step %d: read %d of %v, want %d", i, got, s.read, s.want)
					}
				} else {
					g.release(1, s.finish)
				}
				if got := g.availableBytes(); got != s.avail {
					t.Fatalf("step %d: %d byte credits, want %d", i, got, s.avail)
				}
			}
		})
	}
}

// A claim stopped by bytes (not by records) pauses at once; one stopped by
// records, or held, does not count as out of bytes.
func TestGateOutOfBytes(t *testing.T) {
	t.Parallel()
	g := newGate(10, 100)
	g.take(10, 0)
	if g.outOfBytes() {
		t.Fatal("out of bytes with 100 byte credits")
	}
	g.settle(10, 1, 150, 1)
	if !g.outOfBytes() {
		t.Fatal("not out of bytes with -50 byte credits and 9 record credits")
	}
	g.setLimit(0, 0) // offset 1 is past it
	if g.outOfBytes() {
		t.Fatal("a gate past its limit is out of reading, not of bytes")
	}
	g = newGate(10, 100)
	g.take(10, 0)
	if g.outOfBytes() {
		t.Fatal("out of records too: the record budget's rule (pause after a while) applies")
	}
}

// The wake signal needs a quarter of both budgets free.
func TestGateWakesOnAQuarterOfBothBudgets(t *testing.T) {
	t.Parallel()
	g := newGate(100, 1000)
	g.take(100, 0)
	g.settle(100, 100, 1000, 0)
	g.release(50, 100) // half the records, a tenth of the bytes
	select {
	case <-g.wake:
		t.Fatal("woke with 100 of 1000 byte credits free")
	default:
	}
	g.release(0, 150)
	select {
	case <-g.wake:
	default:
		t.Fatal("did not wake with half the records and a quarter of the bytes free")
	}
}

// TestGateModel drives a gate as a claim and the coordinator do — the claim
// takes record credits, reads records of random sizes (some larger than the
// whole share) within the byte room it saw, settles, and waits for the wake
// signal when it gets none; the coordinator finishes records in
// any order; the proxy resizes the shares — and checks it against a naive
// model (the list of records in flight) at every step:
//   - credits are conserved: available = share − in flight, for records and bytes;
//   - the records in the pipeline are those in flight, whatever the credits;
//   - a record is read only while the bytes in flight are below the share, so
//     they never exceed it by more than the one record that overshoots;
//   - never stuck: with nothing in flight the claim always gets credits, and a
//     claim waiting for credits has a wake signal once everything finished.
func TestGateModel(t *testing.T) {
	t.Parallel()
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
			if got, want := g.inPipeline(), len(inFlight); got != want {
				t.Fatalf("seed %d step %d (%s): %d records in the pipeline, want %d", seed, step, what, got, want)
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
				n, room := g.take(1+rng.IntN(8), 0)
				if n == 0 {
					if len(inFlight) == 0 {
						t.Fatalf("seed %d step %d: no credits with nothing in flight (share %d, %d bytes)", seed, step, share, shareBytes)
					}
					waiting = true
					continue
				}
				if room != shareBytes-bytesInFlight {
					t.Fatalf("seed %d step %d: room %d, want %d", seed, step, room, shareBytes-bytesInFlight)
				}
				read := 0
				var used int64
				for read < n && used < room {
					s := size()
					inFlight = append(inFlight, s)
					bytesInFlight += s
					used += s
					read++
				}
				if bytesInFlight-inFlight[len(inFlight)-1] >= shareBytes {
					t.Fatalf("seed %d step %d: read a record with %d bytes in flight, share %d", seed, step, bytesInFlight-inFlight[len(inFlight)-1], shareBytes)
				}
				g.settle(n, read, used, 0)
				check(step, "read")
			case op < 9: // a record finishes
				if len(inFlight) == 0 {
					continue
				}
				i := rng.IntN(len(inFlight))
				s := inFlight[i]
				inFlight = append(inFlight[:i], inFlight[i+1:]...)
				bytesInFlight -= s
				g.release(1, s)
				check(step, "finish")
			default: // partitions come or go: new shares
				share, shareBytes = 1+rng.IntN(20), int64(1+rng.IntN(4000))
				g.resize(share, shareBytes)
				check(step, "resize")
			}
		}
		// Everything finishes: a waiting claim is woken and reads again.
		for _, s := range inFlight {
			g.release(1, s)
		}
		if n := g.inPipeline(); n != 0 {
			t.Fatalf("seed %d: %d records in the pipeline once everything finished", seed, n)
		}
		if waiting {
			select {
			case <-g.wake:
			default:
				t.Fatalf("seed %d: a claim waiting for credits got no wake signal once everything finished", seed)
			}
		}
		if n, _ := g.take(1, 0); n != 1 {
			t.Fatalf("seed %d: take(1) = %d with nothing in flight", seed, n)
		}
	}
}

// The watermark window's limit stops reading past it whatever the credits,
// and a claim it stopped is woken only once the limit is slack past what it
// read.
func TestGateLimit(t *testing.T) {
	t.Parallel()
	g := newGate(100, 1<<20)
	g.setLimit(50, 20)
	<-g.wake // a fresh gate is far below its limit
	n, _ := g.take(10, 0)
	g.settle(n, n, 10, 40) // read 30–39
	if n != 10 {
		t.Fatalf("took %d, want 10", n)
	}
	if n, _ := g.take(20, 0); n != 20 {
		t.Fatalf("below the limit: took %d, want 20", n)
	}
	g.settle(20, 20, 20, 60) // a batch may end past the limit
	if n, _ := g.take(10, 0); n != 0 {
		t.Fatalf("past the limit: took %d, want 0", n)
	}
	select { // settle's own wake (credits are free)
	case <-g.wake:
	default:
	}
	g.setLimit(70, 20) // the watermark crept: 60+20 > 70, no wake
	select {
	case <-g.wake:
		t.Fatal("woken with the limit only 10 past what was read")
	default:
	}
	if n, _ := g.take(5, 0); n != 5 {
		t.Fatalf("below the crept limit: took %d, want 5 (a claim woken by credits reads)", n)
	}
	g.settle(5, 5, 5, 65)
	select {
	case <-g.wake:
	default:
	}
	g.setLimit(100, 20) // the stuck record finished
	select {
	case <-g.wake:
	default:
		t.Fatal("not woken with the limit 35 past what was read")
	}
}

// The gate counts the records in the pipeline — what a partition shows as
// buffered — apart from its credits: a claim's credits taken and not used
// (unused, inherited records, a batch given back) are not records, and a
// record dropped unfinished leaves the count while its credit stays taken.
func TestGateCountsRecordsInThePipeline(t *testing.T) {
	t.Parallel()
	g := newGate(20, 1<<20)
	n, _ := g.take(10, 0)
	if got := g.inPipeline(); got != 0 {
		t.Fatalf("%d records in the pipeline with credits taken and nothing read, want 0", got)
	}
	g.settle(n, 7, 700, 10) // 3 unused (or inherited): their credits come back
	if got, avail := g.inPipeline(), g.available(); got != 7 || avail != 13 {
		t.Fatalf("after settling 7 of 10: %d in the pipeline, %d credits; want 7, 13", got, avail)
	}
	n, _ = g.take(5, 0)
	g.give(n) // read nothing (the consumer was paused meanwhile)
	if got, avail := g.inPipeline(), g.available(); got != 7 || avail != 13 {
		t.Fatalf("after a batch given back: %d in the pipeline, %d credits; want 7, 13", got, avail)
	}
	g.release(2, 200) // finished
	g.discard(3)      // dropped with a revocation: credits stay taken
	if got, avail, bytes := g.inPipeline(), g.available(), g.availableBytes(); got != 2 || avail != 15 || bytes != 1<<20-500 {
		t.Fatalf("after 2 finished and 3 dropped: %d in the pipeline, %d credits, %d bytes; want 2, 15, %d", got, avail, bytes, 1<<20-500)
	}
	g.watch.running.Store(1)
	if st := g.stats(TopicPartition{}); st.InFlight != 1 || st.Buffered != 1 {
		t.Fatalf("stats %+v: want 1 in flight, 1 buffered", st)
	}
}
