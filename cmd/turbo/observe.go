package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/supervisor/web"
)

// observer is what a `turbo run` shows of its consumers: their metrics in a
// Prometheus registry (with the Go runtime's and the process's), their
// liveness, readiness and status. It serves http.listen (web.Source), and a
// swarm node's reports.
type observer struct {
	reg       *prometheus.Registry
	owner     string      // who holds the partitions: this process
	stopping  atomic.Bool // the run is stopping: not ready any more
	switching atomic.Bool // a reload replaces the consumers: not ready meanwhile

	mu        sync.Mutex
	consumers []observed
	config    web.ConfigState
}

type observed struct {
	c          *actors.Consumer
	stuckAfter time.Duration
}

func newObserver() *observer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	host, _ := os.Hostname()
	return &observer{reg: reg, owner: fmt.Sprintf("%s/%d", host, os.Getpid())}
}

// add shows a started consumer.
func (o *observer) add(c *actors.Consumer, cc config.Consumer) error {
	if err := o.reg.Register(c.Collector()); err != nil {
		return fmt.Errorf("consumer %s: registering its metrics: %w", c.Name(), err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.consumers = append(o.consumers, observed{c: c, stuckAfter: stuckAfter(cc)})
	return nil
}

// retire forgets the consumers a reload or a stop ended: their series
// leave /metrics (the next consumers' start from zero, which Prometheus
// reads as a counter reset), and they leave /status.
func (o *observer) retire() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, oc := range o.consumers {
		o.reg.Unregister(oc.c.Collector())
	}
	o.consumers = nil
}

// loaded says a configuration took effect (at start and after a reload).
func (o *observer) loaded(at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.config.LoadedAt.IsZero() {
		o.config.Reloads++
	}
	o.config.LoadedAt = at
	o.switching.Store(false)
}

// refused says a reload was refused, and why.
func (o *observer) refused(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.config.Refused++
	o.config.LastError = err.Error()
}

// reloading marks the consumers as being replaced: not ready until the
// next ones are.
func (o *observer) reloading() { o.switching.Store(true) }

// minStuckAfter is the least age at which an unfinished record counts as
// stuck on the console.
const minStuckAfter = 5 * time.Second

// stuckAfter is the age past which a consumer's unfinished record is shown
// as stuck: older than a handler may run and than a retry may wait, and at
// least minStuckAfter.
func stuckAfter(cc config.Consumer) time.Duration {
	return max(minStuckAfter, cc.MaxHandlerTime, cc.Retry.MaxBackoff)
}

func (o *observer) list() []observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observed(nil), o.consumers...)
}

// stop marks the run as stopping: readiness fails from now on, so that
// whoever routes by it looks elsewhere while the consumers drain.
func (o *observer) stop() { o.stopping.Store(true) }

// Live implements web.Source: every consumer is alive.
func (o *observer) Live() web.Check {
	for _, c := range o.list() {
		if chk := c.c.Live(); !chk.OK {
			return web.Check{Reason: "consumer " + c.c.Name() + ": " + chk.Reason}
		}
	}
	return web.Check{OK: true}
}

// Ready implements web.Source: every consumer is in its group session.
func (o *observer) Ready() web.Check {
	if o.stopping.Load() {
		return web.Check{Reason: "stopping"}
	}
	if o.switching.Load() {
		return web.Check{Reason: "reloading the configuration"}
	}
	cs := o.list()
	if len(cs) == 0 {
		return web.Check{Reason: "starting"}
	}
	for _, c := range cs {
		if chk := c.c.Ready(); !chk.OK {
			return web.Check{Reason: "consumer " + c.c.Name() + ": " + chk.Reason}
		}
	}
	return web.Check{OK: true}
}

