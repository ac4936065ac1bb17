// Command plainfranz is the benchmark's "plain franz-go" peer: the fastest Go
// client, used the way its own example for per-partition work does
// (franz-go's examples/goroutine_per_partition_consuming, "autocommit
// marks"): one goroutine per assigned partition handles its records one
// after the other and marks each; franz-go's autocommit sends the marks
// every --commit-interval. Polling blocks rebalances
// (BlockRebalanceOnPoll) until the polled records are handed to their
// partitions' goroutines, so a revocation never races a hand-off.
//
//	plainfranz --brokers HOST:PORT[,..] --topic T --group G [--work 20ms] [--commit-interval 100ms]
//
// It consumes until SIGINT or SIGTERM, then stops the partition goroutines,
// commits the last marks and leaves the group, and exits 0. The benchmark
// (test/bench) watches the group's committed offsets from outside, as it does
// for every peer. It links franz-go only, not turbo or sarama.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/turbokafka/turbo/actors/handlers/sleep"
	"github.com/turbokafka/turbo/test/bench/plainpeer"
	"github.com/twmb/franz-go/pkg/kgo"
)

func main() { plainpeer.Main("plainfranz", consume) }

type tp struct {
	topic     string
	partition int32
}

// partitions owns the per-partition goroutines: the rebalance callbacks
// (which franz-go runs on its own goroutine, never during a poll's
// hand-off) start and stop them, and the poll loop feeds them.
type partitions struct {
	work time.Duration
	mu   sync.Mutex
	live map[tp]*worker
}

type worker struct {
	recs   chan []*kgo.Record
	cancel context.CancelFunc
	done   chan struct{}
}

func consume(ctx context.Context, a plainpeer.Args) error {
	ps := &partitions{work: a.Work, live: map[tp]*worker{}}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(a.Brokers...),
		kgo.ClientID("plainfranz"),
		kgo.ConsumerGroup(a.Group),
		kgo.ConsumeTopics(a.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(a.CommitInterval),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(ps.assigned),
		kgo.OnPartitionsRevoked(ps.revoked),
		kgo.OnPartitionsLost(ps.lost),
	)
	if err != nil {
		return err
	}
	for {
		fetches := cl.PollRecords(ctx, 10_000)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			break
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "plainfranz: fetch %s/%d: %v\n", fe.Topic, fe.Partition, fe.Err)
			}
		}
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			ps.mu.Lock()
			w := ps.live[tp{p.Topic, p.Partition}]
			ps.mu.Unlock()
			if w != nil {
				w.recs <- p.Records
			}
		})
		cl.AllowRebalance()
	}
	// Stop every partition's goroutine, commit what they marked, leave.
	ps.stopAll(ps.takeAll())
	commitCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = cl.CommitMarkedOffsets(commitCtx)
	cl.Close()
	return err
}

func (ps *partitions) assigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for topic, parts := range assigned {
		for _, p := range parts {
			ctx, cancel := context.WithCancel(context.Background())
			w := &worker{recs: make(chan []*kgo.Record, 4), cancel: cancel, done: make(chan struct{})}
			ps.live[tp{topic, p}] = w
			go w.run(ctx, cl, ps.work)
		}
	}
}

// revoked stops the revoked partitions' goroutines and commits their marks
// before the partitions go to another member, as franz-go's example does.
func (ps *partitions) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	ps.stopAll(ps.take(revoked))
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "plainfranz: commit on revoke:", err)
	}
}

// lost stops the lost partitions' goroutines; their marks cannot be
// committed any more.
func (ps *partitions) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	ps.stopAll(ps.take(lost))
}

func (ps *partitions) take(which map[string][]int32) []*worker {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []*worker
	for topic, parts := range which {
		for _, p := range parts {
			if w := ps.live[tp{topic, p}]; w != nil {
				out = append(out, w)
				delete(ps.live, tp{topic, p})
			}
		}
	}
	return out
}

func (ps *partitions) takeAll() []*worker {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]*worker, 0, len(ps.live))
	for k, w := range ps.live {
		out = append(out, w)
		delete(ps.live, k)
	}
	return out
}

// stopAll ends the workers and waits for them: what they finished is marked.
func (ps *partitions) stopAll(ws []*worker) {
	for _, w := range ws {
		w.cancel()
		close(w.recs)
	}
	for _, w := range ws {
		<-w.done
	}
}

// run handles one partition's records in order, one at a time, marking each.
func (w *worker) run(ctx context.Context, cl *kgo.Client, work time.Duration) {
	defer close(w.done)
	for recs := range w.recs {
		for _, r := range recs {
			if ctx.Err() != nil {
				break // stopped: drain the channel, mark nothing more
			}
			if err := sleep.For(ctx, work); err != nil {
				break
			}
			cl.MarkCommitRecords(r)
		}
	}
}
