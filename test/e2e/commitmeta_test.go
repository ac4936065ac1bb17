package e2e

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/test/testkit"
	"github.com/turbokafka/turbo/test/testkit/scrape"
)

// Commit metadata overflow through turbo run, on whatever broker the suite
// runs against: a quarter of a partition's records, picked at random, fail
// and are retried while the rest finish — hundreds of irregular gaps that
// commit_metadata_bytes 64 cannot hold. Commits go on landing (the broker's
// offset.metadata.max.bytes is never passed), nothing stalls, /metrics
// says how many finished offsets a next owner would run again, one warning
// per partition says so; once the stuck records finish, every record is
// handled once and the gauge is back to 0. (Stuck records hold their place
// in the read-ahead: with more of them than it holds — about a second of
// work, at least 1,000 records — reading waits for them, by design.)
func TestCommitMetadataOverflowThroughRun(t *testing.T) {
	t.Parallel()
	const records = 1000
	topic := testkit.TopicName("meta-overflow")
	addr := testkit.Cluster(t, 1, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, records)
	rng := rand.New(rand.NewPCG(3, 4))
	held := map[int64]bool{}
	for off := range int64(records) {
		held[off] = rng.IntN(4) == 0
	}
	var stuck atomic.Bool
	stuck.Store(true)
	ledger := testkit.NewLedger(0)
	ledger.Fail = func(rec *actors.Record) error {
		if stuck.Load() && held[rec.Offset] {
			return errors.New("held")
		}
		return nil
	}
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: meta
    group: %s
    topics: [%s]
    ordering: unordered
    concurrency: 32
    commit_interval: 100ms
    commit_metadata_bytes: 64
    retry: {max_attempts: 1000000, initial_backoff: 500ms, max_backoff: 2s}
    handler: {type: http, url: %q, timeout: 30s}
http: {listen: "127.0.0.1:0"}
log: {level: info, format: json}
`, addr, topic, topic, ledger.Endpoint(t)))
	var stderr testkit.Buffer
	run, listen := testkit.StartHTTP(t, nil, &stderr, "run", "--config", cfg)
	metric := func(name string) float64 {
		m, err := scrape.Get("http://" + listen + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		v, ok := m.Value(name, map[string]string{"consumer": "meta"})
		if !ok {
			return -1 // the consumer is not started yet
		}
		return v
	}
	free := 0
	for _, h := range held {
		if !h {
			free++
		}
	}
	var unrecorded, commits float64
	var seen string // what the last look saw, for a wait that times out
	defer func() {
		if t.Failed() {
			t.Logf("last seen: %s", seen)
		}
	}()
	testkit.Eventually(t, time.Minute, fmt.Sprintf("every one of the %d records not held handled, and the metadata overflowing", free), func() bool {
		unrecorded = metric("turbo_commit_metadata_unrecorded_offsets")
		rep := ledger.Report()
		seen = fmt.Sprintf("%d distinct records handled, %d failed attempts, %v unrecorded, %v buffered, %v retries", rep.Distinct, rep.FailedAttempts, unrecorded,
			metric("turbo_buffered_records"), metric("turbo_retries_total"))
		return rep.Distinct == free && unrecorded >= 200
	})
	if commits = metric("turbo_commits_total"); commits < 1 || metric("turbo_commit_errors_total") != 0 {
		t.Errorf("%v commits, %v commit errors while the metadata overflowed; want commits, and no error", commits, metric("turbo_commit_errors_total"))
	}
	if n := metric("turbo_commit_metadata_overflows_total"); n != 1 {
		t.Errorf("turbo_commit_metadata_overflows_total = %v for one partition overflowing, want 1", n)
	}
	if n := countLines(stderr.String(), "do not all fit in commit_metadata_bytes"); n != 1 {
		t.Errorf("%d overflow warnings, want 1", n)
	}
	stuck.Store(false)
	testkit.Eventually(t, time.Minute, "every record handled once the stuck ones go through", func() bool { return ledger.Report().Distinct == records })
	testkit.Eventually(t, 30*time.Second, "nothing left unrecorded", func() bool {
		return metric("turbo_commit_metadata_unrecorded_offsets") == 0
	})
	rep := ledger.Report()
	if rep.Duplicates != 0 || rep.Overlaps != 0 {
		t.Errorf("%d duplicates, %d overlaps; want 0 (%v)", rep.Duplicates, rep.Overlaps, rep.Examples)
	}
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
	t.Logf("FIGURES commit-metadata-overflow broker=%s: %d of %d records held in retries; the other %d handled; %v finished offsets unrecorded meanwhile, %v commits and no commit error; 0 unrecorded after", brokerKind(), records-free, records, free, unrecorded, commits)
}

// countLines counts the lines of out that contain sub.
func countLines(out, sub string) int {
	n := 0
	for line := range strings.Lines(out) {
		if strings.Contains(line, sub) {
			n++
		}
	}
	return n
}
