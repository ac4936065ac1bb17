package offsetmeta

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors/internal/modeltest"
)

// kindOf returns the kind byte of a metadata string Encode wrote.
func kindOf(t testing.TB, meta string) int {
	t.Helper()
	text, ok := strings.CutPrefix(meta, prefix)
	if !ok {
		t.Fatalf("metadata %q lacks prefix %q", meta, prefix)
	}
	body, err := b64.DecodeString(text)
	if err != nil {
		t.Fatalf("metadata %q: %v", meta, err)
	}
	_, n := binary.Varint(body)
	if n <= 0 || n >= len(body) {
		t.Fatalf("metadata %q: bad header", meta)
	}
	return int(body[n])
}

// makeMeta builds metadata around an arbitrary kind and payload with a valid
// checksum, to reach the payload parsers with crafted input.
func makeMeta(committed int64, kind byte, payload []byte) string {
	body := binary.AppendVarint(nil, committed)
	body = append(body, kind)
	body = append(body, payload...)
	body = binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	return prefix + b64.EncodeToString(body)
}

// normalize merges adjacent ranges, giving the form Decode returns.
func normalize(rs []Range) []Range {
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && r.From == out[n-1].To+1 {
			out[n-1].To = r.To
			continue
		}
		out = append(out, r)
	}
	return out
}

// fromOffsets turns ascending distinct offsets into ranges, one per offset,
// so adjacent offsets give adjacent ranges as a caller might pass them.
func fromOffsets(offsets []int64) []Range {
	rs := make([]Range, len(offsets))
	for i, o := range offsets {
		rs[i] = Range{o, o}
	}
	return rs
}

