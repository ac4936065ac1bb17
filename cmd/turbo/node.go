package main

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/actors"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/supervisor"
)

// A swarm node's side: `turbo run` started by a supervisor joins it and
// reports its health (judged in nodehealth.go) until either goes away.

// nodeRun is the swarm side of a `turbo run` started by a supervisor.
type nodeRun struct {
	node    supervisor.Node
	cfg     *config.Config
	started time.Time

	obs     *observer // set before the node joins its supervisor
	observe bool      // http.listen is set: the supervisor serves the node's metrics and status
	log     zerolog.Logger
	warned  bool // a report went without its metrics or status (warned once); report runs on one goroutine

	mu        sync.Mutex
	consumers []*actors.Consumer

	// idle: with turbo swarm --exit-on-idle, the group committed what the
	// topics held when this node started (actors.WaitCaughtUp); reports say so.
	idle atomic.Bool
}

// nodeFromEnv returns the node identity when a supervisor started this
// process, and makes cfg the node's (config.Config.ForNode).
func nodeFromEnv(cfg *config.Config) (*nodeRun, error) {
	n, ok, err := supervisor.NodeFromEnv(os.LookupEnv)
	if err != nil || !ok {
		return nil, err
	}
	cfg.ForNode(n.Index, n.Nodes)
	return &nodeRun{node: n, cfg: cfg, started: time.Now()}, nil
}

func (n *nodeRun) add(c *actors.Consumer) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.consumers = append(n.consumers, c)
}

func (n *nodeRun) report() *swarmpb.Report {
	n.mu.Lock()
	consumers := make([]consumerHealth, len(n.consumers))
	for i, c := range n.consumers {
		consumers[i] = consumerHealth{stats: c.Stats(), maxHandlerTime: n.cfg.Consumers[i].MaxHandlerTime}
	}
	n.mu.Unlock()
	r := buildReport(time.Now(), n.started, consumers, healthLimits{
		pollStall: max(n.cfg.Swarm.NodeReportTimeout, pollStallFloor), grace: n.cfg.ShutdownTimeout,
	})
	r.RssBytes, r.HeapBytes = supervisor.SelfMemory()
	r.Idle = n.idle.Load()
	ready := n.obs.Ready()
	r.Ready, r.ReadyDetail = ready.OK, ready.Reason
	if n.observe {
		m, merr := n.obs.encodeMetrics()
		s, serr := n.obs.encodeStatus()
		r.Metrics, r.StatusJson = m, s
		if err := errors.Join(merr, serr); err != nil && !n.warned {
			n.warned = true
			n.log.Warn().Err(err).Msg("the node's reports go without what does not fit (warned once)")
		}
	}
	return r
}

var errSupervisorGone = errors.New("the swarm supervisor is gone")
