// Package webtest drives turbo's web console (supervisor/web) in a real,
// headless Chromium, for tests: OpenConsole starts a browser of the test's
// own on a page, and Page reads the live numbers the way a user sees them
// (the page's stable ids and data attributes, see console.html).
//
// The browser comes from TURBO_TEST_CHROMIUM (set by `make test-web` from
// test/web/browser.sh), else from PATH; without one, tests fail and say how
// to get one. promtool likewise comes from TURBO_TEST_PROMTOOL (CheckMetrics).
package webtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Bounds of the browser's steps: generous for a loaded 2-core CI machine,
// and each failure says what it waited for.
const (
	startTimeout  = 60 * time.Second // the browser starts and loads the first page
	actionTimeout = 15 * time.Second // one evaluation or screenshot
	stopTimeout   = 10 * time.Second // every browser process gone after Stop
	// maxOutput bounds what is kept of the browser's own output (shown when
	// a test fails).
	maxOutput = 64 << 10
)

// Window size of the console in tests: the size the page is designed for.
const (
	Width  = 1280
	Height = 800
)

// Chromium is the path of the Chromium to drive: TURBO_TEST_CHROMIUM, else
// the first of chromium, chromium-browser, google-chrome,
// google-chrome-stable on PATH. It fails the test when there is none: the
// browser test is part of the suite, not an option.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TURBO_TEST_CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("TURBO_TEST_CHROMIUM=%s is not an executable (%v); run `make test-web` or `bash test/web/browser.sh` to install Chromium", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium: TURBO_TEST_CHROMIUM is unset and none of chromium, chromium-browser, google-chrome is on PATH; " +
		"run `make test-web` (or `bash test/web/browser.sh`, which installs Debian's chromium and prints its path into TURBO_TEST_CHROMIUM)")
	return ""
}

// Page is a console page open in a headless Chromium of its own.
type Page struct {
	t       testing.TB
	tab     context.Context
	dataDir string
	output  *boundedBuffer

	mu       sync.Mutex
	problems []string // script exceptions, console errors (CSP violations among them)
}

// OpenConsole starts a headless Chromium (1280x800, a user data directory
// in the test's temp dir, --no-sandbox since tests run as root in CI) on
// url, and waits until the page has shown a first answer of /status. The
// browser is stopped, and every process of it waited for, when the test
// ends.
func OpenConsole(t testing.TB, url string) *Page {
	t.Helper()
	p := &Page{t: t, dataDir: t.TempDir(), output: &boundedBuffer{max: maxOutput}}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox,
		chromedp.WindowSize(Width, Height),
		chromedp.UserDataDir(p.dataDir),
		chromedp.CombinedOutput(p.output),
	)
	allocCtx, stopAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, stopTab := chromedp.NewContext(allocCtx, chromedp.WithListener(p.event))
	p.tab = tab
	t.Cleanup(func() {
		stopTab()
		stopAlloc() // kills the browser and waits for it
		p.awaitGone()
		if t.Failed() {
			t.Logf("the browser's output:\n%s", p.output.String())
		}
	})

	// The first Run starts the browser, which lives as long as the
	// context of that Run: so no timeout on it, and a timer instead that
	// stops everything if the start hangs.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(tab, chromedp.Navigate(url)) }()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting Chromium and loading %s: %v\nthe browser's output:\n%s", url, err, p.output.String())
		}
	case <-timer.C:
		stopTab()
		<-started
		t.Fatalf("Chromium did not start and load %s within %v\nthe browser's output:\n%s", url, startTimeout, p.output.String())
	}
	p.Await("the console's first answer from /status", `document.getElementById("conn").dataset.state === "ok"`, actionTimeout)
	return p
}

// Navigate loads url in the page's tab and waits for its first answer from
// /status.
func (p *Page) Navigate(url string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, actionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		p.t.Fatalf("loading %s: %v", url, err)
	}
	p.Await("the console's first answer from /status", `document.getElementById("conn").dataset.state === "ok"`, actionTimeout)
}

