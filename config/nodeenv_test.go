package config

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestNodeEnvOutsideNamespace: the variables turbo swarm gives its nodes lie
// outside the configuration's namespace, so Load never reads nor refuses
// them. A top-level key whose first word is "node" would capture every one
// of them (and make each node's configuration invalid): this fails first.
func TestNodeEnvOutsideNamespace(t *testing.T) {
	for _, word := range envNamespace() {
		if strings.HasPrefix(EnvNodePrefix, EnvPrefix+"_"+word+"_") {
			t.Fatalf("the top-level key word %s takes %s… into the configuration's namespace: rename the key", word, EnvNodePrefix)
		}
	}
	path := writeConfig(t, "app.yaml", swarmBase)
	for _, name := range slices.Sorted(maps.Values(movedNodeEnv)) {
		if !strings.HasPrefix(name, EnvNodePrefix) {
			t.Errorf("%s does not start with %s", name, EnvNodePrefix)
		}
		if _, err := Load(path, []string{name + "=x"}); err != nil {
			t.Errorf("Load with %s set: %v", name, err)
		}
	}
}

// TestMovedNodeEnvRefused: a node variable under the name it had inside the
// swarm section's namespace is refused with its name now.
func TestMovedNodeEnvRefused(t *testing.T) {
	path := writeConfig(t, "app.yaml", swarmBase)
	for _, old := range slices.Sorted(maps.Keys(movedNodeEnv)) {
		_, err := Load(path, []string{old + "=1"})
		var fe *FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) || fe.Key != old {
			t.Fatalf("Load with %s: %v, want a FieldError for %s wrapping ErrInvalid", old, err, old)
		}
		want := "config: " + old + ": renamed " + movedNodeEnv[old] + ": turbo swarm sets it for its nodes; it is no configuration key"
		if err.Error() != want {
			t.Errorf("Load with %s:\n got  %s\n want %s", old, err, want)
		}
	}
}
