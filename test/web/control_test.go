//go:build linux

package webtest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/turbokafka/turbo/test/testkit"
	webtest "github.com/turbokafka/turbo/test/web"
)

// poisonOne is the http endpoint of the control test: orders/1@5 fails
// every time it is delivered (until it is skipped, it is never delivered
// again), every other record takes a little work.
type poisonOne struct{ poisoned atomic.Int64 }

func (h *poisonOne) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Kafka-Partition") == "1" && r.Header.Get("Kafka-Offset") == "5" {
		h.poisoned.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	time.Sleep(time.Millisecond)
	w.WriteHeader(http.StatusNoContent)
}

// TestConsoleCommandsARealRun: in headless Chromium, on a real `turbo run`
// with http.control and a token, with one record failing for good:
//   - without the token, a command is refused, and the page says so;
//   - with the token typed in, the stuck record shows in the stuck list
//     with its offset; skip, confirm: the answer says it was skipped, and
//     the partition's lag drains to 0;
//   - pause a partition from its row: while records are produced, its lag
//     grows and the others drain; resume it: it drains too;
//   - the commands are listed, the token appears nowhere in the output.
func TestConsoleCommandsARealRun(t *testing.T) {
	topic := testkit.TopicName("console-control")
	addr := testkit.Cluster(t, 4, topic)
	testkit.Produce(t, []string{addr}, topic, 2000, 200)
	h := &poisonOne{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	const token = "console-control-token-0123456789abcdef"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testkit.WriteConfig(t, fmt.Sprintf(`
kafka:
  brokers: [%q]
consumers:
  - name: orders
    group: %s
    topics: [%s]
    concurrency: 8
    commit_interval: 100ms
    handler: {type: http, url: %q, timeout: 30s}
    retry: {max_attempts: 1000, initial_backoff: 200ms, max_backoff: 1s}
    on_failure: skip
http: {listen: "127.0.0.1:0", control: true, control_token_file: %q}
shutdown_timeout: 5s
log: {level: info, format: json}
`, addr, topic, topic, srv.URL, tokenFile))
	var stderr testkit.Buffer
	run, listen := testkit.StartHTTP(t, nil, &stderr, "run", "--config", cfg)
	page := webtest.OpenConsole(t, "http://"+listen+"/")
	p1, p2 := topic+"/1", topic+"/2"
	shots := t.TempDir()
	shot := func(name string) int64 {
		t.Helper()
		path := filepath.Join(shots, name)
		size := page.Screenshot(path)
		if size < 10_000 {
			t.Errorf("screenshot %s is %d bytes: too small to show the page", name, size)
		}
		webtest.Keep(t, path)
		return size
	}

	// stuck_after is max(5 s, retry.max_backoff) = 5 s. On a loaded
	// machine a record still queued behind the others can be that old too
	// (the list names the oldest unfinished record): wait for the poison
	// record to be the one named.
	page.Await(p1+"@5 in the stuck list with a skip button", fmt.Sprintf(`((b) => b !== null && JSON.parse(b.dataset.cmd).offset === 5)(document.querySelector('li[data-stuck=%q] button[data-act="skip"]'))`, p1), time.Minute)
	if !webtest.Eval[bool](page, `!document.getElementById("control").hidden`) {
		t.Fatal("the console does not offer the token field, though the listener needs a token")
	}

	// Without the token: refused, and the page says why.
	page.Click("pause on the row of "+p2, fmt.Sprintf(`tr[data-partition=%q] button[data-act="pause"]`, p2), 30*time.Second)
	page.Click("confirm", "#action-confirm", 10*time.Second)
	if ok, text := page.ActionResult(30 * time.Second); ok || !strings.Contains(text, "HTTP 403") || !strings.Contains(text, "token") {
		t.Fatalf("a command without the token: ok=%v %q, want refused with 403 naming the token", ok, text)
	}
	page.Click("close", "#action-cancel", 10*time.Second)
	page.Type("#control-token", token)

	// Skip the poison record.
	page.Click("skip on the stuck "+p1, fmt.Sprintf(`li[data-stuck=%q] button[data-act="skip"]`, p1), 30*time.Second)
	if title := webtest.Eval[string](page, `document.getElementById("action-title").textContent`); !strings.Contains(title, p1+"@5") {
		t.Fatalf("the confirmation asks %q, want the record %s@5 named", title, p1)
	}
	page.Click("confirm", "#action-confirm", 10*time.Second)
	if ok, text := page.ActionResult(30 * time.Second); !ok || !strings.Contains(text, "skipped") {
		t.Fatalf("the skip: ok=%v %q, want done and skipped", ok, text)
	}
	page.Click("close", "#action-cancel", 10*time.Second)
	page.Await(p1+"'s lag to drain to 0 and nothing stuck", fmt.Sprintf(`document.querySelector('tr[data-partition=%q][data-lag="0"]') !== null && document.querySelector("li[data-stuck]") === null`, p1), time.Minute)
	poisoned := h.poisoned.Load()
	skipped := shot("console-after-skip.png")

	// Pause a partition from its row; its lag grows while the others drain.
	page.Click("pause on the row of "+p2, fmt.Sprintf(`tr[data-partition=%q] button[data-act="pause"]`, p2), 30*time.Second)
	page.Click("confirm", "#action-confirm", 10*time.Second)
	if ok, text := page.ActionResult(30 * time.Second); !ok || !strings.Contains(text, "paused") {
		t.Fatalf("the pause: ok=%v %q", ok, text)
	}
	page.Click("close", "#action-cancel", 10*time.Second)
	page.Await(p2+" held", fmt.Sprintf(`document.querySelector('tr[data-partition=%q][data-held="true"]') !== null`, p2), 30*time.Second)
	before := page.Lag(p2)
	testkit.Produce(t, []string{addr}, topic, 2000, 200)
	page.Await(p2+"'s lag to grow while the others drain", fmt.Sprintf(`(() => {
		const rows = [...document.querySelectorAll("tr[data-partition]")];
		return rows.length === 4 && rows.every(r => r.dataset.partition === %q ? Number(r.dataset.lag) > %d : r.dataset.lag === "0");
	})()`, p2, before), time.Minute)
	held := page.Lag(p2)
	paused := shot("console-partition-held.png")

	// Resume it from its row: it drains.
	page.Click("resume on the row of "+p2, fmt.Sprintf(`tr[data-partition=%q] button[data-act="resume"]`, p2), 30*time.Second)
	page.Click("confirm", "#action-confirm", 10*time.Second)
	if ok, text := page.ActionResult(30 * time.Second); !ok || !strings.Contains(text, "resumed") {
		t.Fatalf("the resume: ok=%v %q", ok, text)
	}
	page.Click("close", "#action-cancel", 10*time.Second)
	page.Await("every partition's lag at 0", `(() => { const rows = [...document.querySelectorAll("tr[data-partition]")];
		return rows.length === 4 && rows.every(r => r.dataset.lag === "0") })()`, time.Minute)

	// Replay a partition from its row's form, to an offset; retune the
	// consumer from its fields.
	p3 := topic + "/3"
	page.Click("replay on the row of "+p3, fmt.Sprintf(`tr[data-partition=%q] button[data-act="seek"]`, p3), 30*time.Second)
	page.Type("#action-offset", "10")
	page.Click("confirm", "#action-confirm", 10*time.Second)
	if ok, text := page.ActionResult(30 * time.Second); !ok || !strings.Contains(text, p3+" moves back") || !strings.Contains(text, "to 10 (") {
		t.Fatalf("the replay: ok=%v %q, want %s moved back to 10", ok, text, p3)
	}
	page.Click("close", "#action-cancel", 10*time.Second)
	page.Click("retune", `section[data-consumer="orders"] button[data-act="retune"]`, 30*time.Second)
	page.Type("#action-concurrency", "3")
	page.Click("confirm", "#action-confirm", 10*time.Second)
	if ok, text := page.ActionResult(30 * time.Second); !ok || !strings.Contains(text, "concurrency 3 (was 8)") {
		t.Fatalf("the retune: ok=%v %q", ok, text)
	}
	page.Click("close", "#action-cancel", 10*time.Second)
	page.Await("the consumer's concurrency shown as 3, retuned, and every lag at 0 after the replay", `(() => {
		const tuning = document.querySelector('section[data-consumer="orders"] [data-tuning]');
		const rows = [...document.querySelectorAll("tr[data-partition]")];
		return tuning && tuning.textContent.startsWith("concurrency 3 ") && tuning.textContent.includes("(retuned)") &&
			rows.length === 4 && rows.every(r => r.dataset.lag === "0") })()`, time.Minute)
	if n := webtest.Eval[int](page, `document.querySelectorAll("#command-list li").length`); n != 5 {
		t.Errorf("the console lists %d commands, want 5 (skip, pause, resume, seek, retune: a refused request is no command)", n)
	}
	if h.poisoned.Load() != poisoned {
		t.Errorf("the skipped record was delivered again: %d deliveries, %d at the skip", h.poisoned.Load(), poisoned)
	}
	if p := page.Problems(); len(p) > 0 {
		t.Errorf("the page reported problems: %v", p)
	}
	run.Signal(t, syscall.SIGTERM)
	if code := run.Wait(t, 30*time.Second); code != 0 {
		t.Errorf("turbo run exited %d after SIGTERM, want 0", code)
	}
	if strings.Contains(stderr.String(), token) {
		t.Error("turbo's output shows the control token")
	}
	t.Logf("FIGURES console control: poison delivered %d times before the skip; %s lag %d when paused, %d after 2000 more records; screenshots %d and %d bytes",
		poisoned, p2, before, held, skipped, paused)
}
