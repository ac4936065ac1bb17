package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/turbokafka/turbo/proto/swarmpb"
	"github.com/turbokafka/turbo/supervisor/web"
)

// Node carries out a command the swarm's supervisor routed to this node
// (supervisor.NodeOptions.Command): a web.Command as JSON, done as Do does
// it, with how it went in the supervisor's terms.
func (list Consumers) Node(b []byte) (swarmpb.CommandOutcome, string) {
	var cmd web.Command
	if err := json.Unmarshal(b, &cmd); err != nil {
		return swarmpb.CommandOutcome_COMMAND_OUTCOME_REFUSED, "not a command: " + err.Error()
	}
	did, err := list.Do(cmd)
	for _, c := range []struct {
		sentinel error
		outcome  swarmpb.CommandOutcome
	}{
		{web.ErrBadCommand, swarmpb.CommandOutcome_COMMAND_OUTCOME_REFUSED},
		{web.ErrNotHere, swarmpb.CommandOutcome_COMMAND_OUTCOME_NOT_HERE},
		{web.ErrBusy, swarmpb.CommandOutcome_COMMAND_OUTCOME_BUSY},
	} {
		if errors.Is(err, c.sentinel) {
			return c.outcome, strings.TrimPrefix(err.Error(), c.sentinel.Error()+": ")
		}
	}
	switch {
	case errors.Is(err, web.ErrNoConsumer):
		return swarmpb.CommandOutcome_COMMAND_OUTCOME_NO_CONSUMER, fmt.Sprintf("no consumer %q here", cmd.Consumer)
	case err != nil:
		return swarmpb.CommandOutcome_COMMAND_OUTCOME_FAILED, err.Error()
	}
	return swarmpb.CommandOutcome_COMMAND_OUTCOME_DONE, did
}
