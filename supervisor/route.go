package supervisor

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/supervisor/web"
)

// A swarm's control commands (http.control on turbo swarm) go to every node
// over the health socket, and the nodes' answers make one (combine). Every
// node gets every command because each one judges its own part: a pause or
// a retune applies on every node that runs the consumer (a partition
// paused on every node stays paused when a rebalance moves it to another),
// and a skip or a seek is carried out by the node that holds the record or
// owns the partition, the others answering that it is not theirs.

// nodeAnswer is one node's answer to a command routed to it.
type nodeAnswer struct {
	index   int
	outcome swarmpb.CommandOutcome
	result  string
	err     error // the command did not reach the node, or its answer did not come back
}

func (a nodeAnswer) String() string {
	if a.err != nil {
		return fmt.Sprintf("node %d: %v", a.index, a.err)
	}
	return fmt.Sprintf("node %d: %s", a.index, a.result)
}

// targeted: the command is about something one node holds (a record, a
// partition it owns), not about every node's consumer.
func targeted(cmd web.Command) bool {
	return cmd.Action == web.ActionSkip || cmd.Action == web.ActionSeek
}

// combine judges the nodes' answers to cmd as one, naming the nodes. A
// targeted command is done when a node did it (the others' "not here" is
// left out); any other is done when every node running the consumer did.
// Otherwise the error says why, in the class the routes answer with (400
// refused, 404 no such consumer, 409 not here, 503 busy, else 500).
func combine(cmd web.Command, answers []nodeAnswer) (string, error) {
	if len(answers) == 0 {
		return "", fmt.Errorf("%w: no node of the swarm is connected now", web.ErrBusy)
	}
	answers = slices.Clone(answers)
	slices.SortFunc(answers, func(a, b nodeAnswer) int { return cmp.Compare(a.index, b.index) })
	count := map[swarmpb.CommandOutcome]int{}
	var done, failed, lost, other []nodeAnswer
	for _, a := range answers {
		switch {
		case a.err != nil:
			lost = append(lost, a)
		case a.outcome == swarmpb.CommandOutcome_COMMAND_OUTCOME_DONE:
			done = append(done, a)
		case a.outcome == swarmpb.CommandOutcome_COMMAND_OUTCOME_NOT_HERE, a.outcome == swarmpb.CommandOutcome_COMMAND_OUTCOME_NO_CONSUMER:
			other = append(other, a)
		default:
			failed = append(failed, a)
		}
		if a.err == nil {
			count[a.outcome]++
		}
	}
	if count[swarmpb.CommandOutcome_COMMAND_OUTCOME_NO_CONSUMER] == len(answers) {
		return "", web.ErrNoConsumer
	}
	if targeted(cmd) && len(done) > 0 {
		return joinAnswers(done), nil
	}
	if !targeted(cmd) && len(done) > 0 && len(failed)+len(lost) == 0 {
		return joinAnswers(done), nil
	}
	all := joinAnswers(answers)
	switch {
	case count[swarmpb.CommandOutcome_COMMAND_OUTCOME_REFUSED] > 0:
		return "", fmt.Errorf("%w: %s", web.ErrBadCommand, all)
	case count[swarmpb.CommandOutcome_COMMAND_OUTCOME_BUSY] > 0:
		return "", fmt.Errorf("%w: %s", web.ErrBusy, all)
	case len(failed)+len(lost) > 0:
		what := "not done on every node"
		if len(done) > 0 {
			what = "done on some nodes only"
		}
		return "", errors.New(what + ": " + all)
	}
	return "", fmt.Errorf("%w: no node holds it: %s", web.ErrNotHere, all)
}

func joinAnswers(as []nodeAnswer) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, "; ")
}
