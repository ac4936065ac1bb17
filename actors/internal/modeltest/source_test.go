package modeltest

import (
	"math/rand"
	"testing"
)

func TestSources(t *testing.T) {
	r := Rand(rand.New(rand.NewSource(1)), 3)
	for i := range 3 {
		if v, ok := r.Intn(5); !ok || v < 0 || v >= 5 {
			t.Fatalf("choice %d: %d, %v; want one in [0, 5)", i, v, ok)
		}
	}
	if _, ok := r.Intn(5); ok {
		t.Error("a Rand of 3 choices gave a fourth")
	}
	b := Bytes([]byte{7, 2})
	if v, ok := b.Intn(5); !ok || v != 2 {
		t.Errorf("first byte 7 %% 5 = %d, %v; want 2", v, ok)
	}
	if v, ok := b.Intn(5); !ok || v != 2 {
		t.Errorf("second byte 2 %% 5 = %d, %v; want 2", v, ok)
	}
	if _, ok := b.Intn(5); ok {
		t.Error("Bytes of 2 gave a third choice")
	}
}