// scattered returns n distinct random offsets in committed+1..committed+window,
// ascending.
func scattered(rng *rand.Rand, committed int64, n, window int) []int64 {
	seen := make(map[int64]bool, n)
	for len(seen) < n {
		seen[committed+1+rng.Int64N(int64(window))] = true
	}
	out := make([]int64, 0, n)
	for o := range seen {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

// checkDecoded verifies the invariants every successful Decode promises.
func checkDecoded(committed int64, rs []Range) error {
	if len(rs) == 0 || len(rs) > maxRanges {
		return fmt.Errorf("%d ranges", len(rs))
	}
	for i, r := range rs {
		switch {
		case r.From > r.To:
			return fmt.Errorf("range %d %v: From > To", i, r)
		case r.From <= committed:
			return fmt.Errorf("range %d %v: not above %d", i, r, committed)
		case i > 0 && r.From <= rs[i-1].To+1:
			return fmt.Errorf("range %d %v: not above and apart from %v", i, r, rs[i-1])
		case uint64(r.To)-uint64(committed) > maxSpan:
			return fmt.Errorf("range %d %v: span over %d above %d", i, r, uint64(maxSpan), committed)
		}
	}
	return nil
}

// roundTrip encodes and decodes, checking what every Encode promises.
func roundTrip(t *testing.T, committed int64, ranges []Range, budget int) (string, int) {
	t.Helper()
	meta, n, err := Encode(committed, ranges, budget)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if len(meta) > budget {
		t.Fatalf("metadata of %d bytes over budget %d", len(meta), budget)
	}
	if n < 0 || n > len(ranges) {
		t.Fatalf("encoded %d of %d ranges", n, len(ranges))
	}
	got, err := Decode(committed, meta)
	if n == 0 {
		if meta != "" || !errors.Is(err, ErrForeign) {
			t.Fatalf("nothing encoded but metadata %q, Decode error %v", meta, err)
		}
		return meta, n
	}
	if err != nil {
		t.Fatalf("Decode(%q): %v", meta, err)
	}
	if want := normalize(ranges[:n]); !slices.Equal(got, want) {
		t.Fatalf("Decode = %v, want %v", got, want)
	}
	return meta, n
}

// checkLongest checks that the encoded prefix of n ranges cannot grow by one:
// the next range fits in no kind, or is beyond the format's limits. (Only one
// more: DEFLATE output is not strictly monotone in its input, so a longer
// prefix may in rare cases be a few bytes shorter.)
func checkLongest(t *testing.T, committed int64, ranges []Range, n, budget int) {
	t.Helper()
	if n == len(ranges) {
		return
	}
	e := newEncoder(committed, ranges)
	if kind, _ := e.choose(n+1, bodyBudget(budget), smallest); n < e.limit() && kind >= 0 {
		t.Fatalf("encoded %d ranges, but %d fit in %d bytes", n, n+1, budget)
	}
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var dense []int64
	for o := int64(1001); o <= 9000; o++ {
		if rng.IntN(2) == 0 {
			dense = append(dense, o)
		}
	}
	var sparse []Range
	for o := int64(1 << 20); len(sparse) < 50; o += 1 + rng.Int64N(1<<20) {
		sparse = append(sparse, Range{o, o + rng.Int64N(3)})
		o += 3
	}
	half := int64(math.MaxInt64 / 2)
	tests := []struct {
		name      string
		committed int64
		ranges    []Range
		kind      int // expected kind, or -1 for any
	}{
		{"one offset", 100, []Range{{101, 101}}, -1},
		{"one range", 100, []Range{{105, 110}}, -1},
		{"adjacent", 10, []Range{{11, 12}, {13, 15}, {17, 17}, {18, 18}}, -1},
		{"dense", 1000, fromOffsets(dense), kindBitmap},
		{"sparse", 1 << 19, sparse, kindRanges},
		{"large offsets", half, []Range{{half + 1, half + 5}, {half + 1000, half + 1<<20}, {half + 1<<31, half + 1<<31}}, -1},
		{"up to MaxInt64", math.MaxInt64 - 10, []Range{{math.MaxInt64 - 8, math.MaxInt64 - 8}, {math.MaxInt64 - 1, math.MaxInt64}}, -1},
		{"committed -1", -1, []Range{{0, 0}, {2, 5}}, -1},
		{"committed 0", 0, []Range{{1, 3}, {7, 7}}, -1},
		{"committed MinInt64", math.MinInt64, []Range{{math.MinInt64 + 1, math.MinInt64 + 3}}, -1},
		{"span limit exactly", 0, []Range{{1, 1}, {maxSpan, maxSpan}}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta, n := roundTrip(t, tt.committed, tt.ranges, 1<<20)
			if n != len(tt.ranges) {
				t.Fatalf("encoded %d of %d ranges", n, len(tt.ranges))
			}
			kind := kindOf(t, meta)
			t.Logf("%d ranges: kind %d, %d bytes", len(tt.ranges), kind, len(meta))
			if tt.kind >= 0 && kind != tt.kind {
				t.Fatalf("kind %d, want %d", kind, tt.kind)
			}
		})
	}
}

func TestNoRanges(t *testing.T) {
	for _, rs := range [][]Range{nil, {}} {
		meta, n, err := Encode(5, rs, 4096)
		if meta != "" || n != 0 || err != nil {
			t.Fatalf("Encode(no ranges) = %q, %d, %v", meta, n, err)
		}
	}
	if _, err := Decode(5, ""); !errors.Is(err, ErrForeign) {
		t.Fatalf("Decode(\"\") error %v, want ErrForeign", err)
	}
}

// TestGolden pins the wire format: other processes read it.
func TestGolden(t *testing.T) {
	withCRC := func(body ...byte) string {
		body = binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
		return "tb1:" + b64.EncodeToString(body)
	}
	tests := []struct {
		name   string
		ranges []Range
		want   string
	}{
		// Relative offsets 2..4 and 15: bitmap 0b00001110, 0b01000000.
		{"bitmap", []Range{{7, 9}, {20, 20}}, withCRC(0x0a, kindBitmap, 0x0e, 0x40)},
		// Count 2; gap 1 (from 1+1=2), length 2 (to 4); gap 989 (from 4+2+989=995), length 0.
		{"ranges", []Range{{7, 9}, {1000, 1000}}, withCRC(0x0a, kindRanges, 0x02, 0x01, 0x02, 0xdd, 0x07, 0x00)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta, n, err := Encode(5, tt.ranges, 4096)
			if err != nil || n != len(tt.ranges) {
				t.Fatalf("Encode = %q, %d, %v", meta, n, err)
			}
			if meta != tt.want {
				t.Fatalf("Encode = %q, want %q", meta, tt.want)
			}
		})
	}
}

