package e2e

import (
	"testing"

	"github.com/turbokafka/turbo/test/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}
