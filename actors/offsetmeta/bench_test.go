package offsetmeta

import (
	"math/rand/v2"
	"testing"
)

// benchRanges returns n scattered ranges of 1 to 3 offsets above
// committed, 1 to maxGap unfinished offsets apart, as turbo sees with a few
// slow records holding the watermark while others finish around them.
func benchRanges(committed int64, n int, maxGap int64) []Range {
	rng := rand.New(rand.NewPCG(9, 9))
	rs := make([]Range, n)
	next := committed + 1
	for i := range rs {
		from := next + 1 + rng.Int64N(maxGap)
		rs[i] = Range{from, from + rng.Int64N(3)}
		next = rs[i].To + 1
	}
	return rs
}

func benchEncode(b *testing.B, ranges []Range, budget int) {
	b.ReportAllocs()
	var meta string
	var n int
	for b.Loop() {
		meta, n, _ = Encode(1_000_000, ranges, budget)
	}
	b.ReportMetric(float64(n), "ranges/op")
	b.ReportMetric(float64(len(meta)), "bytes/op")
}

// BenchmarkEncode encodes 1,000 scattered ranges, gaps up to 2000, into
// 4000 bytes; they all fit.
func BenchmarkEncode(b *testing.B) {
	benchEncode(b, benchRanges(1_000_000, 1000, 2000), 4000)
}

// BenchmarkEncodePrefix encodes 1,000 ranges scattered more widely, gaps up
// to 2^20, into 4000 bytes; only a prefix fits, so this includes the search
// with compression.
func BenchmarkEncodePrefix(b *testing.B) {
	benchEncode(b, benchRanges(1_000_000, 1000, 1<<20), 4000)
}

// BenchmarkEncodeScattered10k encodes 10,000 finished offsets scattered
// over 100,000 into 4000 bytes, the densest case of TestBudgetScattered
// that does not fit whole.
func BenchmarkEncodeScattered10k(b *testing.B) {
	rng := rand.New(rand.NewPCG(42, 100_000))
	benchEncode(b, fromOffsets(scattered(rng, 1_000_000, 10_000, 100_000)), 4000)
}

// BenchmarkDecode decodes what BenchmarkEncode writes.
func BenchmarkDecode(b *testing.B) {
	meta, _, err := Encode(1_000_000, benchRanges(1_000_000, 1000, 2000), 4000)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(1_000_000, meta); err != nil {
			b.Fatal(err)
		}
	}
}
