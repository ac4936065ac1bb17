package offsetmeta

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strings"
	"sync"
)

var (
	// ErrForeign is returned by Decode for metadata turbo did not write,
	// including the empty string: another tool owned the group, or nothing
	// was recorded. Nothing is known above the committed offset.
	ErrForeign = errors.New("offsetmeta: metadata not written by turbo")
	// ErrCorrupt is wrapped by Decode errors for metadata that carries the
	// turbo prefix but cannot be trusted: an unknown version or kind, a bad
	// checksum, truncation, or values beyond the format's limits.
	ErrCorrupt = errors.New("offsetmeta: corrupt metadata")
	// ErrStale is wrapped by Decode errors for metadata written for a
	// different committed offset, for example when an admin tool moved the
	// offset but kept the metadata. The finished offsets it lists relate to
	// another position, so they must not be trusted.
	ErrStale = errors.New("offsetmeta: metadata written for a different committed offset")
	// ErrInvalidRanges is wrapped by Encode errors for ranges that are not
	// ascending, disjoint and above the committed offset; encoding them
	// anyway would record offsets as finished that are not.
	ErrInvalidRanges = errors.New("offsetmeta: invalid ranges")
)

// Range is a run of finished offsets, From..To inclusive, From <= To.
type Range struct{ From, To int64 }

const (
	// prefix is written before every body: magic "tb", version "1", ':'.
	magic   = "tb"
	version = "1"
	prefix  = magic + version + ":"
	// maxVersionDigits bounds the scan for the version, so a long run of
	// digits is classified without reading it all.
	maxVersionDigits = 9

	// The payload kinds, see the package documentation.
	kindRanges      = 0
	kindBitmap      = 1
	kindRangesFlate = 2
	kindBitmapFlate = 3

	// maxPayload bounds the payload after decompression, which is what
	// defuses decompression bombs.
	maxPayload = 64 << 10
	// maxRanges bounds the number of runs a Decode returns.
	maxRanges = 1 << 16
	// maxSpan bounds the highest finished offset relative to the committed
	// one, so consumers of Decode may size structures by the span.
	maxSpan = 1 << 32

	crcLen = 4
	// minBody is the smallest body: a one-byte varint, the kind, the CRC.
	minBody = 1 + 1 + crcLen
	// minDeflateGain: a DEFLATE stream as compress/flate closes it is at
	// least 6 bytes (block header and end-of-block code, then an empty final
	// stored block with 4 bytes of lengths), so compressing a payload of at
	// most 6 bytes can never make it strictly smaller and is not tried.
	minDeflateGain = 6
)

var (
	// b64 is strict so that every body has exactly one textual form.
	b64        = base64.RawURLEncoding.Strict()
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	// levels are the compressors tried on each raw payload; Decode does not
	// care which produced the DEFLATE stream. Neither is always smaller:
	// Huffman coding alone wins on random bits and on range lists, where
	// back-references cost more than they save, and LZ77 matching wins on
	// repetitive payloads such as regular patterns and sparse bitmaps.
	// Both are linear time. The slower levels gain at most ~10% on sparse
	// bitmaps, where the range list is about as small anyway, and cost
	// milliseconds per 64 KiB candidate (BestCompression tens of them).
	levels = [...]int{flate.HuffmanOnly, flate.BestSpeed}
	// deflaters pools a flate.Writer per entry of levels: a writer holds
	// hundreds of kilobytes of buffers, too much to allocate per candidate.
	deflaters [len(levels)]sync.Pool
)

