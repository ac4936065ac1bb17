package bench

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/test/testkit"
)

// The peers. Each is a real implementation run as its own process:
//
//   - turbo: the turbo binary, `turbo run --config FILE` (and `turbo swarm
//     --nodes N --config FILE`), with the built-in `sleep` or `noop` handler;
//   - plain sarama: ./plainsarama, a sarama consumer group with one
//     goroutine per partition, mark + auto-commit;
//   - plain franz-go: ./plainfranz, the same with franz-go, the fastest Go
//     client (its own goroutine-per-partition example, autocommit marks);
//   - the Confluent Parallel Consumer: ./parallelconsumer, a Java program
//     around its ParallelStreamProcessor (see javaPeer);
//   - a share group (KIP-932, Kafka 4.2+): ./sharegroup, a Java program of
//     KafkaShareConsumers (see shareGroup).
//
// Every peer commits every commitInterval (turbo's commit_interval, sarama's
// auto-commit interval, the Parallel Consumer's commitInterval): the wall
// time runs to the last commit, so their defaults (1 s, 1 s and 5 s) would
// measure the defaults rather than the consumers.
const commitInterval = 100 * time.Millisecond

// job is what every peer of a scenario is asked to do.
type job struct {
	brokers     []string
	topic       string
	ends        map[int32]int64 // the topic's end offsets (it starts at 0)
	records     int             // how many records the topic holds
	concurrency int             // turbo's concurrency, the Parallel Consumer's maxConcurrency
	work        time.Duration   // simulated work per record (a sleep); 0: none
	hashBytes   int             // CPU-bound work: bytes hashed per record (see turboConfig)
	rate        float64         // turbo's rate.limit, attempts per second; 0: none
	url         string          // turbo's http handler posts here; "": the built-in handlers
	batch       int             // turbo's batch.max_records; 0: one record per call
	maxBuffered int             // turbo's max_buffered; 0: its default
	output      string          // the output topic of turbo's http handler's answers (handler.response: outputs); "": answers ignored
	exactlyOnce bool            // outputs written in transactions (output.exactly_once)
	copyTo      string          // each record copied to this topic (turbo's copy handler; the Parallel Consumer's pollAndProduce, transactional)
}

// peer is one consumer implementation.
type peer struct {
	name string
	// selfTimed: the process exits 0 once the broker has every record
	// acknowledged, and its exit ends the wall time (a share group has no
	// committed offsets to watch from outside).
	selfTimed bool
	// command returns the process that runs j in consumer group group, or an
	// error saying why this peer is not available here.
	command func(b *testing.B, j job, group string) (*exec.Cmd, error)
}

// turbo is `turbo run` with the given ordering.
func turbo(o config.Ordering) peer {
	return peer{name: "turbo " + string(o), command: func(b *testing.B, j job, group string) (*exec.Cmd, error) {
		return exec.Command(testkit.PerfBinary(b), "run", "--config", turboConfig(b, j, group, o, j.concurrency)), nil
	}}
}

// turboFranz is `turbo run` with the given ordering on turbo's franz-go
// side (kafka.client: franz-go, the classic group protocol).
func turboFranz(o config.Ordering) peer { return onFranz(turbo(o)) }

// onFranz is a turbo peer (run, swarm, with metrics) on turbo's franz-go
// side: the same command with TURBO_KAFKA_CLIENT=franz-go, named "turbo
// franz-go …".
func onFranz(p peer) peer {
	return peer{name: strings.Replace(p.name, "turbo ", "turbo franz-go ", 1), selfTimed: p.selfTimed,
		command: func(b *testing.B, j job, group string) (*exec.Cmd, error) {
			cmd, err := p.command(b, j, group)
			if err != nil {
				return nil, err
			}
			if cmd.Env == nil {
				cmd.Env = os.Environ()
			}
			cmd.Env = append(cmd.Env, "TURBO_KAFKA_CLIENT=franz-go")
			return cmd, nil
		}}
}

// turboObserved is turbo with http.listen on: the histograms observed per
// record, and /metrics scraped every second while it runs, as Prometheus
// would.
func turboObserved(o config.Ordering) peer {
	return peer{name: "turbo " + string(o) + " + metrics", command: func(b *testing.B, j job, group string) (*exec.Cmd, error) {
		// Port 0: turbo binds a free port itself and logs which (at info,
		// in JSON: the environment overrides the config's log section).
		cfg := turboConfigWith(b, j, group, o, j.concurrency, "http:\n  listen: \"127.0.0.1:0\"\n")
		cmd := exec.Command(testkit.PerfBinary(b), "run", "--config", cfg)
		cmd.Env = append(os.Environ(), "TURBO_LOG_LEVEL=info", "TURBO_LOG_FORMAT=json")
		var said <-chan string
		cmd.Stderr, said = testkit.WatchHTTPAddr(b, io.Discard) // measure passes stderr on to it
		scrapeWhileUp(b, said)
		return cmd, nil
	}}
}