// TestBudgetScattered records 10,000 scattered finished offsets, more than
// fit, and checks the prefix contract at several budgets and densities.
func TestBudgetScattered(t *testing.T) {
	const committed = 1_000_000
	for _, window := range []int{20_000, 100_000, 1_000_000} {
		rng := rand.New(rand.NewPCG(42, uint64(window)))
		ranges := fromOffsets(scattered(rng, committed, 10_000, window))
		for _, budget := range []int{4096, 4000, 1000, 100} {
			t.Run(fmt.Sprintf("window=%d/budget=%d", window, budget), func(t *testing.T) {
				meta, n := roundTrip(t, committed, ranges, budget)
				if len(meta) > 4096 {
					t.Fatalf("metadata of %d bytes", len(meta))
				}
				// The densest window fits whole in a few KB, as a bitmap
				// of 20,000 bits; the others only in part.
				if n == 0 || (n == len(ranges) && (window > 20_000 || budget < 4000)) {
					t.Fatalf("encoded %d of %d offsets, want a proper prefix", n, len(ranges))
				}
				checkLongest(t, committed, ranges, n, budget)
				t.Logf("10,000 offsets in a window of %d: %d offsets (%d runs) fit in %d bytes, kind %d, up to offset committed+%d",
					window, n, len(normalize(ranges[:n])), len(meta), kindOf(t, meta), ranges[n-1].To-committed)
			})
		}
	}
}

// TestEverythingFits: mostly contiguous offsets compress to a few bytes.
func TestEverythingFits(t *testing.T) {
	const committed = 500
	var offsets []int64
	for o := int64(committed + 2); len(offsets) < 10_000; o++ {
		if o%100 != 0 {
			offsets = append(offsets, o)
		}
	}
	ranges := fromOffsets(offsets)
	meta, n := roundTrip(t, committed, ranges, 4096)
	if n != len(ranges) {
		t.Fatalf("encoded %d of %d", n, len(ranges))
	}
	if len(meta) > 100 {
		t.Fatalf("metadata of %d bytes for a regular pattern", len(meta))
	}
	t.Logf("10,000 offsets in %d runs: %d bytes, kind %d: %s", len(normalize(ranges)), len(meta), kindOf(t, meta), meta)
}

func TestBudgetTooSmall(t *testing.T) {
	ranges := []Range{{1, 1}, {3, 3}}
	for _, budget := range []int{math.MinInt, -1, 0, 1, len(prefix), len(prefix) + 1} {
		if meta, n, err := Encode(0, ranges, budget); meta != "" || n != 0 || err != nil {
			t.Fatalf("Encode(budget %d) = %q, %d, %v", budget, meta, n, err)
		}
	}
	// The smallest budget that fits one range is used exactly.
	for budget := 0; ; budget++ {
		meta, n := roundTrip(t, 0, ranges[:1], budget)
		if n > 0 {
			if len(meta) != budget {
				t.Fatalf("first fitting budget %d, metadata of %d bytes", budget, len(meta))
			}
			t.Logf("one range needs %d bytes: %s", budget, meta)
			break
		}
	}
	if _, n := roundTrip(t, 0, ranges, math.MaxInt); n != 2 {
		t.Fatalf("encoded %d of 2 with an unlimited budget", n)
	}
}