// Encode describes the finished ranges above the committed offset committed
// in at most budget bytes of metadata.
//
// Every range must satisfy committed < From <= To, and the ranges must be
// ascending and disjoint; otherwise Encode returns an error wrapping
// ErrInvalidRanges. Adjacent ranges are allowed; what is recorded is the set
// of offsets, so Decode returns them merged into maximal runs.
//
// If all ranges do not fit, Encode records the longest prefix of them (lowest
// offsets first) that does: a prefix is still true, and the lowest ranges are
// the ones the next owner reaches first. The prefix also stops before the
// format's limits (see the package documentation). Finding it costs
// O(log n) trial encodings. One range more than the prefix never fits; a
// longer prefix might, by a few bytes, in the rare cases where DEFLATE
// output shrinks as its input grows. Encode returns the metadata and how many
// of ranges it recorded. No ranges, or a budget too small for
// even the first one, gives "" and 0; the empty string decodes as ErrForeign,
// which means the same thing: nothing known above the committed offset.
func Encode(committed int64, ranges []Range, budget int) (meta string, encoded int, err error) {
	if err := validate(committed, ranges); err != nil {
		return "", 0, err
	}
	maxBody := bodyBudget(budget)
	if len(ranges) == 0 || maxBody < minBody {
		return "", 0, nil
	}
	e := newEncoder(committed, ranges)
	n := e.limit()
	if n == 0 {
		return "", 0, nil
	}
	fits := func(k int, m mode) bool {
		kind, _ := e.choose(k, maxBody, m)
		return kind >= 0
	}
	// Encoded size grows with the prefix length, so the longest prefix that
	// fits is found by searching over the prefix length, encoding O(log n)
	// candidates instead of one per range. Compression dominates the cost
	// and grows with the candidate, so the search first bisects without
	// compressing, for the longest prefix whose raw payload fits (first
	// trying all of them, the common case), then gallops up from there with compression and bisects
	// again: the candidates it compresses stay within a small factor of the
	// answer's size instead of starting at all n ranges.
	//
	// Invariant: prefix lo fits (the empty one always does) and prefix hi
	// does not, or hi is n+1.
	lo, hi := n, n+1
	if !fits(n, rawOnly) {
		for lo, hi = 0, n; hi-lo > 1; {
			if mid := lo + (hi-lo)/2; fits(mid, rawOnly) {
				lo = mid
			} else {
				hi = mid
			}
		}
	}
	if lo < n {
		hi = n + 1
		for step := max(lo, 1); ; step *= 2 {
			k := min(lo+step, n)
			if !fits(k, anyFit) {
				hi = k
				break
			}
			if lo = k; lo == n {
				break
			}
		}
		for hi-lo > 1 {
			if mid := lo + (hi-lo)/2; fits(mid, anyFit) {
				lo = mid
			} else {
				hi = mid
			}
		}
	}
	if lo == 0 {
		return "", 0, nil
	}
	// The search only asked whether some kind fits; the result uses the
	// smallest, which therefore fits too.
	kind, payload := e.choose(lo, maxBody, smallest)
	body := make([]byte, 0, len(e.head)+1+len(payload)+crcLen)
	body = append(body, e.head...)
	body = append(body, byte(kind))
	body = append(body, payload...)
	body = binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
	return prefix + b64.EncodeToString(body), lo, nil
}

// validate checks the contract of Encode's ranges.
func validate(committed int64, ranges []Range) error {
	for i, r := range ranges {
		switch {
		case r.From > r.To:
			return fmt.Errorf("%w: range %d has From %d > To %d", ErrInvalidRanges, i, r.From, r.To)
		case i == 0 && r.From <= committed:
			return fmt.Errorf("%w: range 0 starts at %d, not above the committed offset %d", ErrInvalidRanges, r.From, committed)
		case i > 0 && r.From <= ranges[i-1].To:
			return fmt.Errorf("%w: range %d starts at %d, not above the end %d of range %d", ErrInvalidRanges, i, r.From, ranges[i-1].To, i-1)
		}
	}
	return nil
}

// bodyBudget returns the largest body whose metadata fits in budget bytes:
// base64 without padding turns b bytes into ceil(4b/3) characters.
func bodyBudget(budget int) int {
	if budget <= len(prefix) {
		return 0
	}
	text := budget - len(prefix)
	return text/4*3 + text%4*3/4
}

// spanLimit returns the highest relative offset allowed for committed: the
// format's span limit, or less where it would pass MaxInt64.
func spanLimit(committed int64) uint64 {
	if committed > math.MaxInt64-maxSpan {
		return uint64(math.MaxInt64 - committed)
	}
	return maxSpan
}

// span is a run of relative offsets, from..to inclusive.
type span struct{ from, to uint64 }

