package actors_test

import (
	"os"
	"testing"

	"github.com/turbokafka/turbo/test/testkit"
)

// TestMain fails the run if any actor received a message it does not handle:
// such a message is a wiring mistake (sent to the wrong actor), silently
// dropped in production apart from a log line and a counter.
func TestMain(m *testing.M) {
	os.Exit(testkit.CheckActorMessages(m.Run()))
}
