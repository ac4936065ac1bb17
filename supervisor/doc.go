// Package supervisor runs a turbo swarm, and nothing else: it starts node
// processes (re-executions of the turbo binary), watches them through pidfds
// and a unix socket on which each node sends its health (proto/swarmpb
// frames), judges their memory and silence, restarts the ones that fail
// within a budget, and serves the swarm's /status, /metrics and probes.
//
// It also holds the node's end of that socket (Node, Join, Link), written in
// terms of the wire protocol only: a node judges its own consumers and hands
// the link a finished *swarmpb.Report (cmd/turbo builds it from the actor
// tree's stats). So the supervisor never links a Kafka client or the actor
// system: what goes wrong on the Kafka side stays in the node, which the
// supervisor can restart.
// TestSupervisorLinksNeitherKafkaNorActors keeps it that way.
package supervisor
