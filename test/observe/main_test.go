// Package observe tests what a running turbo shows on http.listen: its
// Prometheus metrics, readiness and liveness, against the real binary.
package observe

import (
	"testing"

	"github.com/turbokafka/turbo/test/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}