// event records what the page's scripts got wrong. It runs on the tab's
// reading goroutine: it must be quick and run no command.
func (p *Page) event(ev any) {
	var problem string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		problem = fmt.Sprintf("exception at line %d: %s", d.LineNumber, d.Text)
		if d.Exception != nil && d.Exception.Description != "" {
			problem += ": " + d.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			problem = fmt.Sprintf("console.%s called", ev.Type)
		}
	case *log.EventEntryAdded:
		// Failed fetches of /status while the server is away are the
		// page's business (it shows "connection lost"); anything else at
		// error level — a blocked script or style, above all — is not.
		if e := ev.Entry; e.Level == log.EntryLevelError && e.Source != log.EntrySourceNetwork {
			problem = fmt.Sprintf("%s error: %s", e.Source, e.Text)
		}
	}
	if problem != "" {
		p.mu.Lock()
		if len(p.problems) < 100 {
			p.problems = append(p.problems, problem)
		}
		p.mu.Unlock()
	}
}

// Problems are the script exceptions and console errors seen so far.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// Eval evaluates expr in the page and decodes its value into T; it fails
// the test when that is not possible within actionTimeout.
func Eval[T any](p *Page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, actionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluating %s in the console: %v", expr, err)
	}
	return v
}

// Await waits until the JavaScript expression cond is true in the page
// (checked every 50 ms), failing the test after timeout with what it
// waited for and what the page showed.
func (p *Page) Await(what, cond string, timeout time.Duration) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, timeout)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		p.t.Fatalf("waited %v for %s (%s): %v\nthe page shows: %s\nproblems: %q", timeout, what, cond, err, p.summary(), p.Problems())
	}
}

// Click clicks the element selector names, waiting up to timeout for it
// to be there. The page rebuilds its tables every second, so the lookup and
// the click are one script: a rebuild cannot fall between them.
func (p *Page) Click(what, selector string, timeout time.Duration) {
	p.t.Helper()
	p.Await("to click "+what, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e || e.disabled) return false; e.click(); return true })()`, selector), timeout)
}

// Type sets the value of the input selector names and sends it the input
// event typing sends.
func (p *Page) Type(selector, text string) {
	p.t.Helper()
	if !Eval[bool](p, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.value = %q;
		e.dispatchEvent(new Event("input", { bubbles: true })); return true })()`, selector, text)) {
		p.t.Fatalf("no input %s to type into", selector)
	}
}

// ActionResult waits for the action panel's answer to a confirmed command
// and returns whether it succeeded and its text.
func (p *Page) ActionResult(timeout time.Duration) (bool, string) {
	p.t.Helper()
	p.Await("the answer to the command", `document.getElementById("action-result").dataset.ok !== ""`, timeout)
	ok := Eval[string](p, `document.getElementById("action-result").dataset.ok`) == "true"
	return ok, Eval[string](p, `document.getElementById("action-result").textContent`)
}

// Lag is the lag the row of partition topic/partition shows.
func (p *Page) Lag(tp string) int64 {
	p.t.Helper()
	s := Eval[string](p, fmt.Sprintf(`(document.querySelector('tr[data-partition=%q]') || {dataset: {lag: "-1"}}).dataset.lag`, tp))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		p.t.Fatalf("the row of %s shows lag %q", tp, s)
	}
	return n
}

