// Package supervisor runs a turbo swarm, and nothing else: it starts node
// processes (re-executions of the turbo binary as `turbo run`), watches them
// through pidfds and a unix socket on which each node sends its health
// (proto/swarmpb frames), judges their memory and silence, restarts the ones
// that fail within a budget, and serves the swarm's /status, /metrics and
// probes.
//
// It also holds the node's end of that socket (NodeFromEnv, Node.Join,
// Link), written in terms of the wire protocol only: a node judges its own
// consumers and hands the link a finished *swarmpb.Report (cmd/turbo builds
// it from the actor tree's stats). So the supervisor never links a Kafka
// client or the actor system: what goes wrong on the Kafka side stays in the
// node, which the supervisor can restart.
// TestSupervisorLinksNeitherKafkaNorActors keeps it that way.
//
// A node's life, as the two ends see it:
//
//  1. The supervisor starts node i with its orders in its environment
//     (EnvSocket, EnvIndex, EnvNodes, ...: nodeEnviron writes them,
//     NodeFromEnv reads them), EnvAwaitStart among them when the swarm's
//     first start is still under way.
//  2. The node connects (only the supervisor's live nodes may: peer
//     credentials) and sends a Hello, then a Report every
//     swarm.node_report_interval, from a goroutine of its own.
//  3. Once every node of the first start has said hello, or
//     node_report_timeout has passed, the supervisor sends each of them a
//     Start frame, its only frame; their consumers wait for it
//     (Link.AwaitStart) and join their groups together. A node started
//     later does not wait.
//  4. The node stops on SIGTERM, or when it reads EOF (Link.Lost): its
//     supervisor is gone, even if it was SIGKILLed.
//
// This package serves cmd/turbo, on both ends of the socket, and is no API
// for other programs. Its nodes are always this program (New starts
// os.Executable()), and being one takes more than the link: the supervisor
// acts on what a report says (the node's verdict on its consumers, its
// readiness, which a rolling restart waits for, --exit-on-idle's judgement,
// its metrics and /status document in the formats the supervisor serves),
// all of which cmd/turbo builds from the actor tree, which this package must
// not link. And the protocol changes with turbo: both ends are always one
// build. A Go program embeds consumers with package actors; to run them as
// supervised processes, it runs `turbo swarm`.
package supervisor
