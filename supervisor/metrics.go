package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/proto/swarmpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Errors of what a node put in its report; they surface in the
// supervisor's log (badReports), never in a response.
var (
	errBadMetrics = errors.New("supervisor: a node's metrics do not decode")
	errBadStatus  = errors.New("supervisor: a node's status does not decode")
)

// NodeLabel is the label the supervisor's /metrics adds to every series of
// a node ("0", "1", ...) and to its own ("supervisor").
const NodeLabel = "node"

// supervisorNode is the node label of the supervisor's own series.
const supervisorNode = "supervisor"

// maxNodeFamilies bounds the metric families taken from one node's report:
// a node has about 80 (Go runtime, process, turbo's); more is garbage.
const maxNodeFamilies = 1000

// metricsFormat is the encoding of Report.metrics: Prometheus's
// length-delimited protobuf MetricFamily stream.
var metricsFormat = expfmt.NewFormat(expfmt.TypeProtoDelim)

// gatherer is what the supervisor serves on /metrics: its own registry
// (Go runtime and process collectors labelled node="supervisor", and the
// swarm's series) and one gatherer per node slot, which serves the node's
// last reported families with node="<index>". prometheus.Gatherers merges
// families of the same name (every node's go_goroutines into one family)
// and refuses a series twice or a family whose type or help differ between
// gatherers, logging it through promhttp.
func (s *Supervisor) gatherer() prometheus.Gatherer {
	own := prometheus.NewRegistry()
	prometheus.WrapRegistererWith(prometheus.Labels{NodeLabel: supervisorNode}, own).MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	own.MustRegister(swarmCollector{s})
	gs := prometheus.Gatherers{own}
	for i := range s.o.Swarm.Nodes {
		gs = append(gs, nodeGatherer{s: s, index: i, bad: s.badReports})
	}
	return gs
}

// The supervisor's own series.
var (
	restartsDesc = prometheus.NewDesc("turbo_swarm_node_restarts_total",
		"Node processes restarted by the supervisor, by node and cause: exit (the node exited or died on its own), "+
			"hung (no report within node_report_timeout), memory (over memory_limit), stuck_handler, poll_stalled, reload (a rolling restart after SIGHUP).",
		[]string{NodeLabel, "cause"}, nil)
	stateDesc = prometheus.NewDesc("turbo_swarm_node_state",
		"1 for the node slot's current state (waiting, starting, running, stopping), 0 for the others.",
		[]string{NodeLabel, "state"}, nil)
	readyDesc = prometheus.NewDesc("turbo_swarm_node_ready",
		"1 when the node runs and its last report says it is ready (every consumer in a group session, Kafka answering).",
		[]string{NodeLabel}, nil)
	rssDesc = prometheus.NewDesc("turbo_swarm_node_rss_bytes",
		"The node process's resident memory, as last measured by the supervisor (0 while no process runs).",
		[]string{NodeLabel}, nil)
	budgetDesc = prometheus.NewDesc("turbo_swarm_restart_budget_remaining",
		"Node restarts left within swarm.restart_window before the supervisor stops the swarm (swarm.max_restarts less the recent restarts).",
		nil, nil)
)

// swarmCollector exposes the last published view; before the first there
// is nothing to say.
type swarmCollector struct{ s *Supervisor }

func (c swarmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{restartsDesc, stateDesc, readyDesc, rssDesc, budgetDesc} {
		ch <- d
	}
}

func (c swarmCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.s.view.Load()
	if v == nil {
		return
	}
	collectView(v, ch)
}