// summary is the page's header and totals as text, for failure messages.
func (p *Page) summary() string {
	ctx, cancel := context.WithTimeout(p.tab, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`[...document.querySelectorAll("header, #stuck, .cards")].map(e => e.innerText).join(" | ").replace(/\s+/g, " ")`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// Processed is the total processed count the page shows (#processed).
func (p *Page) Processed() int64 {
	p.t.Helper()
	s := Eval[string](p, `document.getElementById("processed").textContent`)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strings.TrimLeft(s, "0123456789") != "" {
		p.t.Fatalf("#processed shows %q, want digits only", s)
	}
	return n
}

// Rate is the records/s the page shows (#rate), as text.
func (p *Page) Rate() string {
	p.t.Helper()
	return Eval[string](p, `document.getElementById("rate").textContent`)
}

// Stuck is the page's stuck list: "topic/partition" → the age in seconds
// of the partition's oldest unfinished record.
func (p *Page) Stuck() map[string]float64 {
	p.t.Helper()
	return Eval[map[string]float64](p, `Object.fromEntries([...document.querySelectorAll("li[data-stuck]")]
		.map(li => [li.dataset.stuck, parseFloat(li.dataset.age)]))`)
}

// StuckRows are the "topic/partition" of the partition rows marked stuck.
func (p *Page) StuckRows() []string {
	p.t.Helper()
	return Eval[[]string](p, `[...document.querySelectorAll("tr.stuck[data-partition]")].map(tr => tr.dataset.partition)`)
}

// Ready is whether the ready badge says ready.
func (p *Page) Ready() bool {
	p.t.Helper()
	return Eval[bool](p, `document.getElementById("ready").dataset.ok === "true"`)
}

// Live is whether the live badge says live.
func (p *Page) Live() bool {
	p.t.Helper()
	return Eval[bool](p, `document.getElementById("live").dataset.ok === "true"`)
}

// Connection is the state of the page's polling: "ok", or "lost" while
// /status fails.
func (p *Page) Connection() string {
	p.t.Helper()
	return Eval[string](p, `document.getElementById("conn").dataset.state`)
}

// Screenshot saves a PNG of the whole page (not only the 1280x800 window)
// at path and returns its size in bytes.
func (p *Page) Screenshot(path string) int64 {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, actionTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	return int64(len(png))
}

// awaitGone waits until no process runs with the page's user data
// directory: chromedp kills the browser, but its helpers (zygote, GPU and
// network processes) die after it. Any still there after stopTimeout are
// killed and fail the test.
func (p *Page) awaitGone() {
	deadline := time.Now().Add(stopTimeout)
	for {
		pids := processesWith("--user-data-dir=" + p.dataDir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			p.t.Errorf("%d Chromium processes (%v) still ran %v after the browser was stopped; killed", len(pids), pids, stopTimeout)
			return
		}
		time.Sleep(20 * time.Millisecond) // no event tells when another process's children are gone
	}
}

// processesWith lists the processes (not zombies) that have arg on their
// command line.
func processesWith(arg string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(cmdline) == 0 { // gone, or a zombie waiting for its parent
			continue
		}
		for a := range bytes.SplitSeq(cmdline, []byte{0}) {
			if string(a) == arg {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// boundedBuffer keeps the first max bytes written to it, from any
// goroutine.
type boundedBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
}

// Write keeps what fits and reports everything written: a short write
// would make exec stop copying, and the browser block on a full pipe.
func (b *boundedBuffer) Write(q []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(q)
	if room := b.max - b.buf.Len(); room < n {
		b.truncated = true
		q = q[:max(room, 0)]
	}
	b.buf.Write(q)
	return n, nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.truncated {
		return b.buf.String() + "\n… (truncated)"
	}
	return b.buf.String()
}

// Keep copies a screenshot to TURBO_TEST_WEB_SCREENSHOTS, when set, for a
// human to look at after the run (the test's temp dir is removed).
func Keep(t testing.TB, path string) {
	t.Helper()
	dir := os.Getenv("TURBO_TEST_WEB_SCREENSHOTS")
	if dir == "" {
		return
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, filepath.Base(path)), b, 0o644)
	}
	if err != nil {
		t.Errorf("keeping the screenshot in TURBO_TEST_WEB_SCREENSHOTS: %v", err)
	}
}
