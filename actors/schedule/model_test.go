package schedule

import (
	"cmp"
	"errors"
	"math/rand"
	"slices"
	"strconv"
	"testing"

	"github.com/turbokafka/turbo/actors/internal/modeltest"
)

// model is the obviously correct, slow scheduler the real one is checked
// against: every waiting item in age order, and the set of busy units.
type model struct {
	items []modelItem // waiting, oldest first
	busy  map[string]bool
	// queued counts the waiting items per unit, only so that checkUnits
	// does not have to scan items on every step.
	queued map[string]int
	// held is what the last next or nextRun handed out for each busy unit,
	// and for "" what the last one handed out of it, minus what was
	// requeued since: the items a requeue may give back.
	held map[string][]modelItem
	// age is the age of the next added item. Items requeued to "" are
	// older than every added one: requeued counts them down from zero.
	age, requeued int64
	w             int64 // the backlog weight
}

type modelItem struct {
	unit string
	v    int
	age  int64
}

func newModel() *model {
	return &model{busy: map[string]bool{}, queued: map[string]int{}, held: map[string][]modelItem{}}
}

func (m *model) add(unit string, v int) {
	m.items = append(m.items, modelItem{unit, v, m.age})
	m.age++
	m.queued[unit]++
}

// next takes the runnable item of the highest priority: its age less w for
// each item waiting behind it in its unit (none for an unordered item), the
// older of two alike. The candidates are every unordered item and each free
// unit's oldest item.
func (m *model) next() (string, int, bool) {
	best := -1
	var bestKey int64
	seen := map[string]bool{}
	for i, it := range m.items {
		if it.unit != "" && (m.busy[it.unit] || seen[it.unit]) {
			continue
		}
		key := it.age
		if it.unit != "" {
			seen[it.unit] = true
			key -= int64(m.queued[it.unit]-1) * m.w
		}
		if best < 0 || key < bestKey { // items are in age order: the first of two alike is the older
			best, bestKey = i, key
		}
	}
	if best < 0 {
		return "", 0, false
	}
	it := m.items[best]
	m.items = slices.Delete(m.items, best, best+1)
	m.queued[it.unit]--
	if it.unit != "" {
		m.busy[it.unit] = true
	}
	m.held[it.unit] = []modelItem{it}
	return it.unit, it.v, true
}

func (m *model) nextRun(max int) (string, []int, bool) {
	unit, v, ok := m.next()
	if !ok {
		return "", nil, false
	}
	run := []int{v}
	if unit == "" {
		return unit, run, true
	}
	// The rest of the unit's run are its next waiting items in age order,
	// wherever they sit between other units' items.
	for i := 0; i < len(m.items) && len(run) < max; {
		if it := m.items[i]; it.unit == unit {
			run = append(run, it.v)
			m.held[unit] = append(m.held[unit], it)
			m.items = slices.Delete(m.items, i, i+1)
			m.queued[unit]--
			continue
		}
		i++
	}
	return unit, run, true
}

// requeue gives back the last k items held for unit. Items of a unit regain
// their original age, and so their original place in the waiting order;
// unordered items become older than anything else.
func (m *model) requeue(unit string, k int) error {
	if unit != "" && !m.busy[unit] {
		return ErrNotBusy
	}
	h := m.held[unit]
	if k > len(h) {
		return ErrNotHandedOut
	}
	back := slices.Clone(h[len(h)-k:])
	m.held[unit] = h[:len(h)-k]
	if unit == "" {
		for i := range back {
			back[i].age = -m.requeued - int64(k) + int64(i)
		}
		m.requeued += int64(k)
	}
	for _, it := range back {
		i, _ := slices.BinarySearchFunc(m.items, it.age, func(e modelItem, age int64) int { return cmp.Compare(e.age, age) })
		m.items = slices.Insert(m.items, i, it)
		m.queued[unit]++
	}
	return nil
}

func (m *model) done(unit string) error {
	if unit == "" {
		return nil
	}
	if !m.busy[unit] {
		return ErrNotBusy
	}
	delete(m.busy, unit)
	delete(m.held, unit)
	return nil
}

