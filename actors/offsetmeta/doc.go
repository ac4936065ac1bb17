// Package offsetmeta records, in the metadata string Kafka stores with a
// committed offset, which offsets above that committed offset already
// finished.
//
// turbo processes the records of a partition in parallel and commits the
// contiguous watermark: the lowest offset that has not finished. Records above
// it may have finished out of order, and without more information whoever
// owns the partition next (after a crash or a rebalance) processes them
// again. Kafka lets every commit carry a free-form metadata string, limited by
// the broker (offset.metadata.max.bytes, 4096 bytes by default), so turbo
// writes the finished offsets above the watermark there, and the next owner
// reads them and skips those offsets. Encode writes that string, Decode reads
// it.
//
// The information is an optimisation, never a requirement: every error from
// Decode means "nothing is known above the committed offset", and processing
// everything from the committed offset is always correct (at least once).
// The dangerous failure is the opposite one, reading offsets as finished that
// did not finish, because those records would be skipped and lost; the format
// therefore carries the committed offset it was written for and a checksum,
// and Decode rejects anything it cannot fully trust.
//
// # Wire format, version 1
//
// Other processes read this format, so it changes only with a new version.
// The metadata is printable ASCII, so tooling that shows metadata as UTF-8
// text (kafka-consumer-groups and other Java clients) displays it intact:
//
//	tb1:<base64 of the body>
//
// "tb" marks metadata written by turbo, the decimal digits up to the first
// ':' are the format version (at most 9 digits), and the rest is the body in
// base64 with the URL-safe alphabet of RFC 4648 section 5, without padding,
// without line breaks and with zero trailing bits. Metadata that does not
// start with "tb", digits and ':' was not written by turbo (ErrForeign). A
// turbo prefix with a version other than 1 is rejected as corrupt, so a reader
// never guesses at a format newer than itself.
//
// The body is binary:
//
//	varint   c, the committed offset the metadata was written for
//	         (zig-zag signed varint of encoding/binary)
//	byte     kind of payload, 0 to 3
//	bytes    payload, up to the checksum
//	uint32   CRC-32C (Castagnoli) of all body bytes before it, little endian
//
// The checksum is there because without it one flipped bit, say in a gap,
// would decode to a different but well-formed set of offsets and records
// would be skipped; four bytes are cheap against a 4096-byte budget.
//
// Offsets in the payload are relative to c: relative offset r stands for
// offset c+r. Only offsets above c are recorded, so r >= 1. The payload
// describes a non-empty set of offsets as maximal runs; an empty set is
// written as the empty metadata string, never as a body.
//
// Kind 0, ranges: a uvarint count n >= 1, then for each run, lowest first,
// two uvarints gap and length, with
//
//	from[0] = 1 + gap[0]
//	from[i] = to[i-1] + 2 + gap[i]    (i > 0)
//	to[i]   = from[i] + length[i]
//
// The 2 means runs can be neither overlapping nor adjacent, so every set has
// exactly one encoding and every decoded value is valid. Nothing follows the
// last run.
//
// Kind 1, bitmap: bit i of the payload (byte i/8, bit i%8 counted from the
// least significant bit) is set when offset c+1+i finished. The bitmap ends
// with the byte holding the highest finished offset, so its last byte is not
// zero. It is the smaller form when finished offsets are dense.
//
// Kind 2 and kind 3: the payload of kind 0 and kind 1, respectively,
// compressed as raw DEFLATE (RFC 1951, compress/flate, no zlib or gzip
// header). Nothing follows the end of the DEFLATE stream.
//
// Encode writes whichever of the four kinds is smallest (on a tie the lower
// kind), using a compressed kind only when it is strictly smaller. It tries
// two DEFLATE settings, Huffman coding only and LZ77 at BestSpeed; readers
// must accept any valid DEFLATE stream.
//
// Limits, which Encode never exceeds and Decode rejects as corrupt, so that
// Decode bounds its work and memory whatever it is given: the payload is at
// most 64 KiB once decompressed, there are at most 65536 runs, and the
// highest finished offset is at most c + 2^32 (and at most MaxInt64).
// Offsets finishing that far ahead of the watermark would mean billions of
// records in flight, so the limits cost nothing in practice.
package offsetmeta
