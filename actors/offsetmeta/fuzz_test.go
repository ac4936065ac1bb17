package offsetmeta

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// fuzzSeeds returns valid metadata of every kind with the committed offset
// it was written for.
func fuzzSeeds() map[string]int64 {
	rng := rand.New(rand.NewPCG(11, 12))
	seeds := map[string]int64{}
	add := func(committed int64, rs []Range) {
		meta, _, err := Encode(committed, rs, 4096)
		if err != nil {
			panic(err)
		}
		seeds[meta] = committed
	}
	add(0, []Range{{1, 1}})
	add(-1, []Range{{0, 3}, {5, 5}})
	add(1000, []Range{{1002, 1004}, {2000, 2000}})
	add(1000, []Range{{1002, 1004}, {1010, 1010}})
	add(math.MaxInt64-10, []Range{{math.MaxInt64 - 5, math.MaxInt64}})
	add(1<<40, fromOffsets(scattered(rng, 1<<40, 300, 3000)))
	add(500, fromOffsets(scattered(rng, 500, 400, 100_000)))
	var periodic []Range
	for i := range int64(100) {
		periodic = append(periodic, Range{1000*i + 1, 1000*i + 10})
	}
	add(0, periodic)
	return seeds
}

// checkFuzzResult checks what Decode promises for any input, and that what
// it accepts encodes back to the same offsets.
func checkFuzzResult(t *testing.T, committed int64, meta string, rs []Range, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrForeign) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrStale) {
			t.Fatalf("Decode(%d, %q) error %v wraps no sentinel", committed, meta, err)
		}
		if rs != nil {
			t.Fatalf("Decode(%d, %q) returned ranges with error %v", committed, meta, err)
		}
		return
	}
	if err := checkDecoded(committed, rs); err != nil {
		t.Fatalf("Decode(%d, %q) = %v: %v", committed, meta, rs, err)
	}
	again, n, err := Encode(committed, rs, math.MaxInt)
	if err != nil || n != len(rs) {
		t.Fatalf("Encode(Decode(%d, %q)) = %d of %d ranges, %v", committed, meta, n, len(rs), err)
	}
	if back, err := Decode(committed, again); err != nil || !slices.Equal(back, rs) {
		t.Fatalf("re-encoded %q decodes to %v, %v; want %v", again, back, err, rs)
	}
}

// FuzzDecode feeds Decode arbitrary metadata and committed offsets.
func FuzzDecode(f *testing.F) {
	for meta, committed := range fuzzSeeds() {
		f.Add(committed, meta)
		f.Add(committed+1, meta)
		f.Add(committed, meta[:len(meta)/2])
		b := []byte(meta)
		b[len(b)-1] ^= 1
		f.Add(committed, string(b))
		f.Add(committed, "tb2:"+meta[len(prefix):])
	}
	f.Add(int64(0), "")
	f.Add(int64(0), "hello")
	f.Add(int64(0), `{"a":1}`)
	f.Add(int64(0), "tb1:")
	f.Add(int64(0), "tb1:\n")
	f.Fuzz(func(t *testing.T, committed int64, meta string) {
		rs, err := Decode(committed, meta)
		checkFuzzResult(t, committed, meta, rs, err)
	})
}

// FuzzDecodeBody feeds the payload parsers arbitrary bytes behind a valid
// prefix, header and checksum, which random metadata almost never reaches:
// FuzzDecode's mutations mostly fail the checksum.
func FuzzDecodeBody(f *testing.F) {
	for meta, committed := range fuzzSeeds() {
		body, err := b64.DecodeString(meta[len(prefix):])
		if err != nil {
			f.Fatal(err)
		}
		// Skip the varint committed offset; keep kind and payload.
		i := 0
		for body[i]&0x80 != 0 {
			i++
		}
		f.Add(committed, body[i+1], body[i+2:len(body)-crcLen])
	}
	f.Add(int64(7), byte(kindRangesFlate), bomb(1000))
	f.Add(int64(7), byte(kindBitmapFlate), deflate([]byte{0xff, 0x01}, 1))
	f.Fuzz(func(t *testing.T, committed int64, kind byte, payload []byte) {
		meta := makeMeta(committed, kind, payload)
		rs, err := Decode(committed, meta)
		if errors.Is(err, ErrForeign) || errors.Is(err, ErrStale) {
			t.Fatalf("Decode(%d, %q) = %v for a valid header", committed, meta, err)
		}
		checkFuzzResult(t, committed, meta, rs, err)
	})
}
