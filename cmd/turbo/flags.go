package main

import (
	"strings"

	"github.com/spf13/pflag"
	"github.com/turbokafka/turbo/config"
)

// listFlag is a comma-separated list flag; it may be given more than once.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

// Type names the value in help ("--brokers list").
func (l *listFlag) Type() string { return "list" }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// selection is the consumer and topic filters shared by run, swarm and
// config.
type selection struct{ incC, excC, incT, excT listFlag }

func addSelectionFlags(fs *pflag.FlagSet) *selection {
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
