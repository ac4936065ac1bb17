package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/collectors"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Faults comes between clients and the nodes of a test cluster: a Toxiproxy
// proxy per node, in this process, listening where the cluster advertises
// the node's PROXIED listener (TURBO_TEST_PROXY_ROUTES) and forwarding to
// it. A client that bootstraps from ProxiedBrokers talks to the cluster only
// through them; Add puts a fault (Toxiproxy's "toxics": latency, bandwidth,
// timeout, reset_peer, slicer, limit_data) on the paths to some nodes, and
// Clear takes them all away.
type Faults struct {
	Brokers []string                   // the advertised PROXIED addresses, to bootstrap from
	proxies map[int32]*toxiproxy.Proxy // by node id
}

// ProxyCluster starts the proxies of the test cluster of the environment;
// they stop when the test ends.
func ProxyCluster(t testing.TB) *Faults {
	t.Helper()
	routes := strings.Split(os.Getenv("TURBO_TEST_PROXY_ROUTES"), ",")
	if len(routes) != 3 {
		t.Fatalf("TURBO_TEST_PROXY_ROUTES=%q: want three ADVERTISED=NODE routes (a cluster of kafka.sh's)", os.Getenv("TURBO_TEST_PROXY_ROUTES"))
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	srv.Metrics.ProxyMetrics = collectors.NewProxyMetricCollectors()
	f := &Faults{proxies: map[int32]*toxiproxy.Proxy{}}
	for i, route := range routes {
		listen, upstream, ok := strings.Cut(route, "=")
		if !ok {
			t.Fatalf("TURBO_TEST_PROXY_ROUTES: %q is not ADVERTISED=NODE", route)
		}
		id := int32(i + 1)
		p := toxiproxy.NewProxy(srv, fmt.Sprintf("node-%d", id), listen, upstream)
		if err := p.Start(); err != nil {
			t.Fatalf("proxy of node %d on %s: %v", id, listen, err)
		}
		t.Cleanup(p.Stop)
		f.proxies[id] = p
		f.Brokers = append(f.Brokers, listen)
	}
	return f
}

// Toxic is one fault: a Toxiproxy toxic's type and attributes, on the
// "upstream" (client to node) or "downstream" stream.
type Toxic struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream"`
	Attributes map[string]any `json:"attributes"`
}

// Add puts toxic on the paths to nodes (every node when none is named).
func (f *Faults) Add(t testing.TB, toxic Toxic, nodes ...int32) {
	t.Helper()
	if len(nodes) == 0 {
		nodes = []int32{1, 2, 3}
	}
	body, err := json.Marshal(toxic)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range nodes {
		if _, err := f.proxies[id].Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
			t.Fatalf("adding %s to node %d's proxy: %v", body, id, err)
		}
	}
}

// Cut makes the paths to nodes silent both ways: nothing gets through, and
// no connection is closed (a partition, not a refusal) until Clear, which
// closes them.
func (f *Faults) Cut(t testing.TB, nodes ...int32) {
	t.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		f.Add(t, Toxic{Name: "cut-" + stream, Type: "timeout", Stream: stream, Attributes: map[string]any{"timeout": 0}}, nodes...)
	}
}

// Clear takes every fault away.
func (f *Faults) Clear() {
	for _, p := range f.proxies {
		p.Toxics.ResetToxics(context.Background())
	}
}
