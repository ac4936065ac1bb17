package actors

import (
	"sync"
	"time"
)

// topicIDFresh is how long a topic id read from the brokers answers for
// every claim of that topic: the claims of one assignment start within
// moments of each other, and a topic deleted and created again in between
// is no likelier than just after.
const topicIDFresh = time.Second

// topicIDs shares the topic id lookups of the claims that start together:
// at 512 partitions of one topic, one metadata request instead of 512 (each
// of which described all 512 partitions). A lookup in flight is joined, not
// repeated; an id read within topicIDFresh is reused; an unknown one (the
// lookup failed, or the broker has none) is not kept, so the next claim
// asks again. Safe for concurrent use; the zero value is ready.
type topicIDs struct {
	mu sync.Mutex
	m  map[string]*topicIDLookup
}

type topicIDLookup struct {
	done chan struct{} // closed once id and at are set
	id   topicID
	at   time.Time
}

// get returns topic's id, from a lookup within topicIDFresh of now or from
// look, which reads it from the brokers.
func (c *topicIDs) get(topic string, now func() time.Time, look func() topicID) topicID {
	c.mu.Lock()
	if l := c.m[topic]; l != nil {
		select {
		case <-l.done:
			if now().Sub(l.at) < topicIDFresh {
				c.mu.Unlock()
				return l.id
			}
		default: // in flight: its answer is as fresh as a new one
			c.mu.Unlock()
			<-l.done
			return l.id
		}
	}
	if c.m == nil {
		c.m = make(map[string]*topicIDLookup)
	}
	l := &topicIDLookup{done: make(chan struct{})}
	c.m[topic] = l
	c.mu.Unlock()

	l.id = look()
	l.at = now()
	close(l.done)
	if !l.id.known() {
		c.mu.Lock()
		if c.m[topic] == l {
			delete(c.m, topic)
		}
		c.mu.Unlock()
	}
	return l.id
}
