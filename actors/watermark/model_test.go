package watermark

import (
	"errors"
	"math/rand"
	"slices"
	"testing"

	"github.com/turbokafka/turbo/actors/internal/modeltest"
)

// model is the obviously correct, slow tracker the real one is checked
// against. It forgets nothing it needs for the semantics: done holds every
// offset ever tracked with its finished flag; all holds the tracked offsets
// in order, minus the finished prefix so that its scans stay short.
type model struct {
	done    map[int64]bool
	all     []int64
	open    []int64 // unfinished offsets, in no particular order
	highest int64
	tracked bool
}

func (m *model) track(o int64) error {
	if m.tracked && o <= m.highest {
		return ErrOutOfOrder
	}
	m.done[o] = false
	m.all = append(m.all, o)
	m.open = append(m.open, o)
	m.highest = o
	m.tracked = true
	return nil
}

func (m *model) finish(o int64) error {
	d, ok := m.done[o]
	if !ok || d {
		return ErrUnknownOffset
	}
	m.done[o] = true
	i := slices.Index(m.open, o)
	m.open = slices.Delete(m.open, i, i+1)
	for len(m.all) > 0 && m.done[m.all[0]] {
		m.all = m.all[1:]
	}
	return nil
}

func (m *model) committable() (int64, bool) {
	if !m.tracked {
		return 0, false
	}
	for _, o := range m.all {
		if !m.done[o] {
			return o, true
		}
	}
	return m.highest + 1, true
}

func (m *model) pending() int { return len(m.open) }

func (m *model) runs() []run {
	var out []run
	inRun := false
	for _, o := range m.all {
		switch {
		case !m.done[o]:
			inRun = false
		case inRun:
			out[len(out)-1].to = o
		default:
			out = append(out, run{o, o})
			inRun = true
		}
	}
	return out
}

// runModel applies the operations chosen by src to a Tracker and to the
// model, comparing everything observable after every operation.
//
// trackBias (0..3) shifts the mix from completions toward tracking, so that
// some runs keep windows of a few entries and others of hundreds, which is
// what exercises compaction.
func runModel(t *testing.T, src modeltest.Source, start int64, trackBias int) {
	t.Helper()
	tr := New()
	m := &model{done: map[int64]bool{}}
	prev, prevOK := int64(0), false
	for step := 0; ; step++ {
		op, ok := src.Intn(8)
		if !ok {
			break
		}
		arg, ok := src.Intn(256)
		if !ok {
			break
		}
		var o int64
		switch {
		case op < 3+trackBias: // Track, mostly with small gaps, sometimes out of order
			o = start
			if len(m.all) > 0 {
				o = m.highest + 1 + int64(arg%4) - int64(arg%16/12*8)
			}
			got, want := tr.Track(o), m.track(o)
			if !errors.Is(got, want) {
				t.Fatalf("step %d: Track(%d) = %v, model %v", step, o, got, want)
			}
		default: // Done, mostly of an unfinished offset, sometimes of anything
			switch {
			case arg < 160 && len(m.open) > 0:
				o = m.open[arg%len(m.open)]
			case arg < 224 && m.tracked:
				o = m.highest - int64(arg%32) // tracked, finished or a gap
			default:
				o = start + int64(arg) - 16
			}
			got, want := tr.Done(o), m.finish(o)
			if !errors.Is(got, want) {
				t.Fatalf("step %d: Done(%d) = %v, model %v", step, o, got, want)
			}
		}

		c, cok := tr.Committable()
		wc, wok := m.committable()
		if c != wc || cok != wok {
			t.Fatalf("step %d: Committable = (%d,%v), model (%d,%v)", step, c, cok, wc, wok)
		}
		if tr.Pending() != m.pending() {
			t.Fatalf("step %d: Pending = %d, model %d", step, tr.Pending(), m.pending())
		}
		if got, want := runs(tr), m.runs(); !slices.Equal(got, want) {
			t.Fatalf("step %d: FinishedAbove = %v, model %v", step, got, want)
		}
		// The safety properties the commit loop relies on, stated directly
		// rather than through the model.
		if prevOK && (!cok || c < prev) {
			t.Fatalf("step %d: committable moved back from %d to (%d,%v)", step, prev, c, cok)
		}
		for _, off := range m.open {
			if c > off {
				t.Fatalf("step %d: committable %d passes unfinished offset %d", step, c, off)
			}
		}
		prev, prevOK = c, cok
	}
}

// TestModelRandom runs the tracker against its model on 40 random runs of
// 2,500 operations, new seeds each time (WATERMARK_MODEL_SEED repeats them:
// modeltest.Seeds); under the race detector each costs a third of a second.
// FuzzTracker goes further.
func TestModelRandom(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	modeltest.Seeds(t, "WATERMARK_MODEL_SEED", seeds, func(seed int64) {
		r := rand.New(rand.NewSource(seed))
		runModel(t, modeltest.Rand(r, 2*2500), seed%200*1000-5000, int(seed%4))
	})
}

func FuzzTracker(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 4, 1, 4, 0, 4, 2})
	f.Add([]byte{0, 3, 0, 3, 0, 3, 5, 0, 5, 2, 5, 1, 0, 15})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 6, 200, 7, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 {
			return
		}
		// The model is quadratic; long inputs would only slow the fuzzer down
		// without reaching states that short ones cannot.
		ops = ops[:min(len(ops), 1024)]
		runModel(t, modeltest.Bytes(ops[1:]), int64(ops[0]>>2)-32, int(ops[0]&3))
	})
}
