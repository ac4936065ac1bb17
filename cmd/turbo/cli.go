package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// cli is what the commands need from the process around them.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	onSecondSignal func(func())  // swarm: what a second signal does
	reload         chan struct{} // SIGHUP: run and swarm reload their configuration

	// started is set once the command line parsed and a command began:
	// an error before that is a usage error (exit 2) whatever cobra
	// called it; after, the command's error decides.
	started bool
}

// configFlagHelp describes --config wherever it appears.
const configFlagHelp = "configuration file (.yaml, .json or .toml)"

// newRoot returns the command tree. Help goes to stdout, errors are left to
// runMain (exitCode), so every command maps them to exit codes the same way.
func newRoot(c *cli) *cobra.Command {
	cobra.EnableCommandSorting = false // the order below: the common first
	root := &cobra.Command{
		Use:   "turbo",
		Short: "Parallel Kafka consumers: far more concurrency than partitions",
		Long: `turbo consumes Kafka topics with far more parallelism than they have
partitions, without losing a record, committing past unfinished work, or
breaking per-key order. It runs as one process (turbo run), as a supervised
swarm of processes (turbo swarm), or embedded in a Go service.

Exit codes: 0 clean, 1 runtime failure, 2 usage or configuration error.`,
		Version:       versionLine(debug.ReadBuildInfo()),
		SilenceErrors: true,
		SilenceUsage:  true,
		// No Args: cobra's own check names an unknown command and
		// suggests the nearest one.
		PersistentPreRunE: func(*cobra.Command, []string) error { c.started = true; return nil },
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetContext(c.ctx)
	root.AddCommand(runCommand(c), swarmCommand(c), devCommand(c), produceCommand(c), configCommand(c), versionCommand(c), docsCommand())
	root.InitDefaultCompletionCmd()
	for _, cmd := range root.Commands() {
		if cmd.Name() == "completion" {
			group(cmd)
		}
	}
	return root
}

// group makes a command that only holds subcommands refuse a mistyped one
// (exit 2, like an unknown command at the top) and show its help when
// called alone.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = noArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return cmd
}

// noArgs refuses positional arguments, naming the first.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return fmt.Errorf("unexpected argument %q", args[0])
}

func runCommand(c *cli) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Consume as configured, until a signal (or --exit-on-idle)",
		Long: `Run every consumer of the configuration file until SIGINT or SIGTERM, then
stop gracefully: finish or abandon in-flight work within shutdown_timeout,
commit what finished, leave the groups. A second signal exits at once.

With --exit-on-idle, process what the topics hold at start, commit it, and
exit 0 (backfills, scripts, the quickstart).`,
		Example: `  turbo run --config app.yaml
  turbo run --config app.yaml --exit-on-idle
  turbo run --config app.yaml --include-consumers orders --exclude-topics audit`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return cmdRun(c.ctx, f, c.reload, c.stdout, c.stderr) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.config, "config", "", configFlagHelp)
	f.sel = addSelectionFlags(fs)
	fs.BoolVar(&f.exitOnIdle, "exit-on-idle", false, "process what the topics hold now, commit, and exit 0")
	return cmd
}

func swarmCommand(c *cli) *cobra.Command {
	f := &swarmFlags{}
	cmd := &cobra.Command{
		Use:   "swarm --config FILE [--nodes N]",
		Short: "Run N node processes of `turbo run` under a supervisor (Linux)",
		Long: `Run the configuration as a swarm: a supervisor that never connects to Kafka
starts N node processes (this binary as turbo run), watches them through
pidfds and their health reports, and restarts a node that exits, hangs,
outgrows swarm.memory_limit or has a stuck handler. The nodes join the same
consumer groups and share the partitions.

With --exit-on-idle the swarm stops and exits 0 once the groups committed
what their topics held at start; if a node's restarts run out it exits 1.`,
		Example: `  turbo swarm --config app.yaml --nodes 4
  turbo swarm --config app.yaml --nodes 3 --exit-on-idle`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.nodesSet = cmd.Flags().Changed("nodes")
			return cmdSwarm(c.ctx, f, c.reload, c.stderr, c.onSecondSignal)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.config, "config", "", configFlagHelp)
	fs.IntVar(&f.nodes, "nodes", 0, "node processes to run (overrides swarm.nodes)")
	fs.BoolVar(&f.exitOnIdle, "exit-on-idle", false, "stop the swarm, exit 0, once the groups committed everything their topics held at start")
	f.sel = addSelectionFlags(fs)
	return cmd
}

