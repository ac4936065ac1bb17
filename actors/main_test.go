package actors_test

import (
	"os"
	"testing"

	"fmt"

	"github.com/turbokafka/turbo/actors"
)

// TestMain fails the run if any actor received a message it does not handle:
// such a message is a wiring mistake (sent to the wrong actor), silently
// dropped in production apart from a log line and a counter.
func TestMain(m *testing.M) {
	code := m.Run()
	if n := actors.UnexpectedMessages(); n != 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: actors received %d unexpected messages\n", n)
		code = 1
	}
	os.Exit(code)
}