// scrapeWhileUp GETs /metrics at the address said every second until the
// benchmark ends.
func scrapeWhileUp(b *testing.B, said <-chan string) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var url string
		select {
		case <-stop:
			return
		case addr := <-said:
			url = "http://" + addr + "/metrics"
		}
		client := &http.Client{Timeout: 2 * time.Second}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if resp, err := client.Get(url); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}
	}()
	b.Cleanup(func() {
		close(stop)
		<-done
	})
}

// turboSwarm is `turbo swarm --nodes nodes`, key ordering, the job's
// concurrency split among the nodes (each node is a `turbo run` of the same
// file, so a node's concurrency is the file's).
func turboSwarm(nodes int) peer {
	return peer{name: fmt.Sprintf("turbo swarm --nodes %d", nodes), command: func(b *testing.B, j job, group string) (*exec.Cmd, error) {
		if err := swarmAvailable(b); err != nil {
			return nil, err
		}
		// The very configuration `turbo run` gets: a swarm is that same
		// app.yaml run by several processes, each with its own runners.
		cfg := turboConfig(b, j, group, config.OrderingKey, j.concurrency)
		return exec.Command(testkit.PerfBinary(b), "swarm", "--nodes", fmt.Sprint(nodes), "--config", cfg), nil
	}}
}

// turboConfig writes the configuration of one turbo consumer for j: the
// built-in noop, sleep (I/O-bound work) or hash (CPU-bound work: SHA-256
// over N bytes per record) handler.
func turboConfig(b *testing.B, j job, group string, o config.Ordering, concurrency int) string {
	b.Helper()
	return turboConfigWith(b, j, group, o, concurrency, "")
}

