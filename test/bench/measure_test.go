package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/turbokafka/turbo/test/testkit"
)

// Every peer runs as its own process and is measured from outside, the same
// way for all of them:
//
//   - wall time: from just before the process is started to the moment the
//     group's committed offsets, read from the broker every pollEvery, reach
//     the end of every partition of the topic (so process start-up, joining
//     the group and the last commit count, for every peer alike);
//   - joined: from the start to the first time the broker reports the group
//     Stable (how much of the wall time is start-up and joining);
//   - CPU: user+system time of the process and its children, from /proc, at
//     that moment;
//   - peak RSS: the highest resident set of the process tree, from /proc
//     (VmHWM of the process; for a process with children, such as a swarm,
//     the highest sum of its tree's VmRSS sampled every rssEvery).
//
// The broker is another process (`turbo dev`) or another machine, so none of
// its memory or CPU is counted.
const (
	pollEvery = 20 * time.Millisecond
	rssEvery  = 100 * time.Millisecond
	// stopGrace is how long a peer may take to stop after SIGTERM before it
	// is killed: its drain and final commit are not measured.
	stopGrace = 30 * time.Second
)

// limits say when a run ends other than by its last commit.
type limits struct {
	// window, when set, stops the peer after this long whatever it committed
	// (the memory scenario: a backlog far larger than can drain).
	window time.Duration
	// cap, when set, stops a peer that has not committed everything after
	// this long; its rate is then what it committed by the cap.
	cap time.Duration
}

// outcome is what one run of a peer measured.
type outcome struct {
	wall      time.Duration // start → every offset committed, or → the window or cap
	joined    time.Duration // start → the group first Stable; 0 if never seen
	committed int64         // records committed by the end of wall
	done      bool          // every record was committed (not stopped by window or cap)
	cpu       time.Duration // user+system CPU of the process tree by the end of wall
	rss       int64         // peak RSS of the process tree, bytes
	na        string        // why the peer could not run; "" when it ran
}

// rate is the records committed per second of wall time.
func (o outcome) rate() float64 { return float64(o.committed) / o.wall.Seconds() }

// runPeer runs one peer on j until every record is committed (or lim says
// otherwise), stops it, and returns what was measured. A peer that cannot run
// (its runtime is missing, its command does not exist yet, it exits early)
// yields an outcome with na set rather than failing the benchmark; a broker
// that cannot be read fails it.
func runPeer(b *testing.B, p peer, j job, lim limits) outcome {
	b.Helper()
	if !selected(p.name) {
		return outcome{na: "not selected by TURBO_BENCH_PEERS"}
	}
	group := fmt.Sprintf("bench-%s-%d", strings.NewReplacer(" ", "-", ",", "").Replace(p.name), time.Now().UnixNano())
	cmd, err := p.command(b, j, group)
	if err != nil {
		return outcome{na: err.Error()}
	}
	logFile := peerLog(b, p.name)
	defer logFile.Close()
	errs := &stderrTail{w: logFile}
	var stderr io.Writer = errs
	if cmd.Stderr != nil { // the peer reads its stderr too (turboObserved: where http.listen bound)
		stderr = io.MultiWriter(errs, cmd.Stderr)
	}
	cmd.Stdout, cmd.Stderr = logFile, stderr

	var w *groupWatch
	if !p.selfTimed {
		w = watchGroup(b, j.brokers, group, j.topic, j.ends)
		defer w.close()
	}

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return outcome{na: fmt.Sprintf("starting %s: %v", filepath.Base(cmd.Path), err)}
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	defer func() { // also when the broker fails the benchmark mid-run
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	pid := cmd.Process.Pid

	var o outcome
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	lastRSS := time.Time{}
loop:
	for {
		select {
		case <-tick.C:
		case <-exited:
		}
		now := time.Since(start)
		if w != nil {
			if o.joined == 0 && w.stable(b) {
				o.joined = now
			}
			o.committed, o.done = w.committed(b)
		}
		if time.Since(lastRSS) >= rssEvery {
			o.rss = max(o.rss, treeUsage(pid).rss)
			lastRSS = time.Now()
		}
		exitedNow := false
		select {
		case <-exited:
			// The Parallel Consumer exits by itself once everything is
			// committed, a self-timed peer once everything is acknowledged;
			// any other exit before the end is a failure.
			if p.selfTimed && waitErr == nil {
				o.committed, o.done = int64(j.records), true
			}
			if !o.done {
				return outcome{na: fmt.Sprintf("exited early, %v: %s", waitErr, errs.lastLine())}
			}
			exitedNow = true
		default:
		}
		switch {
		case exitedNow,
			lim.window == 0 && o.done,
			lim.window > 0 && now >= lim.window,
			lim.cap > 0 && now >= lim.cap:
			o.wall = now
			break loop
		}
	}

	// CPU and peak RSS at the end of wall: from /proc while the process
	// lives, else from what wait4 reported for it (its maximum RSS and its
	// CPU to the exit, a little later than the end of wall).
	select {
	case <-exited:
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			o.rss = max(o.rss, ru.Maxrss*1024)
		}
		o.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	default:
		u := treeUsage(pid)
		o.cpu = u.cpu
		o.rss = max(o.rss, u.rss, vmHWM(pid))
		stopProcess(cmd, exited)
	}
	<-exited
	return o
}

