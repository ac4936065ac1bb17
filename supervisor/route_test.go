package supervisor

import (
	"errors"
	"strings"
	"testing"

	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/supervisor/web"
)

// TestCombineNodeAnswers: how the nodes' answers to one command make the
// swarm's answer, for commands every node carries out (pause, retune) and
// for those one node does (skip, seek).
func TestCombineNodeAnswers(t *testing.T) {
	const (
		done     = swarmpb.CommandOutcome_COMMAND_OUTCOME_DONE
		refused  = swarmpb.CommandOutcome_COMMAND_OUTCOME_REFUSED
		notHere  = swarmpb.CommandOutcome_COMMAND_OUTCOME_NOT_HERE
		noConsum = swarmpb.CommandOutcome_COMMAND_OUTCOME_NO_CONSUMER
		busy     = swarmpb.CommandOutcome_COMMAND_OUTCOME_BUSY
	)
	pause := web.Command{Consumer: "orders", Action: web.ActionPause}
	skip := web.Command{Consumer: "orders", Action: web.ActionSkip}
	lost := errors.New("the node did not answer in time")
	for _, tt := range []struct {
		name    string
		cmd     web.Command
		answers []nodeAnswer
		want    string // in the answer
		err     error  // nil: done
	}{
		{"paused on every node", pause, []nodeAnswer{{index: 2, outcome: done, result: "paused"}, {index: 0, outcome: done, result: "paused"}},
			"node 0: paused; node 2: paused", nil},
		{"a node without the consumer is left out", pause, []nodeAnswer{{index: 0, outcome: done, result: "paused"}, {index: 1, outcome: noConsum, result: "no consumer"}},
			"node 0: paused", nil},
		{"a node that did not answer", pause, []nodeAnswer{{index: 0, outcome: done, result: "paused"}, {index: 1, err: lost}},
			"done on some nodes only: node 0: paused; node 1: the node did not answer in time", errAny},
		{"refused", pause, []nodeAnswer{{index: 0, outcome: refused, result: "concurrency must be 1 to 10000"}}, "node 0: concurrency must be", web.ErrBadCommand},
		{"no node runs it", pause, []nodeAnswer{{index: 0, outcome: noConsum}, {index: 1, outcome: noConsum}}, "", web.ErrNoConsumer},
		{"no node connected", pause, nil, "no node of the swarm is connected", web.ErrBusy},
		{"skipped by its holder", skip, []nodeAnswer{{index: 0, outcome: notHere, result: "not in flight here"}, {index: 1, outcome: done, result: "t/3@5 skipped"}, {index: 2, outcome: notHere, result: "not in flight here"}},
			"node 1: t/3@5 skipped", nil},
		{"held by no node", skip, []nodeAnswer{{index: 0, outcome: notHere, result: "not in flight here"}, {index: 1, outcome: notHere, result: "not in flight here"}},
			"no node holds it: node 0: not in flight here; node 1: not in flight here", web.ErrNotHere},
		{"its holder busy", skip, []nodeAnswer{{index: 0, outcome: notHere, result: "no"}, {index: 1, outcome: busy, result: "a seek is under way"}},
			"node 1: a seek is under way", web.ErrBusy},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := combine(tt.cmd, tt.answers)
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("combine = %v, want done", err)
			case tt.err == errAny && err == nil, tt.err != nil && tt.err != errAny && !errors.Is(err, tt.err):
				t.Fatalf("combine = %q, %v; want %v", got, err, tt.err)
			}
			text := got
			if err != nil {
				text = err.Error()
			}
			if !strings.Contains(text, tt.want) {
				t.Fatalf("combine answered %q, want it to say %q", text, tt.want)
			}
			if tt.cmd.Action == web.ActionSkip && err == nil && strings.Contains(text, "not in flight") {
				t.Fatalf("a done skip's answer %q names the nodes that did not hold the record", text)
			}
		})
	}
}

var errAny = errors.New("any error")
