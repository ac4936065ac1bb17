package testkit

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// KafkaCluster is the three-node cluster of test/kafka/kafka.sh's cluster
// mode (TURBO_TEST_KAFKA_BROKERS=3), as its env file describes it: tests
// stop, kill and start its nodes, and ask which node leads a partition or
// coordinates a group.
type KafkaCluster struct {
	Brokers []string         // every node's PLAINTEXT address
	Nodes   map[int32]string // by node id
	state   string
}

// ThreeNodes returns the test cluster of the environment, and fails the test
// when there is none: the cluster tests run through `make test-kafka-cluster`
// (or with a cluster started by `TURBO_TEST_KAFKA_BROKERS=3 kafka.sh start`
// and its env file exported).
func ThreeNodes(t testing.TB) *KafkaCluster {
	t.Helper()
	state := os.Getenv("TURBO_TEST_STATE")
	if os.Getenv(NodesEnv) != "3" || state == "" {
		t.Fatalf("no three-node test cluster: %s=%q, TURBO_TEST_STATE=%q; run `make test-kafka-cluster`", NodesEnv, os.Getenv(NodesEnv), state)
	}
	c := &KafkaCluster{Brokers: SharedBrokers(), Nodes: map[int32]string{}, state: state}
	for id := int32(1); id <= 3; id++ {
		addr := os.Getenv(fmt.Sprintf("TURBO_TEST_KAFKA_NODE_%d", id))
		if addr == "" {
			t.Fatalf("the cluster's env has no TURBO_TEST_KAFKA_NODE_%d", id)
		}
		c.Nodes[id] = addr
	}
	return c
}

// Down stops node id: SIGTERM (a controlled shutdown, its leaderships moved
// first), or SIGKILL when kill is set (a crash).
func (c *KafkaCluster) Down(t testing.TB, id int32, kill bool) {
	t.Helper()
	args := []string{"down", c.state, strconv.Itoa(int(id))}
	if kill {
		args = append(args, "--kill")
	}
	c.script(t, args...)
}

// Up starts node id again and returns once it answers and sees every node.
func (c *KafkaCluster) Up(t testing.TB, id int32) {
	t.Helper()
	c.script(t, "up", c.state, strconv.Itoa(int(id)))
}

func (c *KafkaCluster) script(t testing.TB, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append([]string{kafkaScript()}, args...)...)
	cmd.Env = append(os.Environ(), "TURBO_TEST_KAFKA_BROKERS=3")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafka.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("kafka.sh %s: %s", strings.Join(args, " "), strings.TrimSpace(stderr.String()))
}

// kafkaScript is test/kafka/kafka.sh, found from the test's working
// directory (its package's, inside the repository) upwards: builds with
// -trimpath have no source paths to start from.
func kafkaScript() string {
	dir, err := os.Getwd()
	if err != nil {
		return filepath.Join("test", "kafka", "kafka.sh")
	}
	for {
		script := filepath.Join(dir, "test", "kafka", "kafka.sh")
		if _, err := os.Stat(script); err == nil {
			return script
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return script // not found: the run's error names it
		}
		dir = parent
	}
}

// up returns the addresses of the nodes that are running (those Down did not
// stop), to bootstrap from.
func (c *KafkaCluster) up() []string {
	var addrs []string
	for id, addr := range c.Nodes {
		if b, err := os.ReadFile(filepath.Join(c.state, fmt.Sprintf("pid.%d", id))); err == nil && len(bytes.TrimSpace(b)) > 0 {
			addrs = append(addrs, addr)
		}
	}
	slices.Sort(addrs)
	return addrs
}

// Leader returns the node that leads topic's partition now.
func (c *KafkaCluster) Leader(t testing.TB, topic string, partition int32) int32 {
	t.Helper()
	var id int32
	c.ask(t, func(client sarama.Client) error {
		if err := client.RefreshMetadata(topic); err != nil {
			return err
		}
		b, err := client.Leader(topic, partition)
		if err == nil {
			id = b.ID()
		}
		return err
	})
	return id
}

// Coordinator returns the node that coordinates group now.
func (c *KafkaCluster) Coordinator(t testing.TB, group string) int32 {
	t.Helper()
	var id int32
	c.ask(t, func(client sarama.Client) error {
		if err := client.RefreshCoordinator(group); err != nil {
			return err
		}
		b, err := client.Coordinator(group)
		if err == nil {
			id = b.ID()
		}
		return err
	})
	return id
}

// InSync reports whether every partition of topic has all three replicas in
// sync (what a rolling restart waits for before it takes the next node).
func (c *KafkaCluster) InSync(t testing.TB, topic string) bool {
	t.Helper()
	synced := false
	c.ask(t, func(client sarama.Client) error {
		if err := client.RefreshMetadata(topic); err != nil {
			return err
		}
		parts, err := client.Partitions(topic)
		if err != nil {
			return err
		}
		synced = true
		for _, p := range parts {
			isr, err := client.InSyncReplicas(topic, p)
			if err != nil {
				return err
			}
			synced = synced && len(isr) == len(c.Nodes)
		}
		return nil
	})
	return synced
}

// ask runs q against a client of the running nodes, again while it fails
// (a node just went away), for up to 30 s.
func (c *KafkaCluster) ask(t testing.TB, q func(sarama.Client) error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cfg := ClientConfig(t)
		cfg.Metadata.Retry.Max = 1
		client, err := sarama.NewClient(c.up(), cfg)
		if err == nil {
			err = q(client)
			client.Close()
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("asking the cluster (nodes up: %v): %v", c.up(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
