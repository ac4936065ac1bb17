package actors

// claimFlow decides when a claim pauses and resumes its partition in sarama,
// and keeps the records sarama delivered while it was paused. It is the
// claim goroutine's only state besides the gate, kept pure (no sarama, no
// clock) so that the rule that bounds memory can be tested on its own.
//
// Why readAhead exists: a cooperative revocation is announced only by Messages()
// closing, so a paused claim must keep reading the channel; what it reads
// without credits waits here. A paused partition is not fetched, so readAhead is
// bounded by what sarama had fetched when it was paused: one decoded fetch
// response (Consumer.Fetch.Default bytes) plus the channel buffer.
//
// The rule: the partition is resumed only once readAhead is empty. Resuming as
// soon as credits come back (the earlier rule) let sarama fetch and decode a
// new response while the previous one still waited in readAhead; every
// starve–pause–credit cycle then added a response, and behind a slow handler
// readAhead grew to the whole backlog (760,000 records of a 1,000,000-record
// backlog, with a pipeline budget of about 1,000).
type claimFlow[M any] struct {
	paused    bool
	readAhead []M
}

// starved is called when the partition has lacked credits for pauseAfter;
// it reports whether the caller must pause the partition in sarama now.
func (f *claimFlow[M]) starved() bool {
	if f.paused {
		return false
	}
	f.paused = true
	return true
}

// hold keeps a record delivered while the claim had no credits.
func (f *claimFlow[M]) hold(m M) { f.readAhead = append(f.readAhead, m) }

// unread puts m back in front of the read-ahead records: the claim read it
// and then found the consumer paused.
func (f *claimFlow[M]) unread(m M) { f.readAhead = append([]M{m}, f.readAhead...) }

// next returns the oldest read-ahead record, if any. They come before
// anything still in sarama's channel.
func (f *claimFlow[M]) next() (M, bool) {
	var zero M
	if len(f.readAhead) == 0 {
		return zero, false
	}
	m := f.readAhead[0]
	f.readAhead[0] = zero // the slice's array must not keep it alive
	f.readAhead = f.readAhead[1:]
	if len(f.readAhead) == 0 {
		f.readAhead = nil // nor keep the array itself, as long as a response
	}
	return m, true
}

// resume is called when the claim has credits and is about to read; it
// reports whether the caller must resume the partition in sarama now: only
// when it is paused and nothing is readAhead any more.
func (f *claimFlow[M]) resume() bool {
	if !f.paused || len(f.readAhead) > 0 {
		return false
	}
	f.paused = false
	return true
}

// isPaused reports whether the partition is paused in sarama.
func (f *claimFlow[M]) isPaused() bool { return f.paused }

// readAheadLen is how many records wait in readAhead.
func (f *claimFlow[M]) readAheadLen() int { return len(f.readAhead) }
