package actors

import (
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
)

func TestGateTakesAtMostWhatIsAvailable(t *testing.T) {
	t.Parallel()
	g := newGate(10, 1<<30)
	if n, _ := g.take(4, 0); n != 4 {
		t.Fatalf("take(4) = %d, want 4", n)
	}
	if n, _ := g.take(100, 0); n != 6 {
		t.Fatalf("take(100) with 6 left = %d, want 6", n)
	}
	if n, _ := g.take(1, 0); n != 0 {
		t.Fatalf("take(1) on an empty gate = %d, want 0", n)
	}
	g.give(1)
	select {
	case <-g.wake:
		t.Fatal("woke for 1 credit of 10; it should wait for a quarter")
	default:
	}
	g.give(2)
	select {
	case <-g.wake:
	default:
		t.Fatal("did not wake with 3 of 10 credits free")
	}
}

func TestGateShrinksBelowZeroAndRecovers(t *testing.T) {
	t.Parallel()
	g := newGate(8, 1<<30)
	g.take(8, 0)
	g.resize(2, 1<<30) // two more partitions arrived: 6 records over the new share
	if a := g.available(); a != -6 {
		t.Fatalf("available after shrinking = %d, want -6", a)
	}
	g.give(6)
	if n, _ := g.take(5, 0); n != 0 {
		t.Fatalf("take after returning the excess = %d, want 0", n)
	}
	g.give(2)
	if n, _ := g.take(5, 0); n != 2 {
		t.Fatalf("take = %d, want the 2 credits of the new share", n)
	}
}

func TestGateConcurrentGiveAndTakeConserveCredits(t *testing.T) {
	t.Parallel()
	g := newGate(100, 1<<30)
	var wg sync.WaitGroup
	taken := make(chan int, 1000)
	for range 4 {
		wg.Go(func() {
			for range 250 {
				if n, _ := g.take(3, 0); n > 0 {
					taken <- n
				}
			}
		})
	}
	wg.Go(func() {
		for range 1000 {
			g.give(1)
		}
	})
	wg.Wait()
	close(taken)
	sum := 0
	for n := range taken {
		sum += n
	}
	if got := g.available() + sum; got != 1100 {
		t.Fatalf("available %d + taken %d = %d, want 1100", g.available(), sum, got)
	}
}

func TestBatchSize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		avgNs float64
		want  int
	}{
		{"nothing measured yet", 0, 1},
		{"slow handler", float64(100 * time.Millisecond), 1},
		{"handler as long as the target", float64(batchTarget), 1},
		{"handler a tenth of the target", float64(batchTarget / 10), 10},
		{"fast handler", 1000, maxRunnerBatch},
		{"medium handler", float64(20 * time.Microsecond), 10},
	}
	for _, c := range cases {
		if got := batchSize(c.avgNs); got != c.want {
			t.Errorf("%s: batchSize(%v) = %d, want %d", c.name, c.avgNs, got, c.want)
		}
	}
}

// TestSaramaConfigBoundsWhatWaitsOnTheBroker: sarama holds a broker
// connection for a whole request, so a commit waits behind a fetch that is
// waiting for new records; MaxWaitTime bounds that wait (sarama's default,
// 500 ms, made the last commit of a drained backlog ~350 ms late). The fetch
// sizes bound what sarama decodes ahead of the budget.
func TestSaramaConfigBoundsWhatWaitsOnTheBroker(t *testing.T) {
	t.Parallel()
	k := config.Default().Kafka
	k.Brokers = []string{"127.0.0.1:1"}
	cfg := saramaConfig(k, config.DefaultConsumer("c"), 30*time.Second)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("sarama rejects the config: %v", err)
	}
	if got := cfg.Consumer.MaxWaitTime; got > 100*time.Millisecond {
		t.Errorf("Consumer.MaxWaitTime = %s: a commit may wait that long behind an idle fetch; want <= 100ms", got)
	}
	if got := cfg.Consumer.Fetch.Default; got > 256<<10 {
		t.Errorf("Consumer.Fetch.Default = %d, want <= 256 KiB: one response per partition is what sarama holds beyond the budget", got)
	}
	if got := cfg.ChannelBufferSize; got > 64 {
		t.Errorf("ChannelBufferSize = %d, want <= 64", got)
	}
}

// A JoinGroup may wait on the broker for the whole rebalance timeout (a
// peer draining its revoked partitions); sarama must not give up first.
func TestSaramaConfigWaitsOutARebalance(t *testing.T) {
	t.Parallel()
	k := config.Default().Kafka
	k.Brokers = []string{"127.0.0.1:1"}
	for _, shutdown := range []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute} {
		cfg := saramaConfig(k, config.DefaultConsumer("c"), shutdown)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("sarama rejects the config: %v", err)
		}
		rebalance := cfg.Consumer.Group.Rebalance.Timeout
		if rebalance <= shutdown {
			t.Errorf("shutdown_timeout %s: rebalance timeout %s, want more than the drain may take", shutdown, rebalance)
		}
		if got := cfg.Net.ReadTimeout; got <= rebalance {
			t.Errorf("shutdown_timeout %s: Net.ReadTimeout %s, want more than the rebalance timeout %s", shutdown, got, rebalance)
		}
	}
}
