package config

import (
	"testing"
	"time"
)

const swarmBase = "consumers:\n  - name: a\n    topics: [t]\n    handler: {type: noop}\n"

func TestSwarmSectionLoads(t *testing.T) {
	got, err := Load(writeConfig(t, "app.yaml", swarmBase+`swarm:
  nodes: 4
  node_report_interval: 2s
  node_report_timeout: 7s
  node_restart_timeout: 0s
  supervision_interval: 250ms
  max_restarts: 0
  restart_window: 1m
  memory_limit: 512MiB
`), noEnv)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Swarm{
		Nodes: 4, NodeReportInterval: 2 * time.Second, NodeReportTimeout: 7 * time.Second,
		SupervisionInterval: 250 * time.Millisecond, RestartWindow: time.Minute,
		MemoryLimit: 512 * MiB,
	}
	if got.Swarm != want {
		t.Errorf("swarm = %+v, want %+v", got.Swarm, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	env := map[string]string{"TURBO_SWARM_MEMORY_LIMIT": "1GB", "TURBO_SWARM_NODES": "2"}
	got, err = Load(writeConfig(t, "app.yaml", swarmBase), envMap(env))
	if err != nil {
		t.Fatalf("Load with env: %v", err)
	}
	if got.Swarm.MemoryLimit != 1000*1000*1000 || got.Swarm.Nodes != 2 || got.Swarm.NodeReportTimeout != time.Minute {
		t.Errorf("swarm from env = %+v, want 1GB, 2 nodes and the default report timeout", got.Swarm)
	}
}

func TestSwarmRejectsBadValues(t *testing.T) {
	tests := []struct {
		name, body, wantKey string
		wantIn              []string
	}{
		{"unknown key", "swarm:\n  nodez: 2\n", "swarm.nodez", []string{"nodes"}},
		{"zero nodes", "swarm:\n  nodes: 0\n", "swarm.nodes", []string{"between 1 and"}},
		{"too many nodes", "swarm:\n  nodes: 100000\n", "swarm.nodes", nil},
		{"timeout not above interval", "swarm:\n  node_report_interval: 10s\n  node_report_timeout: 10s\n", "swarm.node_report_timeout", []string{"between 3 × swarm.node_report_interval (30s) and 24h (got 10s)"}},
		{"bare duration", "swarm:\n  supervision_interval: 1\n", "swarm.supervision_interval", []string{"unit"}},
		{"zero supervision", "swarm:\n  supervision_interval: 0s\n", "swarm.supervision_interval", nil},
		{"negative restart delay", "swarm:\n  node_restart_timeout: -1s\n", "swarm.node_restart_timeout", nil},
		{"negative restarts", "swarm:\n  max_restarts: -1\n", "swarm.max_restarts", nil},
		{"bad size", "swarm:\n  memory_limit: lots\n", "swarm.memory_limit", []string{`"lots"`, "512MiB"}},
		{"unknown unit", "swarm:\n  memory_limit: 5PiB\n", "swarm.memory_limit", nil},
		{"tiny size", "swarm:\n  memory_limit: 512\n", "swarm.memory_limit", []string{"between 64MiB and 16TiB"}},
		{"below twice an idle node", "swarm:\n  memory_limit: 32MiB\n", "swarm.memory_limit", []string{"between 64MiB and 16TiB", "32MiB"}},
		{"negative size", "swarm:\n  memory_limit: -5\n", "swarm.memory_limit", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(writeConfig(t, "app.yaml", swarmBase+tt.body), noEnv)
			if err == nil {
				err = c.Validate()
			}
			checkInvalid(t, err, tt.wantKey, tt.wantIn...)
		})
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{
		"0": 0, "1048576": MiB, "512MiB": 512 * MiB, "1.5GiB": 3 * GiB / 2, "2 KB": 2000,
		"64KiB": 64 * KiB, "3GB": 3e9, "10B": 10, " 7MB ": 7e6,
	} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1e400", "NaN", "12 apples", "1XB"} {
		if got, err := ParseByteSize(in); err == nil {
			t.Errorf("ParseByteSize(%q) = %v, want an error", in, got)
		}
	}
	for b, want := range map[ByteSize]string{0: "0B", 512 * MiB: "512MiB", 3 * GiB: "3GiB", 1500: "1500B", 3 * KiB: "3KiB"} {
		if got := b.String(); got != want {
			t.Errorf("ByteSize(%d).String() = %q, want %q", int64(b), got, want)
		}
	}
}

func TestForNode(t *testing.T) {
	c := Default()
	c.Kafka.GroupInstanceID = "pod"
	a := DefaultConsumer("a")
	a.Rate = Rate{Limit: 90, Burst: 9}
	b := DefaultConsumer("b") // no limit: nothing to share
	c.Consumers = []Consumer{a, b}
	c.ForNode(2, 3)
	if c.Kafka.GroupInstanceID != "pod-2" {
		t.Errorf("group_instance_id %q, want pod-2", c.Kafka.GroupInstanceID)
	}
	if got := c.Consumers[0].Rate; got != (Rate{Limit: 30, Burst: 3}) {
		t.Errorf("a's rate %+v, want a third of 90/9", got)
	}
	if got := c.Consumers[1].Rate; got != (Rate{}) {
		t.Errorf("b's rate %+v, want none", got)
	}
	eos := Default()
	named, plain := DefaultConsumer("named"), DefaultConsumer("plain")
	named.Output = Output{Topic: "out", ExactlyOnce: true, TransactionalID: "orders"}
	plain.Group = "g1"
	plain.Output = Output{Topic: "out", ExactlyOnce: true}
	eos.Consumers = []Consumer{named, plain, DefaultConsumer("none")}
	eos.ForNode(3, 4)
	if got := eos.Consumers[0].TransactionalID(); got != "orders-n3" {
		t.Errorf("transactional id %q, want orders-n3", got)
	}
	if got := eos.Consumers[1].TransactionalID(); got != "turbo-g1-n3" {
		t.Errorf("default transactional id %q, want turbo-g1-n3", got)
	}
	if got := eos.Consumers[2].Output.TransactionalID; got != "" {
		t.Errorf("a consumer without exactly once got the transactional id %q", got)
	}
	dynamic := Default()
	dynamic.ForNode(1, 2)
	if dynamic.Kafka.GroupInstanceID != "" {
		t.Errorf("a dynamic member got the id %q", dynamic.Kafka.GroupInstanceID)
	}
}
