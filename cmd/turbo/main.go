// Command turbo runs parallel Kafka consumers: `turbo run --config app.yaml`.
//
// Subcommands:
//
//	run      consume as configured, until a signal (or --exit-on-idle)
//	swarm    run N node processes of `run` under a supervisor (Linux)
//	dev      run the embedded Kafka-protocol broker alone
//	produce  write keyed demo records
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
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/turbokafka/turbo/config"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usage = `usage: turbo <command> [flags]

commands:
  run      --config FILE [--include-consumers a,b] [--exclude-consumers c]
           [--include-topics t] [--exclude-topics t] [--exit-on-idle]
  swarm    --config FILE [--nodes N] [the include/exclude flags of run]
  dev      [--listen 127.0.0.1:9092] [--data-dir DIR] [--partitions 8]
  produce  --brokers HOST:PORT[,..] --topic T --count N [--keys K] [--rate R]

Run "turbo <command> -h" for a command's flags.
`

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// runMain is main without the process around it, so tests can call it.
func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	// The first signal asks for a graceful stop; the second exits at once
	// (a swarm supervisor first kills its nodes).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	if args[0] == "swarm" {
		signal.Notify(sigs, syscall.SIGQUIT)
	}
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
		select {
		case <-sigs:
		case <-finished:
			return
		}
		cancel()
		select {
		case <-sigs:
			if f := onSecond.Load(); f != nil {
				fmt.Fprintln(stderr, "turbo: second signal, killing every node")
				(*f)()
				return
			}
			fmt.Fprintln(stderr, "turbo: second signal, exiting now")
			os.Exit(exitFailure)
		case <-finished:
		}
	})

	var err error
	switch args[0] {
	case "run":
		err = cmdRun(ctx, args[1:], stdout, stderr)
	case "swarm":
		err = cmdSwarm(ctx, args[1:], stderr, setOnSecond)
	case "dev":
		err = cmdDev(ctx, args[1:], stdout, stderr)
	case "produce":
		err = cmdProduce(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "turbo: unknown command %q\n\n%s", args[0], usage)
		return exitUsage
	}
	return exitCode(err, stderr)
}

// errUsage marks command-line mistakes.
var errUsage = errors.New("usage")

func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		return exitOK
	case errors.Is(err, errUsage), errors.Is(err, config.ErrInvalid):
		fmt.Fprintf(stderr, "turbo: %v\n", err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "turbo: %v\n", err)
		return exitFailure
	}
}