// collectView turns a view into the swarm's series: every node and cause,
// and every node and state, are always there (0 included), so that rate()
// and alerts see a series from the start rather than one appearing on the
// first restart.
func collectView(v *view, ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, float64(v.budgetLeft))
	for i, n := range v.nodes {
		o, node := v.obs[i], strconv.Itoa(n.Index)
		for c := range numCauses {
			ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(o.restartsBy[c]), node, c.String())
		}
		for _, st := range slotStates {
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, b2f(o.state == st), node, st.String())
		}
		ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, b2f(o.state == slotRunning && o.report != nil && o.report.Ready), node)
		rss := n.RSSBytes
		if n.PID == 0 {
			rss = 0
		}
		ch <- prometheus.MustNewConstMetric(rssDesc, prometheus.GaugeValue, float64(rss), node)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// nodeGatherer serves one node's last reported metric families, decoded
// afresh on every scrape (the scrapes may run concurrently, and
// prometheus.Gatherers keeps the metrics it is given), with node="<index>".
// Families that do not decode are left out and logged once per report.
type nodeGatherer struct {
	s     *Supervisor
	index int
	bad   *badReports
}

func (g nodeGatherer) Gather() ([]*dto.MetricFamily, error) {
	v := g.s.view.Load()
	if v == nil || g.index >= len(v.obs) {
		return nil, nil
	}
	r := v.obs[g.index].report
	if r == nil || len(r.Metrics) == 0 {
		return nil, nil
	}
	fams, err := decodeFamilies(r.Metrics, maxNodeFamilies)
	if err != nil {
		g.bad.note(g.index, "metrics", r, err)
		return nil, nil
	}
	node := strconv.Itoa(g.index)
	for _, mf := range fams {
		labelNode(mf, node)
	}
	return fams, nil
}

// decodeFamilies decodes a delimited MetricFamily stream of at most max
// families. Each length is checked against what is left before expfmt's
// decoder sees it: that decoder has no size limit, and a garbage length
// would make it allocate up to the length announced.
func decodeFamilies(b []byte, limit int) ([]*dto.MetricFamily, error) {
	var fams []*dto.MetricFamily
	for len(b) > 0 {
		size, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, fmt.Errorf("%w: family %d: a malformed length", errBadMetrics, len(fams))
		}
		if size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: family %d: %d bytes announced, %d left", errBadMetrics, len(fams), size, len(b)-n)
		}
		if len(fams) == limit {
			return nil, fmt.Errorf("%w: more than %d families", errBadMetrics, limit)
		}
		end := n + int(size)
		mf := &dto.MetricFamily{}
		if err := expfmt.NewDecoder(bytes.NewReader(b[:end]), metricsFormat).Decode(mf); err != nil {
			return nil, fmt.Errorf("%w: family %d: %w", errBadMetrics, len(fams), err)
		}
		fams = append(fams, mf)
		b = b[end:]
	}
	return fams, nil
}

// labelNode sets the node label on every metric of mf, replacing one the
// node may have set itself, and keeps the labels sorted by name (which
// prometheus.Gatherers' duplicate check relies on).
func labelNode(mf *dto.MetricFamily, node string) {
	for _, m := range mf.Metric {
		m.Label = slices.DeleteFunc(m.Label, func(l *dto.LabelPair) bool { return l.GetName() == NodeLabel })
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(NodeLabel), Value: proto.String(node)})
		slices.SortStableFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
	}
}

// badReports logs a node's report whose metrics or status do not decode,
// once per report and kind: every scrape and console poll decodes them
// again, and one line per report interval says enough.
type badReports struct {
	log  zerolog.Logger
	mu   sync.Mutex
	last map[badKey]*swarmpb.Report
}

type badKey struct {
	node int
	what string
}

func (b *badReports) note(node int, what string, r *swarmpb.Report, err error) {
	b.mu.Lock()
	k := badKey{node, what}
	seen := b.last[k] == r
	if !seen {
		if b.last == nil {
			b.last = map[badKey]*swarmpb.Report{}
		}
		b.last[k] = r
	}
	b.mu.Unlock()
	if !seen {
		b.log.Warn().Err(err).Int("node", node).Str("part", what).
			Msg("a node's report carries " + what + " that do not decode: left out of the supervisor's answers")
	}
}
