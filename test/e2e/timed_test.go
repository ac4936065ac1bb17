package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The tests that hold turbo to a time bound run alone, after the rest (the
// Makefile's TIMED, test/README.md): each says so in a comment, and the
// Makefile's list and those comments must agree, or a timed test would run
// in the crowd (and measure the machine) or a listed one would not exist.
func TestTimedTestsRunAlone(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TIMED := \^\(([A-Za-z0-9|]+)\)\$\$$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("no TIMED := ^(TestA|TestB)$$ line in the Makefile")
	}
	listed := strings.Split(string(m[1]), "|")
	pkgs := regexp.MustCompile(`(?m)^TIMED_PKGS := (.+)$`).FindSubmatch(makefile)
	if pkgs == nil {
		t.Fatal("no TIMED_PKGS line in the Makefile")
	}
	// The timed tests a real broker runs too (those not embedded-only) run
	// from KAFKA_TIMED_PKGS on the newest line (test/kafka/line.sh).
	embeddedOnly := makeList(t, makefile, "KAFKA_EMBEDDED_ONLY")
	kafkaPkgs := regexp.MustCompile(`(?m)^KAFKA_TIMED_PKGS := (.+)$`).FindSubmatch(makefile)
	if kafkaPkgs == nil {
		t.Fatal("no KAFKA_TIMED_PKGS line in the Makefile")
	}
	// A test function, its first line, and whether it is marked timed.
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\) \{\n(.*)\n`)
	var marked []string
	for _, pkg := range strings.Fields(string(pkgs[1])) {
		files, _ := filepath.Glob(filepath.Join(root, pkg, "*_test.go"))
		if len(files) == 0 {
			t.Fatalf("TIMED_PKGS names %s, which has no tests", pkg)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range decl.FindAllSubmatch(src, -1) {
				name, first := string(d[1]), strings.TrimSpace(string(d[2]))
				timed := strings.HasPrefix(first, "// Timed (")
				if timed {
					marked = append(marked, name)
				}
				if slices.Contains(listed, name) && !timed {
					t.Errorf("%s (%s) is in TIMED but does not begin with a \"// Timed (…)\" comment (a t.Parallel there would put it in the crowd)", name, f)
				}
				if timed && !slices.Contains(embeddedOnly, name) && !slices.Contains(strings.Fields(string(kafkaPkgs[1])), pkg) {
					t.Errorf("%s (%s) is timed and runs on a real broker too, but KAFKA_TIMED_PKGS leaves out %s: the newest Kafka line would not run it", name, f, pkg)
				}
			}
		}
	}
	for _, name := range marked {
		if !slices.Contains(listed, name) {
			t.Errorf("%s says it is timed, but the Makefile's TIMED does not list it: it would run beside other tests", name)
		}
	}
	for _, name := range listed {
		if !slices.Contains(marked, name) {
			t.Errorf("the Makefile's TIMED lists %s, which no package of TIMED_PKGS has (or it lacks its comment)", name)
		}
	}
}

// makeList returns the names of the Makefile's NAME := ^(A|B|…)$$ line.
func makeList(t *testing.T, makefile []byte, name string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` *:= \^\(([A-Za-z0-9|]+)\)\$\$$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatalf("no %s := ^(TestA|TestB)$$ line in the Makefile", name)
	}
	return strings.Split(string(m[1]), "|")
}
