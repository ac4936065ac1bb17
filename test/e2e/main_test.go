package e2e

import (
	"os"
	"testing"

	"github.com/turbokafka/turbo/test/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testkit.RemoveBinary()
	os.Exit(code)
}