// TestLimits: Encode stops its prefix at the format's limits, which Decode
// would reject.
func TestLimits(t *testing.T) {
	t.Run("span", func(t *testing.T) {
		ranges := []Range{{0, 0}, {maxSpan - 1, maxSpan - 1}, {maxSpan, maxSpan}, {maxSpan + 5, maxSpan + 5}}
		if _, n := roundTrip(t, -1, ranges, 4096); n != 2 {
			t.Fatalf("encoded %d, want 2 within the span limit", n)
		}
		if _, n := roundTrip(t, -1, []Range{{0, math.MaxInt64}}, 4096); n != 0 {
			t.Fatalf("encoded %d, want 0 for a range over the span limit", n)
		}
	})
	t.Run("ranges", func(t *testing.T) {
		ranges := make([]Range, maxRanges+10)
		for i := range ranges {
			ranges[i] = Range{int64(2*i + 1), int64(2*i + 1)}
		}
		// Alternating bits compress to almost nothing, so only the count
		// limit stops the prefix.
		meta, n := roundTrip(t, 0, ranges, 4096)
		if n != maxRanges {
			t.Fatalf("encoded %d, want the limit %d", n, maxRanges)
		}
		t.Logf("%d ranges in %d bytes, kind %d", n, len(meta), kindOf(t, meta))
	})
	t.Run("payload", func(t *testing.T) {
		// Incompressible sparse runs whose bitmap and range list are both
		// over maxPayload raw: the prefix stops where the raw payload
		// limit is reached even with a huge budget.
		rng := rand.New(rand.NewPCG(7, 7))
		var ranges []Range
		for o := int64(1); len(ranges) < 30_000; o += 2 + rng.Int64N(1<<14) {
			ranges = append(ranges, Range{o, o})
		}
		meta, n := roundTrip(t, 0, ranges, 1<<30)
		if n == len(ranges) {
			t.Fatalf("encoded all %d ranges", n)
		}
		checkLongest(t, 0, ranges, n, 1<<30)
		t.Logf("%d ranges within the payload limit, %d bytes, kind %d", n, len(meta), kindOf(t, meta))
	})
}

