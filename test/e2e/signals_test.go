package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/actors/offsetmeta"
	"github.com/turbokafka/turbo/test/testkit"
)

// Signals and the shutdown promise: every
// test drives the real binary, sends real signals, and judges the exit code,
// the time to exit and what was committed.

// failingEndpoint answers 500 to every record and counts the distinct
// records it saw, so that a handler with on_failure: skip logs one warning
// per record.
type failingEndpoint struct {
	mu   sync.Mutex
	seen map[string]bool
}

func newFailingEndpoint(t *testing.T) (*failingEndpoint, string) {
	e := &failingEndpoint{seen: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		e.mu.Lock()
		e.seen[req.Header.Get("Kafka-Partition")+"@"+req.Header.Get("Kafka-Offset")] = true
		e.mu.Unlock()
		http.Error(w, "this endpoint always fails", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return e, srv.URL
}

func (e *failingEndpoint) distinct() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.seen)
}

// skipConfig consumes topic with the http handler posting to url, skipping
// (and logging) each record that fails.
func skipConfig(t *testing.T, addr, topic, url string) string {
	return testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: orders
    group: %s
    topics: [%s]
    concurrency: 8
    commit_interval: 200ms
    on_failure: skip
    retry: {max_attempts: 1}
    handler: {type: http, url: %q, timeout: 30s}
shutdown_timeout: 10s
log: {level: info, format: json}
`, addr, topic, topic, url))
}

// committedSum is the sum of the group's committed offsets over topic's
// partitions (partitions without a commit count 0).
func committedSum(t *testing.T, addr, group, topic string) int64 {
	var sum int64
	for _, off := range testkit.CommittedOffsets(t, []string{addr}, group, topic) {
		sum += max(off, 0)
	}
	return sum
}

// finishedNotCommitted counts the records the ledger saw finish whose
// offsets are at or above their partition's committed offset: work a
// graceful stop of a member must not leave uncommitted (a stopping member
// runs what lies below the highest record it started, so the offset itself
// passes every finished record). inMetadata counts those of them that the
// commit's metadata lists as finished: what the next owner skips, and all a
// rebalance's revocation promises (it drops what has not started).
func finishedNotCommitted(t *testing.T, addr, group, topic string, handled map[string]int) (n, inMetadata int) {
	t.Helper()
	committed := testkit.CommittedOffsets(t, []string{addr}, group, topic)
	finished := map[int32][]offsetmeta.Range{}
	for id := range handled {
		var p int32
		var off int64
		if _, err := fmt.Sscanf(id[strings.LastIndex(id, "/")+1:], "%d@%d", &p, &off); err != nil {
			t.Fatalf("ledger id %q: %v", id, err)
		}
		if off < committed[p] {
			continue
		}
		n++
		rs, ok := finished[p]
		if !ok {
			c, meta := testkit.CommittedMetadata(t, []string{addr}, group, topic, p)
			rs, _ = offsetmeta.Decode(c, meta) // none known when it cannot be read
			finished[p] = rs
		}
		for _, r := range rs {
			if r.From <= off && off <= r.To {
				inMetadata++
				break
			}
		}
	}
	return n, inMetadata
}

// stderrRecords are enough warnings (~1.4 MB, about 240 bytes each) to fill
// the pipe and turbo's 1 MiB queue: about 4,500 lines fit in both.
const stderrRecords = 6000

// stderrUnread is a `turbo run` skipping stderrRecords records against an
// endpoint that fails them all (a warning each), with stderr a pipe whose
// read end the test holds and does not read.
type stderrUnread struct {
	ep          *failingEndpoint
	run         *testkit.Proc
	addr, topic string
	stderr      *os.File // the read end: kept open, read only if the test says so
}

func startWithStderrUnread(t *testing.T) stderrUnread {
	t.Helper()
	topic := testkit.TopicName("orders")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, stderrRecords, 100)
	ep, url := newFailingEndpoint(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() }) // until then, writes fill the pipe and then block
	run := testkit.StartWith(t, nil, w, "run", "--config", skipConfig(t, addr, topic, url))
	w.Close()
	return stderrUnread{ep: ep, run: run, addr: addr, topic: topic, stderr: r}
}

// Point 1: a stderr nobody reads (a stuck log shipper) and one warning per
// record. Before the fix, turbo blocked once the pipe's 64 KiB filled (a few
// hundred records) and then ignored SIGTERM: logging must never block the
// pipeline or the signal path.
func TestRunKeepsGoingWhenStderrIsNeverRead(t *testing.T) {
	t.Parallel()
	sr := startWithStderrUnread(t)
	const records = stderrRecords
	ep, run, addr, topic := sr.ep, sr.run, sr.addr, sr.topic

	deadline := time.Now().Add(60 * time.Second)
	for ep.distinct() < records && time.Now().Before(deadline) && run.Alive() {
		time.Sleep(10 * time.Millisecond)
	}
	handled := ep.distinct()
	if handled < records {
		t.Errorf("with stderr never read, only %d of %d records were handled in 60 s (a blocked logger holds the pipeline)", handled, records)
	}
	sent := run.Signal(t, syscall.SIGTERM) // stderr still unread
	code, how := run.WaitHow(t, 30*time.Second)
	took := run.Exited.Sub(sent)
	if code != 0 {
		t.Errorf("turbo run ended with %s after SIGTERM, want exit code 0", how)
	}
	if took > 12*time.Second {
		t.Errorf("exit took %s after SIGTERM (shutdown_timeout 10 s)", took)
	}
	sum := committedSum(t, addr, topic, topic)
	if sum != records {
		t.Errorf("committed %d of %d records (every one was handled and skipped)", sum, records)
	}
	t.Logf("FIGURES stderr-never-read broker=%s: %d of %d handled, SIGTERM → %s after %s, %d of %d committed",
		brokerKind(), handled, records, how, took.Round(time.Millisecond), sum, records)
}

// Point 1: the lines dropped while stderr was not read are counted: one line
// in the log once the reader is back, and the total in the exit summary.
func TestRunReportsTheLogLinesItDropped(t *testing.T) {
	t.Parallel()
	sr := startWithStderrUnread(t)
	ep, run, r := sr.ep, sr.run, sr.stderr
	testkit.Eventually(t, 60*time.Second, "every record handled with stderr unread", func() bool { return ep.distinct() == stderrRecords })

	// The reader comes back.
	out := &lineWatcher{want: `"dropped_lines"`, seen: make(chan struct{})}
	reading := make(chan error, 1)
	go func() { _, err := io.Copy(out, r); reading <- err }()
	select {
	case <-out.seen:
	case <-time.After(20 * time.Second):
		t.Fatalf("no line said that log lines were dropped within 20 s of the reader's return:\n%s", tail(out.String(), 2000))
	}
	run.Signal(t, syscall.SIGTERM)
	code, how := run.WaitHow(t, 30*time.Second)
	if err := <-reading; err != nil {
		t.Fatalf("reading stderr: %v", err)
	}
	if code != 0 {
		t.Errorf("turbo run ended with %s after SIGTERM, want exit code 0", how)
	}
	// In JSON mode the summary is a JSON object.
	summary := strings.TrimSpace(grepLines(out.String(), `"message":"exit summary"`))
	var sum struct {
		Dropped *int64 `json:"dropped_lines"`
	}
	if err := json.Unmarshal([]byte(summary), &sum); err != nil || sum.Dropped == nil || *sum.Dropped <= 0 {
		t.Errorf("the exit summary does not count the dropped lines (%v): %q", err, summary)
	}
	t.Logf("FIGURES dropped-log-lines: %s; summary: %s", strings.TrimSpace(grepLines(out.String(), `"dropped_lines"`)), summary)
}

// Point 9: `turbo run ... 2>&1 | head -1`: the reader goes away after one
// line. Before the fix the next write to stderr killed turbo with SIGPIPE
// (exit 141), nothing committed. A lost log reader is not a reason to lose
// work: turbo goes on, and stops gracefully on SIGTERM.
func TestRunSurvivesALostOutputReader(t *testing.T) {
	t.Parallel()
	const records = 2000
	topic := testkit.TopicName("orders")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, 100)
	ep, url := newFailingEndpoint(t)

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	run := testkit.StartWith(t, w, w, "run", "--config", skipConfig(t, addr, topic, url))
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the first line: %v", err)
	}
	r.Close() // `head -1` exits
	t.Logf("first line: %s", strings.TrimSpace(line))

	deadline := time.Now().Add(60 * time.Second)
	for ep.distinct() < records && time.Now().Before(deadline) && run.Alive() {
		time.Sleep(10 * time.Millisecond)
	}
	handled := ep.distinct()
	if !run.Alive() {
		_, how := run.WaitHow(t, time.Second)
		t.Fatalf("turbo run died once its output reader was gone (%s), after %d of %d records; committed %d",
			how, handled, records, committedSum(t, addr, topic, topic))
	}
	if handled < records {
		t.Errorf("only %d of %d records handled in 60 s", handled, records)
	}
	sent := run.Signal(t, syscall.SIGTERM)
	code, how := run.WaitHow(t, 30*time.Second)
	if code != 0 {
		t.Errorf("turbo run ended with %s after SIGTERM, want exit code 0", how)
	}
	sum := committedSum(t, addr, topic, topic)
	if sum != records {
		t.Errorf("committed %d of %d records", sum, records)
	}
	t.Logf("FIGURES lost-output-reader broker=%s: %d of %d handled, SIGTERM → %s after %s, %d of %d committed",
		brokerKind(), handled, records, how, run.Exited.Sub(sent).Round(time.Millisecond), sum, records)
}

// ledgerConfig consumes topic with the http handler posting to url (a
// ledger); commits are rare, so only a graceful stop's final commit saves
// the work.
func ledgerConfig(t *testing.T, addr, topic, url string, extra string) string {
	return testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: orders
    group: %s
    topics: [%s]
    concurrency: 8
    commit_interval: 30s
    handler: {type: http, url: %q, timeout: 30s}
shutdown_timeout: 8s
log: {level: info, format: json}
%s`, addr, topic, topic, url, extra))
}

