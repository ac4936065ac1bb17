package testkit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// The output ledger: a pipeline's handler writes, for input record
// partition p, offset o, the outputs "p/o/0" … "p/o/n-1" keyed like the
// input (n a function of o the test knows), and the ledger reads the
// output topic and judges what arrived.

// OutputVerdict is what the output ledger found.
type OutputVerdict struct {
	Expected   int // outputs the inputs called for
	Read       int // output records read
	Missing    int // expected outputs never read
	Duplicated int // reads beyond the first of an output
	Disorder   int // outputs of one key read before an earlier record's (per output partition)
	Foreign    int // outputs no input called for
}

func (v OutputVerdict) String() string {
	return fmt.Sprintf("%d outputs expected, %d read: missing %d, duplicated %d, out of order %d, foreign %d",
		v.Expected, v.Read, v.Missing, v.Duplicated, v.Disorder, v.Foreign)
}

// ExpectedOutputs is every output the input topic's records call for, when
// input offset o emits perRecord(o) outputs.
func ExpectedOutputs(t testing.TB, brokers []string, input string, perRecord func(offset int64) int) map[string]bool {
	t.Helper()
	want := map[string]bool{}
	for p, end := range EndOffsets(t, brokers, input) {
		for off := int64(0); off < end; off++ {
			for i := range perRecord(off) {
				want[fmt.Sprintf("%d/%d/%d", p, off, i)] = true
			}
		}
	}
	return want
}

// JudgeOutputs judges msgs (in each output partition's order) against want.
func JudgeOutputs(t testing.TB, want map[string]bool, msgs []*sarama.ConsumerMessage) OutputVerdict {
	t.Helper()
	type place struct{ offset, i int64 }
	v := OutputVerdict{Expected: len(want), Read: len(msgs)}
	seen := map[string]int{}
	last := map[string]place{} // by output partition, input partition and key
	for _, m := range msgs {
		s := string(m.Value)
		seen[s]++
		if seen[s] > 1 {
			v.Duplicated++
			if v.Duplicated <= 5 {
				t.Logf("output %q read again (output partition %d, offset %d)", s, m.Partition, m.Offset)
			}
			continue
		}
		if !want[s] {
			v.Foreign++
			t.Errorf("output %q matches no input record", s)
			continue
		}
		var p, off, i int64
		if _, err := fmt.Sscanf(s, "%d/%d/%d", &p, &off, &i); err != nil {
			t.Fatalf("output %q: %v", s, err)
		}
		unit := fmt.Sprintf("%d/%d/%s", m.Partition, p, m.Key)
		if prev, ok := last[unit]; ok && (off < prev.offset || off == prev.offset && i <= prev.i) {
			v.Disorder++
			t.Errorf("key %s: output %q after %d/%d", unit, s, prev.offset, prev.i)
		}
		last[unit] = place{off, i}
	}
	for s := range want {
		if seen[s] == 0 {
			v.Missing++
		}
	}
	return v
}

// sentinel is the value ReadCommitted ends each partition with.
const sentinel = "turbo-ledger-end"

// ReadCommitted reads every record of topic that a read_committed reader
// sees. It first appends a sentinel to each partition (not in a
// transaction), then reads from the oldest offsets until every partition's
// sentinel arrived: what a transaction committed before that is then read,
// and what one aborted never is. Call it once the writers have stopped.
func ReadCommitted(t testing.TB, brokers []string, topic string, timeout time.Duration) []*sarama.ConsumerMessage {
	t.Helper()
	pcfg := ClientConfig(t)
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Partitioner = sarama.NewManualPartitioner
	prod, err := sarama.NewSyncProducer(brokers, pcfg)
	if err != nil {
		t.Fatalf("producer for %s: %v", topic, err)
	}
	ends := EndOffsets(t, brokers, topic)
	for p := range ends {
		if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: p, Value: sarama.StringEncoder(sentinel)}); err != nil {
			prod.Close()
			t.Fatalf("writing the ledger's sentinel to %s/%d: %v", topic, p, err)
		}
	}
	prod.Close()

	cfg := ClientConfig(t)
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	c, err := sarama.NewConsumer(brokers, cfg)
	if err != nil {
		t.Fatalf("consumer for %s: %v", topic, err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []*sarama.ConsumerMessage
	for p := range ends {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			t.Fatalf("consuming %s/%d: %v", topic, p, err)
		}
		n := 0
	read:
		for {
			select {
			case m := <-pc.Messages():
				if string(m.Value) == sentinel {
					break read
				}
				got = append(got, m)
				n++
			case <-ctx.Done():
				pc.AsyncClose()
				t.Fatalf("read %d committed records of %s/%d and no sentinel within %s", n, topic, p, timeout)
			}
		}
		pc.AsyncClose()
	}
	return got
}

// OutputEndpoint is the ledgers' http handler (handler.response: outputs,
// encoding utf8): input record (partition p, offset o) gets o%3 outputs
// "p/o/i" keyed like it, after wait; handled counts the requests.
func OutputEndpoint(handled *atomic.Int64, wait time.Duration) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		time.Sleep(wait)
		key, _ := base64.StdEncoding.DecodeString(r.Header.Get("Kafka-Key"))
		p, o := r.Header.Get("Kafka-Partition"), r.Header.Get("Kafka-Offset")
		off, _ := strconv.ParseInt(o, 10, 64)
		w.Header().Set("Content-Type", "application/x-ndjson")
		for i := range off % 3 {
			line, _ := json.Marshal(map[string]string{"key": string(key), "value": fmt.Sprintf("%s/%s/%d", p, o, i)})
			_, _ = w.Write(append(line, '\n'))
		}
	}))
}

// PipelineConfig writes the configuration of a turbo run that reads input
// (group: group) with key ordering, posts each record to url and writes the
// outputs its answers list to output; output lists more of the output
// block's keys ("exactly_once: true", …) and extra more top-level YAML.
func PipelineConfig(t testing.TB, broker, group, input, url, output, outputKeys string, concurrency int, extra string) string {
	t.Helper()
	return WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: pipe
    group: %s
    topics: [%s]
    ordering: key
    concurrency: %d
    commit_interval: 200ms
    handler: {type: http, url: %q, timeout: 30s, response: outputs, encoding: utf8}
    output: {topic: %s, %s}
%s
`, broker, group, input, concurrency, url, output, outputKeys, extra))
}