func TestEncodeInvalid(t *testing.T) {
	tests := []struct {
		name   string
		ranges []Range
	}{
		{"From > To", []Range{{12, 11}}},
		{"From == committed", []Range{{10, 11}}},
		{"From below committed", []Range{{5, 20}}},
		{"unsorted", []Range{{20, 21}, {12, 13}}},
		{"overlapping", []Range{{12, 15}, {15, 18}}},
		{"duplicate", []Range{{12, 12}, {12, 12}}},
		{"invalid after valid", []Range{{12, 12}, {14, 15}, {17, 16}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta, n, err := Encode(10, tt.ranges, 4096)
			if !errors.Is(err, ErrInvalidRanges) || meta != "" || n != 0 {
				t.Fatalf("Encode = %q, %d, %v; want ErrInvalidRanges", meta, n, err)
			}
			if !strings.HasPrefix(err.Error(), "offsetmeta: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestDecodeForeign(t *testing.T) {
	for _, meta := range []string{
		"", "hello", `{"owner":"other","ts":1712345678}`, "t", "tb", "tb1", "tb:", "tbx:AAAA", "TB1:AAAA",
		" tb1:AAAA", "tb1AAAA", "tb1234567890:AAAA", "\x00\xff",
	} {
		if rs, err := Decode(0, meta); !errors.Is(err, ErrForeign) {
			t.Errorf("Decode(%q) = %v, %v; want ErrForeign", meta, rs, err)
		}
	}
}

func TestDecodeCorrupt(t *testing.T) {
	const committed = 1000
	rng := rand.New(rand.NewPCG(3, 4))
	ranges := fromOffsets(scattered(rng, committed, 300, 5000))
	var periodic []Range
	for i := range int64(200) {
		periodic = append(periodic, Range{committed + 1000*i + 1, committed + 1000*i + 10})
	}
	var valid []string // one per kind
	for kind, rs := range [][]Range{
		{{1002, 1004}, {2000, 2000}},
		{{1002, 1004}, {1010, 1010}},
		periodic,
		ranges,
	} {
		meta, _, err := Encode(committed, rs, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if got := kindOf(t, meta); got != kind {
			t.Fatalf("kind %d, want %d", got, kind)
		}
		valid = append(valid, meta)
	}
	expectCorrupt := func(t *testing.T, meta string) {
		t.Helper()
		if rs, err := Decode(committed, meta); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode(%q) = %v, %v; want ErrCorrupt", meta, rs, err)
		}
	}
	t.Run("truncated", func(t *testing.T) {
		for _, meta := range valid {
			for cut := len(prefix); cut < len(meta); cut++ {
				expectCorrupt(t, meta[:cut])
			}
		}
	})
	t.Run("bit flipped", func(t *testing.T) {
		for _, meta := range valid {
			for i := len(prefix); i < len(meta); i++ {
				for bit := range 8 {
					b := []byte(meta)
					b[i] ^= 1 << bit
					expectCorrupt(t, string(b))
				}
			}
			// In the prefix a flip gives foreign or corrupt metadata,
			// never ranges.
			for i := range len(prefix) {
				for bit := range 8 {
					b := []byte(meta)
					b[i] ^= 1 << bit
					if _, err := Decode(committed, string(b)); !errors.Is(err, ErrForeign) && !errors.Is(err, ErrCorrupt) {
						t.Fatalf("Decode(%q) error %v", b, err)
					}
				}
			}
		}
	})
	t.Run("version", func(t *testing.T) {
		body := strings.TrimPrefix(valid[0], prefix)
		for _, v := range []string{"0", "2", "9", "01", "10", "123456789"} {
			expectCorrupt(t, "tb"+v+":"+body)
		}
	})
	t.Run("line break", func(t *testing.T) {
		body := strings.TrimPrefix(valid[0], prefix)
		expectCorrupt(t, prefix+body[:3]+"\n"+body[3:])
		expectCorrupt(t, prefix+body+"\r\n")
	})
	t.Run("crafted", func(t *testing.T) {
		deflated := func(p []byte) []byte { return deflate(p, 1) }
		bitmapAt := func(rel int) []byte {
			b := make([]byte, (rel+7)/8)
			b[(rel-1)/8] |= 1 << ((rel - 1) % 8)
			return b
		}
		uv := func(vs ...uint64) []byte {
			var b []byte
			for _, v := range vs {
				b = binary.AppendUvarint(b, v)
			}
			return b
		}
		for _, tt := range []struct {
			name    string
			kind    byte
			payload []byte
		}{
			{"unknown kind 4", 4, []byte{0x01}},
			{"unknown kind 255", 255, []byte{0x01}},
			{"no kind", 0, nil}, // replaced below: header only
			{"ranges empty payload", kindRanges, nil},
			{"ranges count 0", kindRanges, uv(0)},
			{"ranges count over payload", kindRanges, uv(3, 0, 0)},
			{"ranges count over limit", kindRanges, append(uv(maxRanges+1), make([]byte, 2*maxRanges+2)...)},
			{"ranges truncated varint", kindRanges, []byte{0x01, 0x80, 0x80}},
			{"ranges overlong varint", kindRanges, append(uv(1), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00)},
			{"ranges trailing bytes", kindRanges, uv(1, 0, 0, 0)},
			{"ranges gap over span", kindRanges, uv(1, maxSpan, 0)},
			{"ranges length over span", kindRanges, uv(1, 0, maxSpan)},
			{"ranges huge gap", kindRanges, uv(1, math.MaxUint64, 0)},
			{"ranges sum over span", kindRanges, uv(2, maxSpan/2, 0, maxSpan/2, 0)},
			{"ranges payload over limit", kindRanges, append(uv(maxPayload/2), make([]byte, maxPayload)...)},
			{"bitmap empty", kindBitmap, nil},
			{"bitmap trailing zero", kindBitmap, []byte{0x01, 0x00}},
			{"bitmap all zero", kindBitmap, []byte{0x00}},
			{"bitmap over limit", kindBitmap, bitmapAt(8*maxPayload + 1)},
			{"bitmap too many runs", kindBitmap, bytes.Repeat([]byte{0x55}, maxRanges/4+1)},
			{"flate garbage", kindRangesFlate, []byte{0xff, 0xff, 0xff}},
			{"flate empty", kindBitmapFlate, nil},
			{"flate truncated", kindRangesFlate, deflated(uv(1, 5, 5))[:3]},
			{"flate trailing bytes", kindRangesFlate, append(deflated(uv(1, 5, 5)), 0x00)},
			{"flate bad inner", kindRangesFlate, deflated(uv(2, 5, 5))},
			{"flate inner bitmap trailing zero", kindBitmapFlate, deflated([]byte{0x01, 0x00})},
			{"flate inflates empty", kindBitmapFlate, deflated(nil)},
		} {
			t.Run(tt.name, func(t *testing.T) {
				meta := makeMeta(committed, tt.kind, tt.payload)
				if tt.name == "no kind" {
					body := binary.AppendVarint(nil, committed)
					body = binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
					meta = prefix + b64.EncodeToString(body)
				}
				expectCorrupt(t, meta)
			})
		}
	})
	t.Run("offset overflow", func(t *testing.T) {
		// Near MaxInt64 the span is limited by MaxInt64, not maxSpan.
		const c = math.MaxInt64 - 3
		ok := makeMeta(c, kindRanges, []byte{1, 0, 2})
		if rs, err := Decode(c, ok); err != nil || !slices.Equal(rs, []Range{{c + 1, math.MaxInt64}}) {
			t.Fatalf("Decode = %v, %v", rs, err)
		}
		for _, meta := range []string{
			makeMeta(c, kindRanges, []byte{1, 0, 3}),
			makeMeta(c, kindBitmap, []byte{0x10}),
		} {
			if rs, err := Decode(c, meta); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode(%q) = %v, %v; want ErrCorrupt", meta, rs, err)
			}
		}
	})
}

// bitWriter writes a DEFLATE bit stream, to craft streams compress/flate
// would never produce.
type bitWriter struct {
	buf []byte
	acc uint64
	n   uint
}

// bits writes the n low bits of v, least significant first, as DEFLATE
// writes header fields and extra bits.
func (w *bitWriter) bits(v uint64, n uint) {
	w.acc |= v << w.n
	for w.n += n; w.n >= 8; w.n -= 8 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc >>= 8
	}
}

// code writes an n-bit Huffman code, most significant bit first.
func (w *bitWriter) code(c uint64, n uint) {
	var r uint64
	for i := range n {
		r |= (c >> i & 1) << (n - 1 - i)
	}
	w.bits(r, n)
}

func (w *bitWriter) flush() []byte {
	if w.n > 0 {
		w.buf = append(w.buf, byte(w.acc))
	}
	return w.buf
}

// bomb returns a raw DEFLATE stream inflating to 1+258*matches zero bytes: a
// fixed-Huffman block of one literal zero and then copies of 258 bytes at
// distance 1, 13 bits each, the densest DEFLATE allows.
func bomb(matches int) []byte {
	var w bitWriter
	w.bits(1, 1)      // BFINAL
	w.bits(1, 2)      // BTYPE 01: fixed Huffman codes
	w.code(0x30+0, 8) // literal 0
	for range matches {
		w.code(0xc0+5, 8) // length code 285: 258 bytes
		w.code(0, 5)      // distance code 0: distance 1
	}
	w.code(0, 7) // end of block
	return w.flush()
}

// TestDecompressionBomb: a payload inflating far beyond the cap is rejected
// after inflating no more than the cap.
func TestDecompressionBomb(t *testing.T) {
	const matches = 1 << 17 // inflates to 32 MiB
	stream := bomb(matches)
	// The crafted stream is valid DEFLATE: it inflates well past the cap.
	r := flate.NewReader(bytes.NewReader(stream))
	if n, err := io.CopyN(io.Discard, r, 4*maxPayload); n != 4*maxPayload || err != nil {
		t.Fatalf("crafted stream inflates to %d bytes: %v", n, err)
	}
	for _, kind := range []byte{kindRangesFlate, kindBitmapFlate} {
		meta := makeMeta(7, kind, stream)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		rs, err := Decode(7, meta)
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode(bomb) = %d ranges, %v; want ErrCorrupt", len(rs), err)
		}
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("kind %d: %d bytes of metadata inflating to %d MiB: %v in %v, %d KiB allocated",
			kind, len(meta), (1+258*matches)>>20, err, elapsed, allocated>>10)
		// Inflating it all would allocate over 32 MiB; base64-decoding the
		// metadata itself takes ~200 KiB.
		if allocated > 2<<20 {
			t.Fatalf("Decode(bomb) allocated %d bytes", allocated)
		}
	}
}

func TestDecodeStale(t *testing.T) {
	meta, _, err := Encode(100, []Range{{102, 104}}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []int64{99, 101, -1, 0, math.MaxInt64} {
		if rs, err := Decode(c, meta); !errors.Is(err, ErrStale) || errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode(%d) = %v, %v; want ErrStale", c, rs, err)
		}
	}
}

// randomRanges returns a random valid range set above committed with a mix
// of densities and run lengths.
func randomRanges(rng *rand.Rand, committed int64) []Range {
	n := rng.IntN(2000)
	if rng.IntN(4) == 0 {
		n = rng.IntN(10)
	}
	maxGap := []int64{1, 2, 4, 100, 1 << 20}[rng.IntN(5)]
	maxLen := []int64{1, 1, 3, 50}[rng.IntN(4)]
	// Work in offsets relative to committed, stopping before MaxInt64 and
	// the span limit.
	lim := min(spanLimit(committed), maxSpan/2)
	var rs []Range
	next := uint64(1)
	for range n {
		from := next + uint64(rng.Int64N(maxGap))
		to := from + uint64(rng.Int64N(maxLen))
		if to > lim {
			break
		}
		rs = append(rs, Range{committed + int64(from), committed + int64(to)})
		next = to + 1
		if rng.IntN(2) == 0 {
			next++ // otherwise the next range may be adjacent
		}
	}
	return rs
}

// TestModel checks Encode and Decode against the contract on random inputs:
// the metadata fits, decodes to exactly the encoded prefix, the prefix is
// the longest that fits, and the kind is the smallest.
func TestModel(t *testing.T) {
	iterations := 80
	if testing.Short() {
		iterations = 20
	}
	modeltest.Seeds(t, "OFFSETMETA_MODEL_SEED", iterations, func(i int64) {
		rng := rand.New(rand.NewPCG(uint64(i), 6))
		committed := []int64{-1, 0, rng.Int64N(1 << 40), math.MaxInt64 / 2, math.MaxInt64 - (1 << 20)}[rng.IntN(5)]
		ranges := randomRanges(rng, committed)
		budget := rng.IntN(5000)
		if i%4 == 0 {
			budget = rng.IntN(60)
		}
		meta, n := roundTrip(t, committed, ranges, budget)
		checkLongest(t, committed, ranges, n, budget)
		if n == 0 {
			return
		}
		// The kind is the smallest of the four (lower kind on a tie).
		e := newEncoder(committed, ranges)
		runs := e.merge(n)
		sizes := map[int]int{kindRanges: len(appendRanges(nil, runs))}
		if nb := (runs[len(runs)-1].to + 7) / 8; nb <= maxPayload {
			sizes[kindBitmap] = int(nb)
		}
		for k := range 2 {
			if raw, ok := sizes[k]; ok && raw > minDeflateGain {
				p := appendRanges(nil, runs)
				if k == kindBitmap {
					p = fillBitmap(nil, raw, runs)
				}
				for level := range levels {
					if c := len(deflate(p, level)); c < raw && (sizes[k+2] == 0 || c < sizes[k+2]) {
						sizes[k+2] = c
					}
				}
			}
		}
		best := -1
		for k := range 4 {
			if s, ok := sizes[k]; ok && (best < 0 || s < sizes[best]) {
				best = k
			}
		}
		if n == len(ranges) || best == kindRanges || best == kindBitmap {
			if got := kindOf(t, meta); got != best {
				t.Fatalf("iteration %d: kind %d, want %d (sizes %v)", i, got, best, sizes)
			}
		}
	})
}
