package main

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// A SIGHUP whose configuration read blocks (a FIFO before it was refused
// at open, a hung network mount) must not hold up a stop: the read runs
// off the loop, a second SIGHUP meanwhile starts no second read, and
// SIGTERM (ctx) ends serve at once with the old consumers' stop.
func TestAStopPreemptsABlockedReload(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	reload := make(chan struct{}, 2)
	var reads atomic.Int32
	var log testkit.Buffer
	g := &consumerSet{
		cfg: &config.Config{ShutdownTimeout: time.Second},
		o: runOptions{log: zerolog.New(&log), reload: reload, reread: func() (*config.Config, error) {
			reads.Add(1)
			<-block
			return nil, errors.New("read after the test")
		}},
		obs: newObserver(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		next *config.Config
		err  error
	}
	done := make(chan result, 1)
	go func() {
		next, err := g.serve(ctx, false)
		done <- result{next, err}
	}()
	reload <- struct{}{}
	testkit.Eventually(t, 5*time.Second, "the reload to start reading the configuration", func() bool { return reads.Load() == 1 })
	reload <- struct{}{}
	testkit.Eventually(t, 5*time.Second, "the second SIGHUP to be logged as adding nothing", func() bool {
		return strings.Contains(log.String(), "still being read")
	})
	cancel()
	select {
	case r := <-done:
		if r.next != nil || r.err != nil {
			t.Errorf("serve = %v, %v after the stop; want nil, nil", r.next, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve still running 5 s after the stop: the blocked read holds it")
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads for two SIGHUPs while the first was blocked, want 1", n)
	}
}

// A read that outlives reloadReadTimeout refuses the reload, saying why,
// and the old configuration keeps running; when the read comes back at
// last, its result is dropped and the log says to send SIGHUP again.
func TestAReloadThatReadsTooLongIsRefused(t *testing.T) {
	defer func(d time.Duration) { reloadReadTimeout = d }(reloadReadTimeout)
	reloadReadTimeout = 50 * time.Millisecond
	release := make(chan struct{})
	reload := make(chan struct{}, 1)
	var log testkit.Buffer
	g := &consumerSet{
		cfg: &config.Config{ShutdownTimeout: time.Second},
		o: runOptions{log: zerolog.New(&log), reload: reload, reread: func() (*config.Config, error) {
			<-release
			return &config.Config{ShutdownTimeout: time.Second}, nil
		}},
		obs: newObserver(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *config.Config, 1)
	go func() {
		next, _ := g.serve(ctx, false)
		done <- next
	}()
	reload <- struct{}{}
	testkit.Eventually(t, 5*time.Second, "the reload to be refused for its slow read", func() bool {
		return strings.Contains(log.String(), "did not finish within 50ms")
	})
	close(release)
	testkit.Eventually(t, 5*time.Second, "the late read to be dropped", func() bool {
		return strings.Contains(log.String(), "send SIGHUP again")
	})
	cancel()
	select {
	case next := <-done:
		if next != nil {
			t.Error("the configuration read after its deadline was applied")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve still running 5 s after the stop")
	}
}