// encoder holds one Encode's ranges in relative form and scratch buffers
// reused across the candidates of the binary search.
type encoder struct {
	committed int64
	rel       []span
	merged    []span
	ranges    []byte
	bitmap    []byte
	head      []byte
}

func newEncoder(committed int64, ranges []Range) *encoder {
	e := &encoder{committed: committed, rel: make([]span, len(ranges)), merged: make([]span, 0, len(ranges))}
	for i, r := range ranges {
		// Unsigned subtraction is exact here even when the int64 one would
		// overflow (committed -1, To MaxInt64), because To > committed.
		e.rel[i] = span{uint64(r.From) - uint64(committed), uint64(r.To) - uint64(committed)}
	}
	e.head = binary.AppendVarint(nil, committed)
	return e
}

// limit returns the longest prefix of the ranges within the format's span
// and run-count limits.
func (e *encoder) limit() int {
	lim := spanLimit(e.committed)
	runs := 0
	for i, s := range e.rel {
		if s.to > lim {
			return i
		}
		if i == 0 || s.from > e.rel[i-1].to+1 {
			if runs++; runs > maxRanges {
				return i
			}
		}
	}
	return len(e.rel)
}

// merge returns the first k ranges as maximal runs.
func (e *encoder) merge(k int) []span {
	m := e.merged[:0]
	for _, s := range e.rel[:k] {
		if len(m) > 0 && s.from == m[len(m)-1].to+1 {
			m[len(m)-1].to = s.to
			continue
		}
		m = append(m, s)
	}
	e.merged = m
	return m
}

// mode says how hard encoder.choose tries.
type mode int

const (
	// rawOnly tries only the uncompressed kinds, which are cheap.
	rawOnly mode = iota
	// anyFit returns the first kind found that fits, compressing only when
	// no raw kind does.
	anyFit
	// smallest tries every kind and returns the smallest.
	smallest
)

// choose encodes the first k ranges and returns a kind and its payload that
// make a body of at most maxBody bytes, or kind -1 if no kind tried (see
// mode) fits. The payload may alias scratch buffers of e.
func (e *encoder) choose(k, maxBody int, m mode) (kind int, payload []byte) {
	if k == 0 {
		return -1, nil
	}
	runs := e.merge(k)
	overhead := len(e.head) + 1 + crcLen

	var payloads [4][]byte
	e.ranges = appendRanges(e.ranges[:0], runs)
	if len(e.ranges) <= maxPayload {
		payloads[kindRanges] = e.ranges
	}
	// A raw bitmap too big for the body is only worth building to compress.
	if n := (runs[len(runs)-1].to + 7) / 8; n <= maxPayload && (m != rawOnly || overhead+int(n) <= maxBody) {
		e.bitmap = fillBitmap(e.bitmap, int(n), runs)
		payloads[kindBitmap] = e.bitmap
	}

	fits := func(kind int) bool {
		return payloads[kind] != nil && overhead+len(payloads[kind]) <= maxBody
	}
	// Compress only when asked for the smallest or when no raw kind fits,
	// the smaller raw payload first: if only a fit is needed it is the
	// likelier one to fit.
	if m == smallest || (m == anyFit && !fits(kindRanges) && !fits(kindBitmap)) {
		raw := [2]int{kindRanges, kindBitmap}
		if payloads[kindRanges] == nil || (payloads[kindBitmap] != nil && len(payloads[kindBitmap]) < len(payloads[kindRanges])) {
			raw = [2]int{kindBitmap, kindRanges}
		}
	compress:
		for _, kind := range raw {
			p := payloads[kind]
			if len(p) <= minDeflateGain {
				continue
			}
			for level := range levels {
				if c := deflate(p, level); len(c) < len(p) && (payloads[kind+2] == nil || len(c) < len(payloads[kind+2])) {
					payloads[kind+2] = c
				}
				if m == anyFit && fits(kind+2) {
					break compress
				}
			}
		}
	}
	choice := -1
	for kind, p := range payloads {
		if p != nil && (choice < 0 || len(p) < len(payloads[choice])) {
			choice = kind
		}
	}
	if choice < 0 || !fits(choice) {
		return -1, nil
	}
	return choice, payloads[choice]
}

