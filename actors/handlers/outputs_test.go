package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/actors/harness"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/handlerpb"
)

// outputsConsumer is a consumer of "in" whose handler's answers list
// outputs for "out" (the default) and "side".
func outputsConsumer(name string) config.Consumer {
	c := harness.Consumer(name, "in")
	c.Output.Topic, c.Output.Topics = "out", []string{"side"}
	c.OnFailure, c.DLQTopic = config.OnFailureDLQ, "dead"
	c.Retry.MaxAttempts = 1
	return c
}

// outputStrings shows outputs as topic|key|value|headers, sorted.
func outputStrings(outs []harness.Record) []string {
	var s []string
	for _, o := range outs {
		var hs []string
		for _, h := range o.Headers {
			hs = append(hs, h.Key+"="+string(h.Value))
		}
		key := "<nil>"
		if o.Key != nil {
			key = string(o.Key)
		}
		value := "<nil>"
		if o.Value != nil {
			value = string(o.Value)
		}
		s = append(s, fmt.Sprintf("%s|%s|%s|%s", o.Topic, key, value, strings.Join(hs, ",")))
	}
	sort.Strings(s)
	return s
}

// An answer to one record lists its outputs as NDJSON: base64 by default,
// a topic or output.topic, a tombstone, headers; they are written.
func TestHTTPAnswerListsOutputs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		off := r.Header.Get("Kafka-Offset")
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintf(w, `{"key":%s,"value":%s,"headers":[{"key":"from","value":%s}]}`+"\n", jsonBytes("k"+off), jsonBytes("v"+off), jsonBytes(off))
		fmt.Fprintf(w, `{"topic":"side","key":null,"value":null}`+"\n")
	}))
	defer srv.Close()
	c := outputsConsumer("http-one")
	c.Handler = config.Handler{Type: config.HandlerHTTP, URL: srv.URL, Timeout: 5 * time.Second, Response: config.ResponseOutputs}
	h := harness.New(t, harness.Config{Consumer: c}, newHandler(t, c))
	h.Feed(harness.Seq("in", 0, 0, 2, 2)...)
	h.Assign("in", 0)
	h.AwaitCommitted("in", 0, 2)
	got := outputStrings(h.Outputs())
	want := []string{"out|k0|v0|from=0", "out|k1|v1|from=1", "side|<nil>|<nil>|", "side|<nil>|<nil>|"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("outputs %q, want %q", got, want)
	}
}

// jsonBytes is b as a JSON string of its base64.
func jsonBytes(s string) string {
	b, _ := json.Marshal([]byte(s))
	return string(b)
}

func newHandler(t *testing.T, c config.Consumer) actors.Handler {
	t.Helper()
	h, err := New(c.Handler, c.Concurrency, nil)
	if err != nil {
		t.Fatalf("handler: %v", err)
	}
	return h
}

// An answer whose outputs cannot be read fails the record for good, naming
// what was wrong; an output the rules refuse fails it too; a plain answer
// with no body writes nothing.
func TestHTTPBadOutputsFailTheRecord(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Kafka-Offset") {
		case "0":
			fmt.Fprint(w, "OK") // not JSON
		case "1":
			fmt.Fprint(w, `{"value":"aGk=","colour":"blue"}`) // unknown field
		case "2":
			fmt.Fprint(w, `{"topic":"elsewhere","value":"aGk="}`) // not allowed
		case "3":
			fmt.Fprint(w, `{"value":"not base64!"}`)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	c := outputsConsumer("http-bad")
	c.Handler = config.Handler{Type: config.HandlerHTTP, URL: srv.URL, Timeout: 5 * time.Second, Response: config.ResponseOutputs}
	h := harness.New(t, harness.Config{Consumer: c}, newHandler(t, c))
	h.Feed(harness.Seq("in", 0, 0, 5, 5)...)
	h.Assign("in", 0)
	h.AwaitCommitted("in", 0, 5)
	dead := h.AwaitDeadLetters(4)
	want := map[string]string{"0": "not JSON", "1": `unknown field "colour"`, "2": `topic "elsewhere" is not in output.topic`, "3": "value (base64, handler.encoding)"}
	for _, d := range dead {
		off, _ := d.Header("turbo-original-offset")
		reason, _ := d.Header("turbo-error")
		if !strings.Contains(reason, want[off]) || want[off] == "" {
			t.Errorf("offset %s dead-lettered with %q, want it to say %q", off, reason, want[off])
		}
	}
	if n := len(h.Outputs()); n != 0 {
		t.Errorf("%d outputs written, want none", n)
	}
}

