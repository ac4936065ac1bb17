package handlers

import (
	"context"
	"crypto/sha256"

	"github.com/turbokafka/turbo/actors"
)

// hashChunk is how much Hash hashes between two looks at the context, so a
// cancelled attempt stops within a fraction of a millisecond.
const hashChunk = 64 << 10

// hashFiller is what Hash feeds SHA-256 after the record's value: fixed,
// not zero, shared read-only by every call.
var hashFiller = func() []byte {
	b := make([]byte, hashChunk)
	for i := range b {
		b[i] = byte(i*131 + i>>8)
	}
	return b
}()

// Hash simulates CPU-bound work (benchmarks): SHA-256 over n bytes per record
// — the record's value, then a fixed filler up to n — checking the context
// between chunks of 64 KiB and returning its error once it is done.
func Hash(n int) actors.Handler {
	return actors.HandlerFunc(func(ctx context.Context, rec *actors.Record) error {
		_, err := hashBytes(ctx, rec.Value, n)
		return err
	})
}

// hashBytes is Hash's work; it returns the digest so tests can check it.
func hashBytes(ctx context.Context, value []byte, n int) ([sha256.Size]byte, error) {
	h := sha256.New()
	// Each step ends at the next multiple of hashChunk: byte p is value[p]
	// within the value, hashFiller[p%hashChunk] past it.
	for done := 0; done < n; {
		if err := ctx.Err(); err != nil {
			return [sha256.Size]byte{}, err
		}
		end := min(done-done%hashChunk+hashChunk, n)
		if done < len(value) {
			v := value[done:min(end, len(value))]
			h.Write(v)
			done += len(v)
		}
		if done < end {
			off := done % hashChunk
			h.Write(hashFiller[off : off+end-done])
			done = end
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum, nil
}