// Point 9 (since SIGHUP reloads): a reload is a graceful restart of the
// consumers, so what finished before SIGHUP is committed by it — here
// commit_interval is 30 s, so only the reload's stop commits — and turbo
// goes on. Before SIGHUP was handled it killed turbo at once: exit 129,
// nothing committed.
func TestRunReloadCommitsWhatFinished(t *testing.T) {
	t.Parallel()
	const records = 3000
	topic := testkit.TopicName("orders")
	addr := testkit.Cluster(t, 4, topic)
	testkit.ProduceWithBinary(t, addr, topic, records, 100)
	ledger := testkit.NewLedger(5 * time.Millisecond) // 8 × 200/s: ~2 s of work
	var stderr testkit.Buffer
	run := testkit.StartWith(t, nil, &stderr, "run", "--config", ledgerConfig(t, addr, topic, ledger.Endpoint(t), ""))
	testkit.Eventually(t, 60*time.Second, "some records handled", func() bool { return ledger.Report().Distinct >= 300 })
	sent := run.Signal(t, syscall.SIGHUP)
	handled := ledger.Handled()
	testkit.Eventually(t, 30*time.Second, "the reload to be logged as done", func() bool {
		return strings.Contains(stderr.String(), "configuration reloaded")
	})
	took := time.Since(sent)
	lost, _ := finishedNotCommitted(t, addr, topic, topic, handled)
	if lost != 0 {
		t.Errorf("%d of the %d records that finished before SIGHUP are not committed after the reload", lost, len(handled))
	}
	testkit.Eventually(t, 60*time.Second, "every record handled after the reload", func() bool { return ledger.Report().Distinct == records })
	if !run.Alive() {
		t.Fatal("turbo run exited after SIGHUP")
	}
	run.Signal(t, syscall.SIGTERM)
	if code, how := run.WaitHow(t, 30*time.Second); code != 0 {
		t.Errorf("turbo run ended with %s after SIGTERM, want exit code 0", how)
	}
	t.Logf("FIGURES sighup-run broker=%s: SIGHUP → reloaded in %s; %d handled before it, %d of them committed",
		brokerKind(), took.Round(time.Millisecond), len(handled), len(handled)-lost)
}