func devCommand(c *cli) *cobra.Command {
	f := &devFlags{}
	cmd := &cobra.Command{
		Use:   "dev [--listen ADDR]",
		Short: "Run the embedded Kafka-protocol broker alone",
		Long: `Run the embedded Kafka-protocol broker (kfake) for local development, so
several turbo processes, turbo produce and other Kafka clients can share it.
Topics are created on first use. It keeps its data in memory unless
--data-dir is given.`,
		Example: `  turbo dev --listen 127.0.0.1:9092
  turbo dev --listen 127.0.0.1:9092 --data-dir /tmp/turbo-dev --partitions 16`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return cmdDev(c.ctx, f, c.stdout) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", "127.0.0.1:9092", "address to listen on")
	fs.StringVar(&f.dataDir, "data-dir", "", "persist the broker's data in this directory (default: in memory)")
	fs.IntVar(&f.partitions, "partitions", 8, "partitions of auto-created topics")
	return cmd
}

func produceCommand(c *cli) *cobra.Command {
	f := &produceFlags{}
	cmd := &cobra.Command{
		Use:   "produce --brokers HOST:PORT --topic T --count N",
		Short: "Write keyed demo records",
		Long: `Write --count demo records spread over --keys distinct keys to a topic.
The brokers, Kafka version, TLS and SASL come from --config's kafka section
when given, else from --brokers and the TURBO_KAFKA_* environment.`,
		Example: `  turbo produce --brokers 127.0.0.1:9092 --topic orders --count 100000 --keys 1000
  turbo produce --config app.yaml --topic orders --count 2000 --rate 1000`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return cmdProduce(c.ctx, f, c.stdout, c.stderr) },
	}
	fs := cmd.Flags()
	fs.Var(&f.brokers, "brokers", "bootstrap brokers, comma-separated (required without --config)")
	fs.StringVar(&f.config, "config", "", "take the brokers, version, TLS and SASL from this configuration file's kafka section")
	fs.StringVar(&f.topic, "topic", "", "topic to write to (required)")
	fs.IntVar(&f.count, "count", 0, "number of records (required, > 0)")
	fs.IntVar(&f.keys, "keys", 100, "number of distinct keys")
	fs.Float64Var(&f.rate, "rate", 0, "records per second (0: as fast as possible)")
	return cmd
}

func versionCommand(c *cli) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the build: version, commit, Go version, platform (also --version)",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(c.stdout, versionLine(debug.ReadBuildInfo()))
			return nil
		},
	}
}

// docsCommand prints the command-line reference cmd/turbo/README.md carries
// (TestREADMECommandLineReference keeps the two the same).
func docsCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "docs",
		Short:  "Print the command-line reference as Markdown",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(cmd.OutOrStdout(), cliReference(cmd.Root()))
			return err
		},
	}
}

// cliReference is every visible command's help, in one fenced block per
// command, as cmd/turbo/README.md shows it.
func cliReference(root *cobra.Command) string {
	var b strings.Builder
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		if cmd.Hidden || cmd.Name() == "help" {
			return
		}
		if cmd.Runnable() {
			fmt.Fprintf(&b, "#### %s\n\n%s\n\n```\n%s```\n\n", cmd.CommandPath(), cmd.Short, cmd.UsageString())
		}
		if cmd.Name() == "completion" {
			return // one entry for the four shells
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	for _, sub := range root.Commands() {
		walk(sub)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