// A batch's answer names each output's input: a 200 lists outputs for some
// records, a 207 fails one record and lists outputs for another (those of
// the failed record are dropped); utf8 encoding reads strings as they are.
func TestHTTPBatchAnswerListsOutputs(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var lines []string
		failed := ""
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			var rec struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				Offset    int64  `json:"offset"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			in := fmt.Sprintf(`{"topic":%q,"partition":%d,"offset":%d}`, rec.Topic, rec.Partition, rec.Offset)
			if rec.Offset == 3 {
				failed = in
			}
			lines = append(lines, fmt.Sprintf(`{"input":%s,"key":"k%d","value":"v%d"}`, in, rec.Offset, rec.Offset))
		}
		if failed == "" {
			fmt.Fprint(w, strings.Join(lines, "\n"))
			return
		}
		w.WriteHeader(http.StatusMultiStatus)
		f := strings.TrimSuffix(failed, "}") + `,"retryable":false,"error":"no"}`
		fmt.Fprintf(w, `{"failed":[%s],"outputs":[%s]}`, f, strings.Join(lines, ","))
	}))
	defer srv.Close()
	c := outputsConsumer("http-batch")
	c.Batch = config.Batch{MaxRecords: 4}
	c.Ordering = config.OrderingUnordered
	c.Handler = config.Handler{Type: config.HandlerHTTP, URL: srv.URL, Timeout: 5 * time.Second, Response: config.ResponseOutputs, Encoding: config.EncodingUTF8}
	hh := newHandler(t, c).(*HTTP)
	h := harness.NewBatch(t, harness.Config{Consumer: c}, hh)
	h.Feed(harness.Seq("in", 0, 0, 8, 8)...)
	h.Assign("in", 0)
	h.AwaitCommitted("in", 0, 8)
	h.AwaitDeadLetters(1)
	var got []string
	for _, o := range h.Outputs() {
		got = append(got, string(o.Key)+"="+string(o.Value))
	}
	sort.Strings(got)
	want := []string{"k0=v0", "k1=v1", "k2=v2", "k4=v4", "k5=v5", "k6=v6", "k7=v7"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("outputs %v, want %v (offset 3 failed: its outputs dropped)", got, want)
	}
}

// An output naming a record outside the batch fails the whole batch for
// good: where it belongs is unknown.
func TestHTTPBatchOutputOutsideTheBatch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"input":{"topic":"in","partition":9,"offset":0},"value":"eA=="}`)
	}))
	defer srv.Close()
	c := outputsConsumer("http-outside")
	c.Batch = config.Batch{MaxRecords: 2}
	c.Handler = config.Handler{Type: config.HandlerHTTP, URL: srv.URL, Timeout: 5 * time.Second, Response: config.ResponseOutputs}
	h := harness.NewBatch(t, harness.Config{Consumer: c}, newHandler(t, c).(*HTTP))
	h.Feed(harness.Seq("in", 0, 0, 2, 1)...)
	h.Assign("in", 0)
	h.AwaitCommitted("in", 0, 2)
	for _, d := range h.AwaitDeadLetters(2) {
		if reason, _ := d.Header("turbo-error"); !strings.Contains(reason, "in/9@0 is not in the batch") {
			t.Errorf("dead letter: %q, want it to name the output's input", reason)
		}
	}
	if n := len(h.Outputs()); n != 0 {
		t.Errorf("%d outputs written, want none", n)
	}
}

// outputService answers each record with one output (key and value from
// the record's offset), and a batch with one output per record by index.
type outputService struct {
	handlerpb.UnimplementedRecordHandlerServer
}

func (outputService) Handle(_ context.Context, r *handlerpb.Record) (*handlerpb.Result, error) {
	off := strconv.FormatInt(r.GetOffset(), 10)
	return &handlerpb.Result{Outputs: []*handlerpb.Output{{Key: []byte("k" + off), Value: []byte("v" + off),
		Headers: []*handlerpb.Header{{Key: "from", Value: []byte(off)}}}}}, nil
}

func (outputService) HandleBatch(_ context.Context, b *handlerpb.Batch) (*handlerpb.BatchResult, error) {
	res := &handlerpb.BatchResult{}
	for i, r := range b.GetRecords() {
		off := strconv.FormatInt(r.GetOffset(), 10)
		res.Outputs = append(res.Outputs, &handlerpb.Output{Topic: "side", Value: []byte("b" + off), Index: int32(i)})
	}
	return res, nil
}