// silentBroker accepts TCP connections and never answers: a broker that
// hangs, or a firewall that swallows replies.
func silentBroker(t *testing.T) (addr string, accepted *atomic.Int64) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	var conns []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			accepted.Add(1)
		}
	})
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String(), accepted
}

// Point 10: the shutdown budget is a hard bound, and a drain that could not
// finish (nothing could be committed) is a failed stop. Before the fix, exit
// took shutdown_timeout + 1.5 s and was 0 after "drain did not finish".
func TestRunShutdownIsBoundedAgainstASilentBroker(t *testing.T) {
	// Timed (it times the exit to 250 ms): it runs alone, after the rest (the Makefile's TIMED).
	const shutdownTimeout = 2 * time.Second
	const epsilon = 250 * time.Millisecond
	addr, accepted := silentBroker(t)
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: orders
    topics: [orders]
    handler: {type: noop}
shutdown_timeout: %s
log: {level: info, format: json}
`, addr, shutdownTimeout))
	var out testkit.Buffer
	run := testkit.StartWith(t, nil, &out, "run", "--config", cfg)
	testkit.Eventually(t, 20*time.Second, "turbo connected to the silent broker", func() bool { return accepted.Load() > 0 })
	sent := run.Signal(t, syscall.SIGTERM)
	code, how := run.WaitHow(t, shutdownTimeout+10*time.Second)
	took := run.Exited.Sub(sent)
	if took > shutdownTimeout+epsilon {
		t.Errorf("exit took %s after SIGTERM: want at most shutdown_timeout (%s) + %s", took.Round(time.Millisecond), shutdownTimeout, epsilon)
	}
	if code != 1 {
		t.Errorf("turbo run ended with %s after a drain that could not finish, want exit code 1\n%s", how, out.String())
	}
	t.Logf("FIGURES silent-broker: SIGTERM → %s after %s (shutdown_timeout %s)", how, took.Round(time.Millisecond), shutdownTimeout)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
