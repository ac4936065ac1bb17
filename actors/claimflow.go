package actors

// claimFlow decides when a claim pauses and resumes its partition in sarama,
// and keeps the records sarama delivered while it was paused. It is the
// claim goroutine's only state besides the gate, kept pure (no sarama, no
// clock) so that the rule that bounds memory can be tested on its own.
//
// Why held exists: a cooperative revocation is announced only by Messages()
// closing, so a paused claim must keep reading the channel; what it reads
// without credits waits here. A paused partition is not fetched, so held is
// bounded by what sarama had fetched when it was paused: one decoded fetch
// response (Consumer.Fetch.Default bytes) plus the channel buffer.
//
// The rule: the partition is resumed only once held is empty. Resuming as
// soon as credits come back (the earlier rule) let sarama fetch and decode a
// new response while the previous one still waited in held; every
// starve–pause–credit cycle then added a response, and behind a slow handler
// held grew to the whole backlog (760,000 records of a 1,000,000-record
// backlog, with a pipeline budget of about 1,000).
type claimFlow[M any] struct {
	paused bool
	held   []M
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
func (f *claimFlow[M]) hold(m M) { f.held = append(f.held, m) }

// next returns the oldest held record, if any. Held records come before
// anything still in sarama's channel.
func (f *claimFlow[M]) next() (M, bool) {
	var zero M
	if len(f.held) == 0 {
		return zero, false
	}
	m := f.held[0]
	f.held[0] = zero // the slice's array must not keep it alive
	f.held = f.held[1:]
	if len(f.held) == 0 {
		f.held = nil // nor keep the array itself, as long as a response
	}
	return m, true
}

// resume is called when the claim has credits and is about to read; it
// reports whether the caller must resume the partition in sarama now: only
// when it is paused and nothing is held any more.
func (f *claimFlow[M]) resume() bool {
	if !f.paused || len(f.held) > 0 {
		return false
	}
	f.paused = false
	return true
}

// isPaused reports whether the partition is paused in sarama.
func (f *claimFlow[M]) isPaused() bool { return f.paused }

// heldLen is how many records wait in held.
func (f *claimFlow[M]) heldLen() int { return len(f.held) }