// Status implements web.Source.
func (o *observer) Status() web.Status {
	now := time.Now()
	o.mu.Lock()
	cfg := o.config
	o.mu.Unlock()
	st := web.Status{Mode: web.ModeRun, Time: now, Live: o.Live(), Ready: o.Ready(), Config: &cfg}
	for _, c := range o.list() {
		st.Consumers = append(st.Consumers, o.consumerStatus(c, now))
	}
	return st
}

func (o *observer) consumerStatus(oc observed, now time.Time) web.Consumer {
	c := oc.c
	s, parts := c.Status() // the consumer's buffered is the sum of the partitions'
	ready := c.Ready()
	wc := web.Consumer{
		Name: c.Name(), Group: c.Group(), Ready: web.Check{OK: ready.OK, Reason: ready.Reason}, Paused: s.Suspended,
		Fetched: s.Fetched, Processed: s.Processed, Failed: s.Failed, Retries: s.Retries, Skipped: s.Skipped,
		DeadLettered: s.Dead, Outputs: s.Outputs, OutputErrors: s.OutputErrors,
		Transactions: s.Transactions, TransactionsAborted: s.TransactionsAborted, Inherited: s.Inherited, Commits: s.Commits, Committed: s.Committed, Restarts: s.Restarts, Seeks: s.Seeks,
		InFlight: s.InFlight, Buffered: s.Buffered, PausedPartitions: s.Paused, AssignedPartitions: s.Assigned, Lag: s.Lag,
		StuckAfterSeconds: oc.stuckAfter.Seconds(), KafkaError: s.KafkaError,
	}
	tu := c.Tuning()
	wc.Concurrency, wc.RateLimit, wc.Retuned, wc.PausedTopics = tu.Concurrency, tu.Rate.Limit, tu.Retuned, c.PausedTopics()
	for _, p := range parts {
		wp := web.Partition{
			Topic: p.Topic, Partition: p.Partition, Owner: o.owner, Committed: p.Committed, HighWatermark: p.HighWatermark,
			Lag: p.Lag, InFlight: p.InFlight, Buffered: p.Buffered, Paused: p.Paused, Held: p.Held,
		}
		if !p.OldestUnfinished.IsZero() {
			wp.OldestUnfinishedSeconds = max(now.Sub(p.OldestUnfinished), 0).Seconds()
			if off := p.OldestUnfinishedOffset; off >= 0 {
				wp.OldestUnfinishedOffset = &off
			}
		}
		wc.Partitions = append(wc.Partitions, wp)
	}
	return wc
}

// Bounds of what a swarm node puts in a report: the supervisor refuses
// frames above supervisor's maxFrame, so a node with more partitions than
// fit sends its report without them rather than not at all.
const (
	maxReportMetrics = 6 << 20
	maxReportStatus  = 1 << 20
)

// encodeMetrics gathers the registry in Prometheus's delimited protobuf
// format, for a swarm node's report; nil when it does not fit.
func (o *observer) encodeMetrics() ([]byte, error) {
	fams, err := o.reg.Gather()
	if err != nil && len(fams) == 0 {
		return nil, err
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			return nil, fmt.Errorf("encoding %s: %w", f.GetName(), err)
		}
		if buf.Len() > maxReportMetrics {
			return nil, fmt.Errorf("the metrics exceed %d bytes", maxReportMetrics)
		}
	}
	return buf.Bytes(), nil
}

// encodeStatus is the status document for a swarm node's report; nil when
// it does not fit.
func (o *observer) encodeStatus() ([]byte, error) {
	b, err := json.Marshal(o.Status())
	if err != nil {
		return nil, err
	}
	if len(b) > maxReportStatus {
		return nil, fmt.Errorf("the status exceeds %d bytes", maxReportStatus)
	}
	return b, nil
}

// running lists the consumers running now (http.control's commands go to
// them: control.Consumers).
func (o *observer) running() []*actors.Consumer {
	list := o.list()
	out := make([]*actors.Consumer, len(list))
	for i, oc := range list {
		out[i] = oc.c
	}
	return out
}
