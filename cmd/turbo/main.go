// Command turbo runs parallel Kafka consumers: `turbo run --config app.yaml`.
//
// Subcommands:
//
//	run      consume as configured, until a signal (or --exit-on-idle)
//	swarm    run N node processes of `run` under a supervisor (Linux)
//	dev      run the embedded Kafka-protocol broker alone
//	produce  write keyed demo records
//	config   check a configuration file, or print the effective one
//	version  print the build (also --version)
//	completion bash|zsh|fish|powershell
//
// The command line is cobra's (cli.go); `turbo docs` prints the reference
// cmd/turbo/README.md carries.
//
// Exit codes: 0 clean, 1 runtime failure, 2 usage or configuration error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/turbokafka/turbo/config"
	"github.com/turbokafka/turbo/supervisor"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	// A write to a closed stdout or stderr (`turbo run 2>&1 | head -1`)
	// would kill the process with SIGPIPE before anything is committed.
	// Asking for SIGPIPE turns such writes into EPIPE errors (os/signal:
	// "If the program has called Notify to receive SIGPIPE signals, the file
	// descriptor number does not matter"); nobody needs to read the
	// channel. Notify rather than Ignore: an ignored disposition would be
	// inherited by the processes turbo starts.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	stderr := newLogSink(os.Stderr, logSinkLimit)
	code := runMain(os.Args[1:], os.Stdout, stderr)
	stderr.Close(exitFlushWait)
	os.Exit(code)
}

// runMain is main without the process around it, so tests can call it.
func runMain(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		c.ctx = context.Background()
		fmt.Fprint(stderr, newRoot(c).UsageString())
		return exitUsage
	}
	// The first signal asks for a graceful stop; the second exits at once
	// (a swarm supervisor first kills its nodes). See signalPolicy.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, stopSignals...)
	node := args[0] == "run" && os.Getenv(supervisor.EnvSocket) != ""
	policy := signalPolicy{node: node, reloads: !node && (args[0] == "run" || args[0] == "swarm")}
	c.reload = make(chan struct{}, 1)
	var onSecond atomic.Pointer[func()]
	setOnSecond := func(f func()) { onSecond.Store(&f) }
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var watcher sync.WaitGroup
	defer func() {
		close(finished)
		watcher.Wait()
		cancel()
	}()
	watcher.Go(func() {
		for {
			var sig os.Signal
			select {
			case sig = <-sigs:
			case <-finished:
				return
			}
			// Act first, then tell: stderr is a non-blocking logSink in
			// the real process, but the action must not depend on it.
			switch policy.judge(sig) {
			case stopGracefully:
				cancel()
			case reload:
				select {
				case c.reload <- struct{}{}: // the command says what it does with it
				default: // one is pending already
				}
			case ignored:
				tellSignal(stderr, sig, fmt.Sprintf("turbo: %s ignored: the swarm supervisor reloads the swarm", sig), "ignored: the swarm supervisor reloads the swarm")
			case alreadyStopping:
				tellSignal(stderr, sig, fmt.Sprintf("turbo: %s again: already stopping", sig), "already stopping")
			case stopNow:
				if f := onSecond.Load(); f != nil {
					(*f)()
					tellSignal(stderr, sig, "turbo: second signal, killing every node", "second signal, killing every node")
					return
				}
				tellSignal(stderr, sig, "turbo: second signal, exiting now", "second signal, exiting now")
				exitNow(stderr, exitFailure)
			}
		}
	})

	c.ctx, c.onSecondSignal = ctx, setOnSecond
	root := newRoot(c)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err != nil && !c.started {
		// Cobra's own errors (an unknown command or flag, a flag without
		// its value) and the argument checks: the command line is wrong.
		err = fmt.Errorf("%w: %s\n\nSee '%s --help'.", errUsage, strings.TrimRight(err.Error(), "\n"), cmd.CommandPath())
	}
	return exitCode(err, stderr)
}

// errUsage marks command-line mistakes.
var errUsage = errors.New("usage")

func exitCode(err error, stderr io.Writer) int {
	code := exitFailure
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage), errors.Is(err, config.ErrInvalid):
		code = exitUsage
	}
	// An error before the configuration is read (a usage error) is plain
	// text: the log format is not known yet.
	if log, ok := ownJSON(stderr); ok {
		log.WithLevel(zerolog.ErrorLevel).Str(zerolog.ErrorFieldName, err.Error()).Int("exit_code", code).Msg("exiting")
	} else {
		fmt.Fprintf(stderr, "turbo: %v\n", err)
	}
	return code
}

// tellSignal says what a signal did: plain is the text line, msg the
// message of the JSON object written instead when the run logs JSON.
func tellSignal(stderr io.Writer, sig os.Signal, plain, msg string) {
	if log, ok := ownJSON(stderr); ok {
		log.WithLevel(zerolog.WarnLevel).Str("signal", sig.String()).Msg(msg)
		return
	}
	fmt.Fprintln(stderr, plain)
}

// versionLine describes the build, from what the Go toolchain stamped into
// the binary: the module's version ("(devel)" for a build from a checkout),
// the commit and whether the tree had changes, the Go version, the
// platform. ok is false for a binary without build information.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "turbo (no build information)"
	}
	s := map[string]string{}
	for _, kv := range bi.Settings {
		s[kv.Key] = kv.Value
	}
	commit := s["vcs.revision"]
	switch {
	case commit == "":
		commit = "unknown commit"
	case len(commit) > 12:
		commit = commit[:12]
	}
	if s["vcs.modified"] == "true" {
		commit += "-dirty"
	}
	return fmt.Sprintf("turbo %s (%s, %s, %s/%s)", bi.Main.Version, commit, bi.GoVersion, s["GOOS"], s["GOARCH"])
}
