package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Swarm configures `turbo swarm`: a supervisor process running several node
// processes of the same application and keeping them healthy.
type Swarm struct {
	// Nodes is how many node processes run; `--nodes` overrides it.
	Nodes int `mapstructure:"nodes"`
	// NodeReportInterval is how often each node reports its health.
	NodeReportInterval time.Duration `mapstructure:"node_report_interval"`
	// NodeReportTimeout is the silence after which a node counts as hung.
	// It must be at least NodeReportTimeoutIntervals report intervals.
	NodeReportTimeout time.Duration `mapstructure:"node_report_timeout"`
	// NodeRestartTimeout is the delay before an exited node starts again.
	NodeRestartTimeout time.Duration `mapstructure:"node_restart_timeout"`
	// SupervisionInterval is how often silence and memory are checked
	// (exits wake the supervisor at once).
	SupervisionInterval time.Duration `mapstructure:"supervision_interval"`
	// MaxRestarts node restarts are allowed within RestartWindow; one more
	// stops every node and the supervisor exits 1.
	MaxRestarts   int           `mapstructure:"max_restarts"`
	RestartWindow time.Duration `mapstructure:"restart_window"`
	// MemoryLimit is the resident memory a node may use (0 = no limit):
	// above it for three samples in a row, the node is restarted.
	MemoryLimit ByteSize `mapstructure:"memory_limit"`
	// The supervisor's HTTP listener (/metrics, /healthz, /readyz,
	// /status, the console) is http.listen; swarm.liveness_listen, its
	// predecessor, is refused with a message naming it (replacedKeys).
}

// DefaultSwarm returns the swarm defaults.
func DefaultSwarm() Swarm {
	return Swarm{
		Nodes:               3,
		NodeReportInterval:  10 * time.Second,
		NodeReportTimeout:   60 * time.Second,
		NodeRestartTimeout:  5 * time.Second,
		SupervisionInterval: time.Second,
		MaxRestarts:         10,
		RestartWindow:       5 * time.Minute,
	}
}

// MaxNodes bounds Swarm.Nodes: far more than two cores want, far fewer than
// would exhaust process or file limits by accident.
const MaxNodes = 256

func (s *Swarm) validate() error {
	if s.Nodes < 1 || s.Nodes > MaxNodes {
		return fieldErr("swarm.nodes", fmt.Sprintf("must be between 1 and %d (got %d)", MaxNodes, s.Nodes))
	}
	if err := durRange("swarm.node_report_interval", s.NodeReportInterval, MinNodeReportInterval, MaxDuration); err != nil {
		return err
	}
	// No overflow: the interval is at most a day.
	if lo := NodeReportTimeoutIntervals * s.NodeReportInterval; s.NodeReportTimeout < lo || s.NodeReportTimeout > MaxDuration {
		return fieldErr("swarm.node_report_timeout", fmt.Sprintf("must be between %d × swarm.node_report_interval (%s) and %s (got %s)",
			NodeReportTimeoutIntervals, fmtDur(lo), fmtDur(MaxDuration), fmtDur(s.NodeReportTimeout)))
	}
	if err := durRange("swarm.node_restart_timeout", s.NodeRestartTimeout, 0, MaxDuration); err != nil {
		return err
	}
	if err := durRange("swarm.supervision_interval", s.SupervisionInterval, MinSupervisionInterval, MaxDuration); err != nil {
		return err
	}
	if err := intRange("swarm.max_restarts", s.MaxRestarts, 0, MaxRestarts); err != nil {
		return err
	}
	if err := durRange("swarm.restart_window", s.RestartWindow, MinRestartWindow, MaxDuration); err != nil {
		return err
	}
	if s.MemoryLimit != 0 && (s.MemoryLimit < minMemoryLimit || s.MemoryLimit > MaxMemoryLimit) {
		return fieldErr("swarm.memory_limit", fmt.Sprintf("must be 0 (off) or between %s and %s (got %s)", minMemoryLimit, MaxMemoryLimit, s.MemoryLimit))
	}
	return nil
}

// minMemoryLimit is twice what an idle node holds (32 MiB measured, the
// Go runtime, the actor system and one consumer's client): below it a node
// would be stopped for its memory before it did any work, again and again;
// a smaller limit is also likely a unit mistake (512 instead of 512MiB).
const minMemoryLimit = 64 * MiB

// ByteSize is an amount of memory in bytes. In a file it is a number of bytes
// or a number with a unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB,
// GiB, TiB (powers of 1024), e.g. 512MiB.
type ByteSize int64

// Byte size units.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
	TiB ByteSize = 1 << 40
)

var byteSizeType = reflect.TypeFor[ByteSize]()

var byteUnits = []struct {
	suffix string
	size   ByteSize
}{ // longest suffixes first, so "MiB" is not read as "B"
	{"KiB", KiB}, {"MiB", MiB}, {"GiB", GiB}, {"TiB", TiB},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
	{"B", 1},
}

// ParseByteSize parses a byte size such as "512MiB", "1.5GB" or "1048576".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	unit := ByteSize(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, unit = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.size
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, fmt.Errorf("cannot parse %s as a size: use bytes or a unit, e.g. 512MiB", quoteValue(s))
	}
	v := n * float64(unit)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%s is too large", quoteValue(s))
	}
	return ByteSize(v), nil
}

// String formats the size with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		suffix string
		size   ByteSize
	}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if b != 0 && b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

func toByteSize(raw any) (ByteSize, error) {
	switch v := raw.(type) {
	case string:
		return ParseByteSize(v)
	case int, int64, uint64, float64: // JSON numbers are float64: whole ones are sizes too
		n, err := toInt(v)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("expected a size such as 512MiB, got %v", v)
		}
		return ByteSize(n), nil
	default:
		return 0, fmt.Errorf("expected a size such as 512MiB, got %s", describe(raw))
	}
}

// ForNode makes c the configuration of node index of a swarm of nodes
// nodes: the static-membership id gains the node's index (stable across
// the node's restarts, distinct between nodes: a node back within the
// session timeout keeps its partitions; 240 characters plus "-" and the
// index stay within Kafka's 249), and each consumer's rate.limit, which is
// the consumer's whichever nodes hold its partitions, is shared among the
// nodes (Rate.PerNode).
func (c *Config) ForNode(index, nodes int) {
	if c.Kafka.GroupInstanceID != "" {
		c.Kafka.GroupInstanceID += "-" + strconv.Itoa(index)
	}
	for i := range c.Consumers {
		cons := &c.Consumers[i]
		cons.Rate = cons.Rate.PerNode(nodes)
		if cons.Output.ExactlyOnce {
			// One transactional producer per node, the same one after
			// the node restarts.
			cons.Output.TransactionalID = cons.TransactionalID() + "-n" + strconv.Itoa(index)
		}
	}
}
