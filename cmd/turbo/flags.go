package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/turbokafka/turbo/config"
)

var errHelp = errors.New("help shown")

// newFlags returns a FlagSet whose errors are returned, not printed and
// exited on, so every command maps them to exit code 2 the same way.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("turbo "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

// listFlag is a comma-separated list flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// selection is the consumer and topic filters shared by run and swarm.
type selection struct{ incC, excC, incT, excT listFlag }

func addSelectionFlags(fs *flag.FlagSet) *selection {
	s := &selection{}
	fs.Var(&s.incC, "include-consumers", "run only these consumers (comma-separated names)")
	fs.Var(&s.excC, "exclude-consumers", "do not run these consumers")
	fs.Var(&s.incT, "include-topics", "consume only these topics")
	fs.Var(&s.excT, "exclude-topics", "do not consume these topics")
	return s
}

func (s *selection) apply(cfg *config.Config) error {
	return cfg.Select(s.incC, s.excC, s.incT, s.excT)
}

// args returns the flags that reproduce the selection (for swarm nodes).
func (s *selection) args() []string {
	var out []string
	for _, f := range []struct {
		name string
		l    listFlag
	}{{"include-consumers", s.incC}, {"exclude-consumers", s.excC}, {"include-topics", s.incT}, {"exclude-topics", s.excT}} {
		if len(f.l) > 0 {
			out = append(out, "--"+f.name, f.l.String())
		}
	}
	return out
}
