package handlers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"testing"

	"github.com/turbokafka/turbo/config"
)

// naiveHash is hashBytes written the obvious way, byte by byte: byte p is
// the value's within it, the filler's (at p modulo its length) past it.
func naiveHash(value []byte, n int) [sha256.Size]byte {
	all := make([]byte, n)
	for p := range n {
		if p < len(value) {
			all[p] = value[p]
		} else {
			all[p] = hashFiller[p%len(hashFiller)]
		}
	}
	return sha256.Sum256(all)
}

func TestHashDigest(t *testing.T) {
	long := bytes.Repeat([]byte("v"), 3*hashChunk+7)
	for _, tt := range []struct {
		name  string
		value []byte
		n     int
	}{
		{"one byte", []byte("abc"), 1},
		{"value only", []byte("abc"), 3},
		{"value and filler", []byte("abc"), 5 * hashChunk},
		{"no value", nil, hashChunk + 1},
		{"value longer than n", long, 2*hashChunk + 5},
		{"value over several chunks, then filler", long, 5*hashChunk + 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := hashBytes(context.Background(), tt.value, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if want := naiveHash(tt.value, tt.n); got != want {
				t.Errorf("digest %x, want %x", got, want)
			}
		})
	}
}

// countingCtx is cancelled once Err has been asked `live` times: it counts
// the handler's looks at the context without any clock.
type countingCtx struct {
	context.Context
	looks, live int
}

func (c *countingCtx) Err() error {
	c.looks++
	if c.looks > c.live {
		return context.Canceled
	}
	return nil
}

// TestHashChecksTheContextBetweenChunks: cancelled after three chunks of ten,
// it hashes no fourth and returns the context's error.
func TestHashChecksTheContextBetweenChunks(t *testing.T) {
	ctx := &countingCtx{Context: context.Background(), live: 3}
	err := Hash(10*hashChunk).Handle(ctx, testRecord())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Hash = %v, want context.Canceled", err)
	}
	if ctx.looks != 4 {
		t.Errorf("the context was looked at %d times, want 4 (before each of 3 chunks, then the cancellation)", ctx.looks)
	}
	ctx = &countingCtx{Context: context.Background(), live: 10}
	if err := Hash(10*hashChunk).Handle(ctx, testRecord()); err != nil || ctx.looks != 10 {
		t.Errorf("Hash = %v after %d looks, want nil after 10 (one per chunk)", err, ctx.looks)
	}
}

func TestNewHash(t *testing.T) {
	h, err := New(config.Handler{Type: config.HandlerHash, Bytes: 1000}, 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(context.Background(), testRecord()); err != nil {
		t.Errorf("hash Handle = %v", err)
	}
}

func BenchmarkHash256KiB(b *testing.B) {
	h, rec := Hash(256<<10), testRecord()
	b.SetBytes(256 << 10)
	for b.Loop() {
		_ = h.Handle(context.Background(), rec)
	}
}