// selected tells whether TURBO_BENCH_PEERS (comma-separated parts of peer
// names, for development) lets the peer run; unset, every peer runs.
func selected(name string) bool {
	only := os.Getenv("TURBO_BENCH_PEERS")
	if only == "" {
		return true
	}
	for _, part := range strings.Split(only, ",") {
		if part = strings.TrimSpace(part); part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}

// stopProcess asks the peer to stop (SIGTERM: a graceful drain and commit,
// for every peer) and kills it if it has not exited after stopGrace.
func stopProcess(cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopGrace):
		_ = cmd.Process.Kill()
	}
}

// groupWatch reads a consumer group's progress on one topic from the broker.
type groupWatch struct {
	client sarama.Client
	admin  sarama.ClusterAdmin
	group  string
	topic  string
	ends   map[int32]int64
}

func watchGroup(b *testing.B, brokers []string, group, topic string, ends map[int32]int64) *groupWatch {
	b.Helper()
	admin, client := testkit.Admin(b, brokers)
	return &groupWatch{client: client, admin: admin, group: group, topic: topic, ends: ends}
}

func (w *groupWatch) close() { _ = w.admin.Close() }

// committed returns how many of the topic's records the group has committed
// (the topics start at offset 0), and whether that is all of them.
func (w *groupWatch) committed(b *testing.B) (int64, bool) {
	b.Helper()
	parts := make([]int32, 0, len(w.ends))
	for p := range w.ends {
		parts = append(parts, p)
	}
	resp, err := w.admin.ListConsumerGroupOffsets(w.group, map[string][]int32{w.topic: parts})
	if err != nil && !errors.Is(err, sarama.ErrGroupIDNotFound) { // not created yet: nothing committed
		b.Fatalf("committed offsets of %s: %v", w.group, err)
	}
	var n int64
	all := true
	for p, end := range w.ends {
		off := int64(-1)
		if resp != nil {
			if blk := resp.GetBlock(w.topic, p); blk != nil {
				off = blk.Offset
			}
		}
		n += max(0, min(off, end))
		all = all && (off >= end || end == 0) // an empty partition has nothing to commit (512 partitions, 1,000 keys)
	}
	return n, all
}

// stable reports whether the broker describes the group as Stable (joined
// and assigned).
func (w *groupWatch) stable(b *testing.B) bool {
	b.Helper()
	ds, err := w.admin.DescribeConsumerGroups([]string{w.group})
	if err != nil {
		b.Fatalf("describing group %s: %v", w.group, err)
	}
	return len(ds) == 1 && ds[0].State == "Stable"
}

// usage is what /proc says about a process tree at one moment.
type usage struct {
	rss int64         // resident set, bytes, summed over the tree
	cpu time.Duration // user+system CPU, summed over the tree
}

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// every Linux the benchmark runs on).
const clockTick = 10 * time.Millisecond

// treeUsage sums the RSS and CPU of pid and all its descendants.
func treeUsage(pid int) usage {
	var u usage
	for _, p := range tree(pid) {
		if kb, ok := statusKB(p, "VmRSS"); ok {
			u.rss += kb * 1024
		}
		u.cpu += procCPU(p)
	}
	return u
}

// tree returns pid and its descendants (from /proc/PID/task/*/children).
func tree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", out[i]))
		for _, t := range tasks {
			data, _ := os.ReadFile(t)
			for _, f := range strings.Fields(string(data)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// vmHWM is the peak RSS of one process, bytes (0 if unknown).
func vmHWM(pid int) int64 {
	kb, _ := statusKB(pid, "VmHWM")
	return kb * 1024
}

// statusKB reads a "Name:   123 kB" line of /proc/PID/status.
func statusKB(pid int, name string) (int64, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb, err == nil
			}
		}
	}
	return 0, false
}

// procCPU is the user+system CPU of one process, including its reaped
// children (fields 14–17 of /proc/PID/stat, after the command name).
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:])) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:15] { // utime, stime, cutime, cstime
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}

// stderrTail copies a peer's stderr to its log file and keeps the last
// non-empty line: the reason a peer that exits early gives.
type stderrTail struct {
	mu      sync.Mutex
	w       *os.File
	last    string
	partial []byte
}

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.w.Write(p)
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		if line := strings.TrimSpace(string(t.partial[:i])); line != "" {
			t.last = line
		}
		t.partial = t.partial[i+1:]
	}
}

// lastLine is the last non-empty line the peer wrote to stderr.
func (t *stderrTail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == "" {
		return "no error output"
	}
	return t.last
}

var (
	logName = regexp.MustCompile(`[^a-zA-Z0-9.]+`)
	logSeq  atomic.Int64
)

// logDir holds the peers' output of the latest run.
func logDir() string { return filepath.Join(moduleRoot, ".bench", "logs") }

// peerLog creates the file a peer's output goes to: .bench/logs/, one file
// per run of a peer, numbered in the order of the runs.
func peerLog(b *testing.B, peerName string) *os.File {
	b.Helper()
	if err := os.MkdirAll(logDir(), 0o755); err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("%03d-%s.log", logSeq.Add(1), strings.Trim(logName.ReplaceAllString(b.Name()+"-"+peerName, "-"), "-"))
	f, err := os.Create(filepath.Join(logDir(), name))
	if err != nil {
		b.Fatal(err)
	}
	return f
}
