package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
	"github.com/turbokafka/turbo/test/testkit/scrape"
)

// A key stuck in its handler fills its partition's share of the buffer,
// and the partition is no longer fetched. Its lag, over /status and
// /metrics, must still count what arrives behind it: turbo asks the broker
// for the high watermark of a partition it does not fetch. (Before, the lag
// stayed at the high watermark of the last fetch: 127 where 2,003 records
// waited, in production, and TurboLagGrowing could not fire for it.)
func TestLagOfStuckPartitionOverHTTP(t *testing.T) {
	t.Parallel()
	// Enough that key-0's partition is paused on either side: on the
	// franz-go side once more than 4,096 records wait in its queue.
	const first, more = 12_000, 2000
	topic := testkit.TopicName("lag")
	addr := testkit.Cluster(t, 2, topic)
	testkit.ProduceWithBinary(t, addr, topic, first, 20)

	// key-0 blocks until turbo gives up on the call (it stops) or the
	// test ends; every other record succeeds at once.
	release := make(chan struct{})
	hot := make(chan int32, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if key, _ := base64.StdEncoding.DecodeString(req.Header.Get("Kafka-Key")); string(key) == "key-0" {
			p, _ := strconv.Atoi(req.Header.Get("Kafka-Partition"))
			select {
			case hot <- int32(p):
			default:
			}
			select {
			case <-req.Context().Done():
			case <-release:
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: srv.Close waits for the blocked calls

	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: lag
    group: %s
    topics: [%s]
    concurrency: 2
    max_buffered: 20
    commit_interval: 200ms
    handler: {type: http, url: %q, timeout: 1h}
shutdown_timeout: 2s
http: {listen: "127.0.0.1:0"}
log: {level: info, format: json}
`, addr, topic, topic, srv.URL))
	run, listen := testkit.StartHTTP(t, nil, nil, "run", "--config", cfg)
	base := "http://" + listen

	var p int32
	select {
	case p = <-hot:
	case <-time.After(time.Minute):
		t.Fatal("timed out after 1m waiting for key-0's first call")
	}
	testkit.Eventually(t, time.Minute, fmt.Sprintf("partition %d to be paused behind key-0 (/status)", p), func() bool {
		st, ok := lagStatus(t, base, topic, p)
		return ok && st.Paused
	})
	testkit.ProduceWithBinary(t, addr, topic, more, 20)
	end := testkit.EndOffsets(t, []string{addr}, topic)[p]
	produced := time.Now()

	// The default refresh interval (5 s) applies: allow several.
	var st lagPartition
	var metric float64
	deadline := time.Now().Add(time.Minute)
	for {
		var ok bool
		st, ok = lagStatus(t, base, topic, p)
		m, err := scrape.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metric, _ = m.Value("turbo_partition_lag", map[string]string{"consumer": "lag", "topic": topic, "partition": strconv.Itoa(int(p))})
		if ok && st.HighWatermark == end && st.Committed >= 0 && st.Lag == end-st.Committed && metric == float64(st.Lag) && st.ConsumerLag >= st.Lag {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 1m waiting for partition %d's lag to reach its backlog: /status %+v, turbo_partition_lag %v; high watermark %d", p, st, metric, end)
		}
		time.Sleep(100 * time.Millisecond)
	}
	seen := time.Since(produced)
	if !st.Paused {
		t.Errorf("partition %d = %+v: want it still paused behind key-0", p, st)
	}
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the group's committed offset of partition %d to be the one /status shows (%d)", p, st.Committed), func() bool {
		return testkit.CommittedOffsets(t, []string{addr}, topic, topic)[p] == st.Committed
	})
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, time.Minute); code != 0 {
		t.Fatalf("turbo run exited %d", code)
	}
	t.Logf("FIGURES stuck-partition-lag broker=%s partition=%d committed=%d high_watermark=%d lag=%d consumer_lag=%d seen_in=%s (after the records were produced)",
		brokerKind(), p, st.Committed, st.HighWatermark, st.Lag, st.ConsumerLag, seen.Round(time.Millisecond))
}

// lagPartition is what /status says of one partition, and of its consumer's
// lag.
type lagPartition struct {
	Committed     int64 `json:"committed"`
	HighWatermark int64 `json:"high_watermark"`
	Lag           int64 `json:"lag"`
	Paused        bool  `json:"paused"`
	ConsumerLag   int64 `json:"-"`
}

// lagStatus reads partition p of topic from /status; false if the
// consumer does not hold it.
func lagStatus(t *testing.T, base, topic string, p int32) (lagPartition, bool) {
	t.Helper()
	resp, err := http.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Consumers []struct {
			Lag        int64 `json:"lag"`
			Partitions []struct {
				lagPartition
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
			} `json:"partitions"`
		} `json:"consumers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st.Consumers) != 1 {
		t.Fatalf("/status: %+v, %v", st, err)
	}
	for _, wp := range st.Consumers[0].Partitions {
		if wp.Topic == topic && wp.Partition == p {
			wp.ConsumerLag = st.Consumers[0].Lag
			return wp.lagPartition, true
		}
	}
	return lagPartition{}, false
}
