// Package seam is how actors/harness reaches what the public API of package
// actors does not offer: a consumer whose Kafka is an in-memory cluster
// (memkafka). Being internal, it is out of reach of every package outside
// actors/, so embedders see one way to start a consumer: actors.New.
//
// Package actors sets the hooks when it is initialised. They are typed
// loosely (any) because this package cannot import actors, which imports it;
// the harness is their only caller, and converts.
package seam

import "github.com/turbokafka/turbo/actors/memkafka"

// StartInMemory starts a consumer of opts (an actors.Options) whose Kafka
// is cluster, and returns it (an *actors.Consumer).
var StartInMemory func(opts any, cluster *memkafka.Cluster) (any, error)

// UnexpectedMessages counts the messages an actor of this process received
// and does not handle: a wiring mistake (sent to the wrong actor), dropped
// in production with a log line. Always 0 in a healthy process; the
// harness fails a test that saw one.
var UnexpectedMessages func() int64