// appendRanges appends the kind 0 payload for runs.
func appendRanges(dst []byte, runs []span) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(runs)))
	next := uint64(1) // lowest relative offset the next run can start at
	for _, r := range runs {
		dst = binary.AppendUvarint(dst, r.from-next)
		dst = binary.AppendUvarint(dst, r.to-r.from)
		next = r.to + 2
	}
	return dst
}

// fillBitmap returns the kind 1 payload of n bytes for runs, reusing buf.
func fillBitmap(buf []byte, n int, runs []span) []byte {
	if cap(buf) < n {
		buf = make([]byte, n)
	} else {
		buf = buf[:n]
		clear(buf)
	}
	for _, r := range runs {
		// Relative offset r is bit r-1.
		lo, hi := r.from-1, r.to-1
		for ; lo <= hi && lo%8 != 0; lo++ {
			buf[lo/8] |= 1 << (lo % 8)
		}
		for ; lo+7 <= hi; lo += 8 {
			buf[lo/8] = 0xff
		}
		for ; lo <= hi; lo++ {
			buf[lo/8] |= 1 << (lo % 8)
		}
	}
	return buf
}

// deflate returns p compressed as raw DEFLATE with compressor levels[level].
func deflate(p []byte, level int) []byte {
	w, _ := deflaters[level].Get().(*flate.Writer)
	if w == nil {
		var err error
		if w, err = flate.NewWriter(nil, levels[level]); err != nil {
			panic(err) // only for an invalid level
		}
	}
	defer deflaters[level].Put(w)
	var out bytes.Buffer
	w.Reset(&out)
	// Writes to a bytes.Buffer cannot fail.
	_, _ = w.Write(p)
	_ = w.Close()
	return out.Bytes()
}

// Decode returns the finished offsets above committed recorded in meta, as
// ascending maximal runs (never adjacent), all above committed.
//
// Metadata turbo did not write, including "", returns ErrForeign. Metadata
// with the turbo prefix that cannot be decoded, has an unknown version or
// kind, or fails its checksum returns an error wrapping ErrCorrupt; metadata
// written for a different committed offset returns one wrapping ErrStale.
// Every error means nothing is known above committed.
//
// Decode never panics, and its work and memory are bounded by the length of
// meta and the format's limits: at most 64 KiB of decompressed payload, 65536
// runs, and a highest offset at most committed + 2^32.
func Decode(committed int64, meta string) ([]Range, error) {
	rest, ok := strings.CutPrefix(meta, magic)
	if !ok {
		return nil, ErrForeign
	}
	digits := 0
	for digits < len(rest) && digits < maxVersionDigits && rest[digits] >= '0' && rest[digits] <= '9' {
		digits++
	}
	if digits == 0 || digits == len(rest) || rest[digits] != ':' {
		return nil, ErrForeign
	}
	if v := rest[:digits]; v != version {
		return nil, fmt.Errorf("%w: unknown version %q", ErrCorrupt, v)
	}
	text := rest[digits+1:]
	// The base64 decoder skips line breaks; they are not part of the format
	// and would let damaged text decode.
	if strings.ContainsAny(text, "\r\n") {
		return nil, fmt.Errorf("%w: line break in base64", ErrCorrupt)
	}
	body, err := b64.DecodeString(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(body) < minBody {
		return nil, fmt.Errorf("%w: body of %d bytes is too short", ErrCorrupt, len(body))
	}
	data := body[:len(body)-crcLen]
	if got, want := crc32.Checksum(data, castagnoli), binary.LittleEndian.Uint32(body[len(data):]); got != want {
		return nil, fmt.Errorf("%w: checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	written, n := binary.Varint(data)
	if n <= 0 || n == len(data) {
		return nil, fmt.Errorf("%w: bad header", ErrCorrupt)
	}
	if written != committed {
		return nil, fmt.Errorf("%w: written for %d, committed is %d", ErrStale, written, committed)
	}
	kind, payload := data[n], data[n+1:]
	if kind == kindRangesFlate || kind == kindBitmapFlate {
		if payload, err = inflate(payload); err != nil {
			return nil, err
		}
	}
	if len(payload) > maxPayload {
		return nil, fmt.Errorf("%w: payload of %d bytes exceeds %d", ErrCorrupt, len(payload), maxPayload)
	}
	switch kind {
	case kindRanges, kindRangesFlate:
		return parseRanges(committed, payload)
	case kindBitmap, kindBitmapFlate:
		return parseBitmap(committed, payload)
	default:
		return nil, fmt.Errorf("%w: unknown kind %d", ErrCorrupt, kind)
	}
}

// inflate decompresses a kind 2 or 3 payload, reading at most one byte more
// than maxPayload so a decompression bomb costs no more than a valid payload.
func inflate(p []byte) ([]byte, error) {
	src := bytes.NewReader(p)
	// bytes.Reader is an io.ByteReader, so the decompressor reads no byte
	// past the end of the stream and src.Len() shows trailing garbage.
	r := flate.NewReader(src)
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, maxPayload+1))
	if err != nil {
		return nil, fmt.Errorf("%w: deflate: %v", ErrCorrupt, err)
	}
	if len(out) > maxPayload {
		return nil, fmt.Errorf("%w: payload inflates beyond %d bytes", ErrCorrupt, maxPayload)
	}
	if src.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the deflate stream", ErrCorrupt, src.Len())
	}
	return out, nil
}

