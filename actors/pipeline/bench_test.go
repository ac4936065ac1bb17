package pipeline

import (
	"strconv"
	"testing"
)

type benchRec struct {
	unit   string
	epoch  uint64
	offset int64
}

type benchItem struct{}

func (benchItem) Unit(r *benchRec) string        { return r.unit }
func (benchItem) Epoch(r *benchRec) uint64       { return r.epoch }
func (benchItem) Offset(r *benchRec) int64       { return r.offset }
func (benchItem) Judge(*benchRec, error) Verdict { return Finished }

// BenchmarkKeyMode is the coordinator's hot path under key ordering: fetched
// records of 1,000 keys added 500 at a time, dispatched in batches of 64 to
// 16 runners that finish them all, accounted for, flushed. Reported per
// record, the records themselves reused. What allocates is per batch (its
// two slices); a unit record per key only with more distinct keys coming and
// going than the scheduler keeps spare (4,096).
func BenchmarkKeyMode(b *testing.B) {
	const fetch, keys, runners = 500, 1000, 16
	recs := make([]*benchRec, fetch)
	for i := range recs { // reused: a fetch is done before the next one
		recs[i] = &benchRec{epoch: 1}
	}
	units := make([]string, keys)
	for i := range units {
		units[i] = "key-" + strconv.Itoa(i)
	}
	p := New[*benchRec](benchItem{}, runners, 256)
	p.SetBatchSize(64)
	var off int64
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += fetch {
		for i := range recs {
			recs[i].unit, recs[i].offset = units[int(off)%keys], off
			off++
		}
		p.Add(1, recs)
		p.Dispatch()
		for len(p.Out().Runs) > 0 {
			runs := append([]Run[*benchRec](nil), p.Out().Runs...)
			p.Reset()
			for _, r := range runs {
				for {
					i, ok := r.Batch.Claim()
					if !ok {
						break
					}
					r.Batch.Finish(i, nil)
				}
				p.Ran(r.Runner)
			}
			p.Dispatch()
		}
		p.Reset()
		p.Flush()
	}
	b.StopTimer()
	if p.Waiting() != 0 || p.InFlight() != 0 {
		b.Fatalf("left %d waiting, %d in flight", p.Waiting(), p.InFlight())
	}
}
