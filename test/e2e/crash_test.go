package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/test/testkit"
)

// crashRun runs turbo against topic with one record that never finishes
// (offset 100 of the only partition) while every other record finishes,
// waits for the commit that follows, kills turbo with SIGKILL, runs it again
// to the end, and returns how many records both runs handled and how many
// the first run had finished.
func crashRun(t *testing.T, addr, topic string, metadataBytes int) (twice, finished int) {
	t.Helper()
	release := make(chan struct{})
	var mu sync.Mutex
	first := map[string]bool{}
	srv1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Kafka-Offset") == "100" {
			<-release // never finishes before the kill
			return
		}
		mu.Lock()
		first[r.Header.Get("Kafka-Offset")] = true
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv1.Close()
	defer close(release)
	cfg := func(url string) string {
		return testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: crash
    group: crash-%s
    topics: [%s]
    concurrency: 8
    max_buffered: 5000
    commit_interval: 100ms
    commit_metadata_bytes: %d
    handler: {type: http, url: %q, timeout: 1m}
shutdown_timeout: 2s
log: {level: warn, format: json}
`, addr, topic, topic, metadataBytes, url))
	}
	run := testkit.Start(t, nil, "run", "--config", cfg(srv1.URL))
	// Every record but those of offset 100's key finishes (1980 of 2000);
	// then a few commit intervals pass.
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(first)
		mu.Unlock()
		if n >= 1980 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first run finished only %d records in 60s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The premise: the watermark (offset 100) is committed, and with the
	// metadata on, the metadata lists what finished above it.
	group := "crash-" + topic
	var committed int64
	var meta string
	deadline = time.Now().Add(30 * time.Second)
	for {
		committed, meta = testkit.CommittedMetadata(t, []string{addr}, group, topic, 0)
		if committed == 100 && (metadataBytes == 0 || len(meta) > 0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s committed offset %d with %d bytes of metadata, want 100 and metadata", group, committed, len(meta))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if metadataBytes > 0 {
		// Wait until the committed metadata covers every record the
		// endpoint answered: then turbo has finished and committed them all.
		covered := func() bool {
			_, meta := testkit.CommittedMetadata(t, []string{addr}, group, topic, 0)
			ranges, err := offsetmeta.Decode(100, meta)
			if err != nil {
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			for off := range first {
				n, _ := strconv.ParseInt(off, 10, 64)
				if n < 100 {
					continue
				}
				in := false
				for _, r := range ranges {
					in = in || (r.From <= n && n <= r.To)
				}
				if !in {
					return false
				}
			}
			return true
		}
		testkit.Eventually(t, 30*time.Second, "the commit metadata to cover every finished record", covered)
		_, meta = testkit.CommittedMetadata(t, []string{addr}, group, topic, 0)
		t.Logf("committed offset 100 with %d bytes of metadata covering every finished record", len(meta))
	}
	if err := run.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	run.Wait(t, 10*time.Second)

	var mu2 sync.Mutex
	second := map[string]bool{}
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu2.Lock()
		second[r.Header.Get("Kafka-Offset")] = true
		mu2.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv2.Close()
	again := testkit.Start(t, nil, "run", "--config", cfg(srv2.URL), "--exit-on-idle")
	if code := again.Wait(t, 120*time.Second); code != 0 {
		t.Fatalf("the restarted turbo exited %d", code)
	}
	mu.Lock()
	defer mu.Unlock()
	for off := range second {
		if first[off] {
			twice++
		}
	}
	if len(first)+len(second)-twice != 2000 {
		t.Errorf("first run %d + second run %d - both %d != 2000 records", len(first), len(second), twice)
	}
	return twice, len(first)
}

// SIGKILL of a process holding many finished-but-uncommitted records above an
// unfinished one: with the finished offsets recorded in the commit metadata,
// the restart handles again only what had not finished; without it, every
// record above the stuck one comes again.
func TestKill9RedeliversOnlyUnfinishedRecords(t *testing.T) {
	t.Parallel()
	testkit.EachSide(t, kill9RedeliversOnlyUnfinishedRecords)
}

func kill9RedeliversOnlyUnfinishedRecords(t *testing.T, _ testkit.Side) {
	meta, plain := testkit.TopicName("crash-meta"), testkit.TopicName("crash-plain")
	// One partition each, so that offset 100 holds the watermark of all.
	addr := testkit.Cluster(t, 1, meta, plain)
	testkit.ProduceWithBinary(t, addr, meta, 2000, 100)
	testkit.ProduceWithBinary(t, addr, plain, 2000, 100)
	// The two runs are independent (a topic and a group each).
	t.Run("metadata", func(t *testing.T) {
		t.Parallel()
		twice, finished := crashRun(t, addr, meta, 4000)
		t.Logf("FIGURES kill-9 metadata=on: records finished before SIGKILL: %d; handled again after the restart: %d", finished, twice)
		if twice != 0 {
			t.Errorf("%d finished records were handled again with the commit metadata on, want 0", twice)
		}
	})
	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		twice, finished := crashRun(t, addr, plain, 0)
		t.Logf("FIGURES kill-9 metadata=off: records finished before SIGKILL: %d; handled again after the restart: %d", finished, twice)
		if twice < 1500 {
			t.Errorf("only %d records handled again without the metadata; the test did not hold many finished records above the stuck one", twice)
		}
	})
}
