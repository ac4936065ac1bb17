package testkit

import "testing"

// Each broker gets a port of its own, which it reports and accepts
// connections on.
func TestDevBindsAPortOfItsOwnAndSaysWhich(t *testing.T) {
	seen := map[string]bool{}
	for i := range 3 {
		a := Dev(t, "--partitions", "1")
		if seen[a] {
			t.Fatalf("two brokers said they listen on %s", a)
		}
		seen[a] = true
		if !Reachable(a) {
			t.Errorf("broker %d said it listens on %s, and nothing accepts connections there", i, a)
		}
	}
}

func TestMain(m *testing.M) { Main(m) }
