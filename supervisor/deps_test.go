package supervisor

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// forbiddenDeps are modules the supervisor must never link: it supervises
// processes, and a node judges its own Kafka side (cmd/turbo). Linking
// either would make the supervisor's memory, start-up and failures depend on
// code it does not run.
var forbiddenDeps = []string{"github.com/IBM/sarama", "github.com/asynkron/protoactor-go"}

// goCommand is the go command of the toolchain running this test, so that
// the dependency list is the one this build sees; PATH's only when the
// toolchain's is not there (a test binary copied elsewhere).
func goCommand(t *testing.T) string {
	t.Helper()
	if root := runtime.GOROOT(); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command: neither %s/bin/go nor go on PATH: %v", runtime.GOROOT(), err)
	}
	return p
}

func TestSupervisorLinksNeitherKafkaNorActors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	goCmd := goCommand(t)
	for pkg, path := range map[string]string{
		".":     "github.com/turbokafka/turbo/supervisor",
		"./web": "github.com/turbokafka/turbo/supervisor/web",
	} {
		// Without -test: what the package links, not what its tests do
		// (they may use the actors to play a node).
		cmd := exec.CommandContext(ctx, goCmd, "list", "-deps", pkg)
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("%s list -deps %s: %v\n%s", goCmd, pkg, err, stderr)
		}
		deps := strings.Fields(string(out))
		// The list must be a real one: it ends with the package itself,
		// after the runtime every Go package links.
		if !slices.Contains(deps, "runtime") || len(deps) == 0 || deps[len(deps)-1] != path {
			t.Fatalf("go list -deps %s is not a dependency list of %s; cannot judge it from:\n%s", pkg, path, out)
		}
		for _, d := range deps {
			for _, bad := range forbiddenDeps {
				if d == bad || strings.HasPrefix(d, bad+"/") {
					t.Errorf("package %s links %s; the supervisor must not link Kafka or the actor system (go list -deps %s)", pkg, d, pkg)
				}
			}
		}
	}
}
