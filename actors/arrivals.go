package actors

import "time"

// arrivals remembers when a partition's records arrived, so that the age of
// its oldest unfinished record can be shown (the number to alert on when a
// key is stuck). It keeps one entry per batch, not per record, and merges
// batches that arrived within arrivalGrain of the previous entry: an age is
// then overstated by less than that, and the entries stay few however small
// the batches. Entries go once the oldest unfinished offset passes them.
type arrivals struct {
	q    []arrival // ascending offsets and times
	head int       // q[:head] are passed
}

type arrival struct {
	from int64 // the first offset of the batch
	at   int64 // unix ns
}

// arrivalGrain is the precision of an unfinished record's age.
const arrivalGrain = int64(100 * time.Millisecond)

// add notes that records from offset from on arrived at at.
func (a *arrivals) add(from, at int64) {
	if n := len(a.q); n > a.head && at-a.q[n-1].at < arrivalGrain {
		return // the previous entry's time stands for these records too
	}
	a.q = append(a.q, arrival{from: from, at: at})
}

// oldest returns when the record at offset off arrived (0 if no entry
// covers it), and forgets every entry before it: off is the oldest
// unfinished offset, which only grows.
func (a *arrivals) oldest(off int64) int64 {
	for a.head+1 < len(a.q) && a.q[a.head+1].from <= off {
		a.head++
	}
	if a.head > 64 && a.head > len(a.q)/2 {
		a.q = append(a.q[:0], a.q[a.head:]...)
		a.head = 0
	}
	if a.head < len(a.q) && a.q[a.head].from <= off {
		return a.q[a.head].at
	}
	return 0
}