func (m *model) runnable() bool {
	for _, it := range m.items {
		if it.unit == "" || !m.busy[it.unit] {
			return true
		}
	}
	return false
}

func (m *model) dropIf(drop func(int) bool) []int {
	var out []int
	kept := m.items[:0]
	for _, it := range m.items {
		if drop(it.v) {
			out = append(out, it.v)
			m.queued[it.unit]--
		} else {
			kept = append(kept, it)
		}
	}
	m.items = kept
	return out
}

// runModel applies the operations chosen by src to a Scheduler of backlog
// weight w and to the model, failing at the first observable difference.
func runModel(t *testing.T, src modeltest.Source, nUnits, w int) {
	t.Helper()
	s := New[int]()
	s.SetBacklogWeight(w)
	m := newModel()
	m.w = int64(max(w, 1))
	units := make([]string, nUnits+1) // units[0] is the unordered unit ""
	for i := 1; i <= nUnits; i++ {
		units[i] = "u" + strconv.Itoa(i)
	}
	val := 0
	for step := 0; ; step++ {
		op, ok := src.Intn(20)
		if !ok {
			break
		}
		arg, ok := src.Intn(256)
		if !ok {
			break
		}
		switch {
		case op < 7: // Add dominates so that queues build up
			u := units[arg%len(units)]
			s.Add(u, val)
			m.add(u, val)
			val++
		case op < 11:
			gu, gv, gok := s.Next()
			wu, wv, wok := m.next()
			if gu != wu || gv != wv || gok != wok {
				t.Fatalf("step %d: Next = (%q,%d,%v), model (%q,%d,%v)", step, gu, gv, gok, wu, wv, wok)
			}
		case op < 15:
			u := units[arg%len(units)]
			gerr, werr := s.Done(u), m.done(u)
			if !errors.Is(gerr, werr) || (gerr == nil) != (werr == nil) {
				t.Fatalf("step %d: Done(%q) = %v, model %v", step, u, gerr, werr)
			}
		case op < 16:
			mod, rem := arg%4+1, arg/4%4
			drop := func(v int) bool { return v%mod == rem%mod }
			got, want := s.DropIf(drop), m.dropIf(drop)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: DropIf = %v, model %v", step, got, want)
			}
		case op < 18:
			max := arg%8 - 1 // -1 and 0 must act as 1
			var (
				gu    string
				gv    []int
				gok   bool
				extra = arg & 8 // also exercise NextRunAppend onto a non-empty dst
			)
			if extra != 0 {
				var dst []int
				gu, dst, gok = s.NextRunAppend([]int{-1}, max)
				if dst[0] != -1 {
					t.Fatalf("step %d: NextRunAppend overwrote dst: %v", step, dst)
				}
				gv = dst[1:]
			} else {
				gu, gv, gok = s.NextRun(max)
			}
			wu, wv, wok := m.nextRun(max)
			if gu != wu || !slices.Equal(gv, wv) || gok != wok {
				t.Fatalf("step %d: NextRun(%d) = (%q,%v,%v), model (%q,%v,%v)", step, max, gu, gv, gok, wu, wv, wok)
			}
		default:
			// Give back a suffix of what the unit's runner holds. For a
			// busy unit the length may also exceed what it holds by one,
			// which must fail; for an idle one it must fail anyway.
			u := units[arg%len(units)]
			h := m.held[u]
			k := arg / len(units) % (len(h) + 2)
			if u == "" {
				k = min(k, len(h))
			}
			vals := make([]int, 0, k)
			for _, it := range h[max(0, len(h)-k):] {
				vals = append(vals, it.v)
			}
			for len(vals) < k {
				vals = append(vals, -1)
			}
			gerr, werr := s.Requeue(u, vals), m.requeue(u, k)
			if !errors.Is(gerr, werr) || (gerr == nil) != (werr == nil) {
				t.Fatalf("step %d: Requeue(%q, %v) = %v, model %v", step, u, vals, gerr, werr)
			}
		}
		if s.Waiting() != len(m.items) || s.Busy() != len(m.busy) || s.Runnable() != m.runnable() {
			t.Fatalf("step %d: Waiting/Busy/Runnable = %d/%d/%v, model %d/%d/%v", step,
				s.Waiting(), s.Busy(), s.Runnable(), len(m.items), len(m.busy), m.runnable())
		}
		checkUnits(t, s, m, units)
	}
	// Drain both completely; the order must still agree.
	for {
		gu, gv, gok := s.Next()
		wu, wv, wok := m.next()
		if gu != wu || gv != wv || gok != wok {
			t.Fatalf("drain: Next = (%q,%d,%v), model (%q,%d,%v)", gu, gv, gok, wu, wv, wok)
		}
		if !gok {
			if len(m.busy) == 0 {
				break
			}
			for u := range m.busy {
				if err := s.Done(u); err != nil {
					t.Fatalf("drain: Done(%q) = %v", u, err)
				}
				_ = m.done(u)
				break
			}
			continue
		}
		if err := s.Done(gu); err != nil {
			t.Fatalf("drain: Done(%q) = %v", gu, err)
		}
		_ = m.done(gu)
	}
	if u, r, o := s.sizes(); u != 0 || r != 0 || o != 0 {
		t.Fatalf("after drain: units %d ready %d unordered %d, want 0", u, r, o)
	}
}