// A gRPC service's Result and BatchResult carry outputs.
func TestGRPCResultCarriesOutputs(t *testing.T) {
	addr := serve(t, outputService{})
	for _, batch := range []int{1, 3} {
		t.Run(fmt.Sprintf("batch %d", batch), func(t *testing.T) {
			c := outputsConsumer(fmt.Sprintf("grpc-%d", batch))
			c.Batch = config.Batch{MaxRecords: batch}
			c.Handler = config.Handler{Type: config.HandlerGRPC, Target: addr, Timeout: 5 * time.Second, Response: config.ResponseOutputs}
			g := newGRPC(t, c.Handler)
			var h *harness.Harness
			if batch == 1 {
				h = harness.New(t, harness.Config{Consumer: c}, g)
			} else {
				h = harness.NewBatch(t, harness.Config{Consumer: c}, g)
			}
			h.Feed(harness.Seq("in", 0, 0, 6, 6)...)
			h.Assign("in", 0)
			h.AwaitCommitted("in", 0, 6)
			got := outputStrings(h.Outputs())
			var want []string
			for off := range 6 {
				if batch == 1 {
					want = append(want, fmt.Sprintf("out|k%d|v%d|from=%d", off, off, off))
				} else {
					want = append(want, fmt.Sprintf("side|<nil>|b%d|", off))
				}
			}
			sort.Strings(want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("outputs %q, want %q", got, want)
			}
		})
	}
}

// A configuration whose handlers would never use its output block is
// refused, naming the key; http and grpc handlers reading their answers
// for outputs pass.
func TestCheckOutputs(t *testing.T) {
	cfg := config.Default()
	c := outputsConsumer("check")
	c.Handler = config.Handler{Type: config.HandlerNoop}
	plain := harness.Consumer("plain", "in")
	cfg.Consumers = []config.Consumer{plain, c}
	err := CheckOutputs(&cfg)
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "consumers[1].output: the noop handler writes no outputs") {
		t.Errorf("noop handler with outputs: %v", err)
	}
	cfg.Consumers[1].Handler = config.Handler{Type: config.HandlerHTTP, URL: "http://h/x", Response: config.ResponseOutputs}
	if err := CheckOutputs(&cfg); err != nil {
		t.Errorf("http handler answering outputs: %v", err)
	}
}

// The copy handler writes every record, key, value and headers, to
// output.topic — at least once, and exactly once through the transactional
// flow (the in-memory cluster's) — and the configuration check takes it.
func TestCopyHandler(t *testing.T) {
	for _, exactlyOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly_once=%t", exactlyOnce), func(t *testing.T) {
			c := harness.Consumer("copy", "in")
			c.Handler = config.Handler{Type: config.HandlerCopy}
			c.Output.Topic, c.Output.ExactlyOnce = "out", exactlyOnce
			h := harness.New(t, harness.Config{Consumer: c}, newHandler(t, c))
			recs := harness.Seq("in", 0, 0, 50, 5)
			recs[3].Headers = []harness.Header{{Key: "h", Value: []byte("x")}}
			h.Feed(recs...)
			h.Assign("in", 0)
			h.AwaitCommitted("in", 0, 50)
			outs := h.Outputs()
			if len(outs) != 50 {
				t.Fatalf("%d outputs, want 50", len(outs))
			}
			byValue := map[string]harness.Record{}
			for _, r := range recs {
				byValue[string(r.Value)] = r
			}
			last := map[string]int64{} // per key, the offset of its last output
			for _, o := range outs {
				r, ok := byValue[string(o.Value)]
				delete(byValue, string(o.Value))
				if !ok || o.Topic != "out" || string(o.Key) != string(r.Key) || fmt.Sprint(o.Headers) != fmt.Sprint(r.Headers) {
					t.Errorf("output %s %q=%q %v: no such record, or not its copy (%q=%q %v)", o.Topic, o.Key, o.Value, o.Headers, r.Key, r.Value, r.Headers)
					continue
				}
				if prev, seen := last[string(r.Key)]; seen && r.Offset < prev {
					t.Errorf("key %s: the copy of offset %d after offset %d's", r.Key, r.Offset, prev)
				}
				last[string(r.Key)] = r.Offset
			}
		})
	}
	cfg := config.Default()
	c := harness.Consumer("copy", "in")
	c.Handler = config.Handler{Type: config.HandlerCopy}
	c.Output.Topic = "out"
	cfg.Consumers = []config.Consumer{c}
	if err := CheckOutputs(&cfg); err != nil {
		t.Errorf("copy handler with an output topic: %v", err)
	}
}
