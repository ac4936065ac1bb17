// Package modeltest holds what the model tests of actors' pure cores
// (schedule, watermark, pipeline, offsetmeta, the credit flow) share: the
// stream of choices that drives a run, drawn from a seeded generator in the
// random tests and from the fuzzer's bytes in the fuzz targets, so that one
// runModel serves both; and the seeds of the random tests, new on every run
// (Seeds).
package modeltest

import "math/rand"

// Source yields the choices that drive a run; ok is false once exhausted.
type Source interface {
	Intn(n int) (v int, ok bool)
}

// Rand is a Source of at most n choices from r.
func Rand(r *rand.Rand, n int) Source { return &randSource{r: r, left: n} }

// Bytes is a Source of one choice per byte of b.
func Bytes(b []byte) Source { return &byteSource{b: b} }

type randSource struct {
	r    *rand.Rand
	left int
}

func (s *randSource) Intn(n int) (int, bool) {
	if s.left <= 0 {
		return 0, false
	}
	s.left--
	return s.r.Intn(n), true
}

type byteSource struct{ b []byte }

func (s *byteSource) Intn(n int) (int, bool) {
	if len(s.b) == 0 {
		return 0, false
	}
	v := int(s.b[0]) % n
	s.b = s.b[1:]
	return v, true
}