// checkUnits verifies that the map holds exactly the units that are busy or
// have waiting items, which is what keeps memory bounded.
func checkUnits(t *testing.T, s *Scheduler[int], m *model, units []string) {
	t.Helper()
	want := 0
	for _, u := range units[1:] {
		_, got := s.units[u]
		if need := m.busy[u] || m.queued[u] > 0; got != need {
			t.Fatalf("unit %q tracked = %v, want %v", u, got, need)
		}
		if m.busy[u] || m.queued[u] > 0 {
			want++
		}
	}
	if len(s.units) != want {
		t.Fatalf("scheduler tracks %d units, want %d", len(s.units), want)
	}
}

// TestModelRandom runs the scheduler against its model on 150 random runs,
// new seeds each time (SCHEDULE_MODEL_SEED repeats them: modeltest.Seeds).
// FuzzScheduler goes further.
func TestModelRandom(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 30
	}
	modeltest.Seeds(t, "SCHEDULE_MODEL_SEED", seeds, func(seed int64) {
		r := rand.New(rand.NewSource(seed))
		nUnits := 1 + int(seed%12) // few units for contention, more for parallelism
		runModel(t, modeltest.Rand(r, 2*3000), nUnits, []int{0, 1, 3, 16}[seed/12%4])
	})
}

func FuzzScheduler(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 8, 0, 8, 0, 11, 1, 8, 0})
	f.Add([]byte{0, 0, 0, 0, 1, 1, 15, 5, 8, 0, 12, 0})
	f.Add([]byte{0, 3, 1, 3, 2, 0, 9, 0, 9, 0, 13, 3, 15, 1, 9, 0})
	// NextRun and Requeue: a run of u1 given back in part, then again.
	f.Add([]byte{0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 16, 5, 18, 5, 18, 3, 8, 0, 11, 1, 17, 7, 19, 1, 11, 1, 9, 0})
	f.Add([]byte{1, 0, 0, 1, 0, 2, 0, 0, 16, 3, 16, 0, 18, 3, 18, 6, 11, 1, 11, 2, 16, 7, 15, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) == 0 {
			return
		}
		// The model is quadratic; long inputs would only slow the fuzzer down
		// without reaching states that short ones cannot.
		ops = ops[:min(len(ops), 1024)]
		// The first byte picks the number of units so the fuzzer can explore
		// both heavy contention and many independent units, and the backlog
		// weight.
		runModel(t, modeltest.Bytes(ops[1:]), 1+int(ops[0])%16, []int{1, 2, 5, 20}[ops[0]/16%4])
	})
}