// parseRanges decodes a kind 0 payload.
func parseRanges(committed int64, p []byte) ([]Range, error) {
	lim := spanLimit(committed)
	count, n := binary.Uvarint(p)
	if n <= 0 {
		return nil, fmt.Errorf("%w: bad range count", ErrCorrupt)
	}
	p = p[n:]
	// Every run takes at least two bytes, which bounds the allocation by
	// the payload before a single run is read.
	if count == 0 || count > maxRanges || count > uint64(len(p)/2) {
		return nil, fmt.Errorf("%w: range count %d for %d bytes", ErrCorrupt, count, len(p))
	}
	out := make([]Range, 0, count)
	next := uint64(1)
	for range count {
		gap, n := binary.Uvarint(p)
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad gap", ErrCorrupt)
		}
		p = p[n:]
		length, n := binary.Uvarint(p)
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad length", ErrCorrupt)
		}
		p = p[n:]
		// next <= lim+2, so with gap and length bounded by lim no sum
		// below overflows.
		if gap > lim || length > lim || next+gap > lim || next+gap+length > lim {
			return nil, fmt.Errorf("%w: range beyond committed+%d", ErrCorrupt, lim)
		}
		from := next + gap
		to := from + length
		out = append(out, Range{committed + int64(from), committed + int64(to)})
		next = to + 2
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last range", ErrCorrupt, len(p))
	}
	return out, nil
}

// parseBitmap decodes a kind 1 payload.
func parseBitmap(committed int64, p []byte) ([]Range, error) {
	if len(p) == 0 || p[len(p)-1] == 0 {
		return nil, fmt.Errorf("%w: bitmap does not end with a set bit", ErrCorrupt)
	}
	lim := spanLimit(committed)
	var out []Range
	emit := func(from, to uint64) error {
		if to > lim {
			return fmt.Errorf("%w: bitmap beyond committed+%d", ErrCorrupt, lim)
		}
		if len(out) == maxRanges {
			return fmt.Errorf("%w: more than %d ranges", ErrCorrupt, maxRanges)
		}
		out = append(out, Range{committed + int64(from), committed + int64(to)})
		return nil
	}
	in := false // inside a run that started at relative offset start
	var start uint64
	for i, b := range p {
		// Whole bytes that neither start nor end a run are skipped.
		if (b == 0 && !in) || (b == 0xff && in) {
			continue
		}
		for bit := range 8 {
			rel := uint64(i)*8 + uint64(bit) + 1
			switch set := b>>bit&1 == 1; {
			case set && !in:
				start, in = rel, true
			case !set && in:
				if err := emit(start, rel-1); err != nil {
					return nil, err
				}
				in = false
			}
		}
	}
	if in {
		if err := emit(start, uint64(len(p))*8); err != nil {
			return nil, err
		}
	}
	return out, nil
}