// turboConfigWith is turboConfig with extra top-level YAML appended.
func turboConfigWith(b *testing.B, j job, group string, o config.Ordering, concurrency int, extra string) string {
	b.Helper()
	handler := "{type: noop}"
	switch {
	case j.hashBytes > 0:
		handler = fmt.Sprintf("{type: hash, bytes: %d}", j.hashBytes)
	case j.copyTo != "":
		handler = fmt.Sprintf("{type: copy}\n    output: {topic: %s, exactly_once: %t}", j.copyTo, j.exactlyOnce)
	case j.url != "" && j.output != "":
		handler = fmt.Sprintf("{type: http, url: %q, timeout: 30s, response: outputs}\n    output: {topic: %s, exactly_once: %t}", j.url, j.output, j.exactlyOnce)
	case j.url != "":
		handler = fmt.Sprintf("{type: http, url: %q, timeout: 30s}", j.url)
	case j.work > 0:
		handler = fmt.Sprintf("{type: sleep, duration: %s}", j.work)
	}
	maxBuffered := ""
	if j.maxBuffered > 0 {
		maxBuffered = fmt.Sprintf("\n    max_buffered: %d", j.maxBuffered)
	}
	yaml := fmt.Sprintf(`kafka:
  brokers: [%s]
consumers:
  - name: bench
    group: %s
    topics: [%s]
    ordering: %s
    concurrency: %d
    commit_interval: %s
    handler: %s
    rate: {limit: %g}%s
    batch: {max_records: %d}
shutdown_timeout: 30s
log:
  level: warn
%s`, strings.Join(j.brokers, ", "), group, j.topic, o, concurrency, commitInterval, handler, j.rate, maxBuffered, max(1, j.batch), extra)
	path := filepath.Join(b.TempDir(), "app.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

var (
	swarmOnce sync.Once
	swarmErr  error
)

// swarmAvailable tells whether this turbo has the swarm command (its usage
// lists it).
func swarmAvailable(b *testing.B) error {
	swarmOnce.Do(func() {
		out, _ := exec.Command(testkit.PerfBinary(b), "help").CombinedOutput()
		if !strings.Contains(string(out), "swarm") {
			swarmErr = errors.New("swarm not available")
		}
	})
	return swarmErr
}

// plainSarama is ./plainsarama. It has no ordering or concurrency setting:
// one record at a time per partition is what it is.
func plainSarama() peer { return plainPeer("plain sarama", "plainsarama") }

// plainFranz is ./plainfranz, plainSarama's twin on franz-go.
func plainFranz() peer { return plainPeer("plain franz-go", "plainfranz") }

// plainPeer runs the Go program in test/bench/dir with plainpeer's command
// line.
func plainPeer(name, dir string) peer {
	return peer{name: name, command: func(b *testing.B, j job, group string) (*exec.Cmd, error) {
		bin, err := goBinary(b, dir)
		if err != nil {
			return nil, err
		}
		return exec.Command(bin, "--brokers", strings.Join(j.brokers, ","), "--topic", j.topic, "--group", group,
			"--work", j.work.String(), "--commit-interval", commitInterval.String()), nil
	}}
}

// parallelConsumer is the Confluent Parallel Consumer with the given
// ordering. It commits with PERIODIC_CONSUMER_ASYNCHRONOUS (its default and
// fastest mode) and exits by itself once everything is committed; copying
// records (job.copyTo), it runs its transactional mode
// (PERIODIC_TRANSACTIONAL_PRODUCER, pollAndProduce).
func parallelConsumer(o config.Ordering) peer {
	return peer{name: "parallel consumer " + string(o), command: func(b *testing.B, j job, group string) (*exec.Cmd, error) {
		jar, err := pcProgram.jar(b)
		if err != nil {
			return nil, err
		}
		if j.hashBytes > 0 {
			return nil, errors.New("no CPU-bound handler")
		}
		args := []string{"-jar", jar, "--brokers", strings.Join(j.brokers, ","), "--topic", j.topic,
			"--group", group, "--records", fmt.Sprint(j.records), "--ordering", strings.ToUpper(string(o)),
			"--concurrency", fmt.Sprint(j.concurrency), "--work-ms", fmt.Sprint(j.work.Milliseconds()),
			"--commit-interval-ms", fmt.Sprint(commitInterval.Milliseconds())}
		if j.copyTo != "" {
			if !j.exactlyOnce {
				return nil, errors.New("its produce mode is measured transactional only")
			}
			args = append(args, "--output-topic", j.copyTo)
		}
		return exec.Command("java", args...), nil
	}}
}

// shareGroup is Kafka's share groups (KIP-932): one KafkaShareConsumer per
// partition, each running the records of a poll at once on concurrency /
// partitions threads and acknowledging every record (ShareBench.java). Of
// the configurations tried on Kafka 4.4.0 (10,000 records of 20 ms,
// concurrency 200) this was the fastest: 8 consumers × 25 threads 4.6 s,
// 4 × 50 4.3 s, 20 × 10 4.8 s, 200 consumers of one thread each 10–15 s (200
// clients' threads and heartbeats keep two cores busy). It needs Apache
// Kafka 4.2 or newer: elsewhere its row says why not.
func shareGroup() peer {
	return peer{name: "share group", selfTimed: true, command: func(b *testing.B, j job, group string) (*exec.Cmd, error) {
		if err := shareGroupsAvailable(); err != nil {
			return nil, err
		}
		jar, err := shareProgram.jar(b)
		if err != nil {
			return nil, err
		}
		return exec.Command("java", "-jar", jar, "--brokers", strings.Join(j.brokers, ","), "--topic", j.topic,
			"--group", group, "--records", fmt.Sprint(j.records), "--consumers", fmt.Sprint(len(j.ends)),
			"--threads-per-consumer", fmt.Sprint(max(1, j.concurrency/len(j.ends))),
			"--work-ms", fmt.Sprint(j.work.Milliseconds())), nil
	}}
}

// shareGroupsAvailable tells whether the broker has share groups: Apache
// Kafka 4.2 or newer, as kafka.sh says in TURBO_TEST_KAFKA_VERSION (the
// embedded broker and Kafka 3.9 have none).
func shareGroupsAvailable() error {
	v := os.Getenv("TURBO_TEST_KAFKA_VERSION")
	if os.Getenv("TURBO_TEST_BROKERS") == "" || v == "" {
		return errors.New("share groups need Apache Kafka 4.2+ (make bench-kafka)")
	}
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil || major < 4 || (major == 4 && minor < 2) {
		return fmt.Errorf("share groups need Apache Kafka 4.2+, the broker is %s", v)
	}
	return nil
}

var (
	goBinMu   sync.Mutex
	goBinDir  string
	goBinPath = map[string]string{}
)

// goBinary builds the Go program in the given subdirectory of test/bench
// once per run, into a temporary directory removeBinaries deletes.
func goBinary(b *testing.B, name string) (string, error) {
	goBinMu.Lock()
	defer goBinMu.Unlock()
	if p, ok := goBinPath[name]; ok {
		return p, nil
	}
	if goBinDir == "" {
		dir, err := os.MkdirTemp("", "turbo-bench-")
		if err != nil {
			return "", err
		}
		goBinDir = dir
	}
	path := filepath.Join(goBinDir, name)
	if out, err := exec.Command("go", "build", "-o", path, "./"+name).CombinedOutput(); err != nil {
		b.Fatalf("go build ./test/bench/%s: %v\n%s", name, err, out)
	}
	goBinPath[name] = path
	return path, nil
}

// removeBinaries deletes what goBinary and testkit.PerfBinary built.
func removeBinaries() {
	if goBinDir != "" {
		_ = os.RemoveAll(goBinDir)
	}
	testkit.RemoveBinary()
}
