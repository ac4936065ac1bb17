package harness_test

import (
	"go/doc"
	"go/parser"
	"go/token"
	"io"
	"os"
	"strings"
	"testing"
)

// examples are the package's examples, run again by
// TestExamplesAreDeterministic.
var examples = map[string]func(){
	"Example":                    Example,
	"ExampleFailTimes":           ExampleFailTimes,
	"ExampleHarness_DeadLetters": ExampleHarness_DeadLetters,
	"ExampleHarness_Committed":   ExampleHarness_Committed,
	"ExampleHarness_Revoke":      ExampleHarness_Revoke,
	"ExampleHarness_Restarts":    ExampleHarness_Restarts,
}

// TestExamplesAreDeterministic runs every example and compares what it
// prints with its Output block. `go test -count=N` runs examples only once,
// so without this a flake check would never repeat them.
func TestExamplesAreDeterministic(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	parsed := doc.Examples(f)
	if len(parsed) != len(examples) {
		t.Errorf("example_test.go has %d examples, the table here %d: keep them in step", len(parsed), len(examples))
	}
	for _, ex := range parsed {
		name := "Example" + ex.Name
		run := examples[name]
		if run == nil {
			t.Errorf("%s is missing from the table of examples", name)
			continue
		}
		if got, want := strings.TrimSpace(capture(t, run)), strings.TrimSpace(ex.Output); got != want {
			t.Errorf("%s printed\n%s\nwant\n%s", name, got, want)
		}
	}
}

// capture returns what f prints to standard output.
func capture(t *testing.T, f func()) (printed string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	stdout := os.Stdout
	os.Stdout = w
	defer func() { // also when f panics: the reader ends, stdout comes back
		os.Stdout = stdout
		w.Close()
		printed = <-out
		r.Close()
	}()
	f()
	return ""
}
