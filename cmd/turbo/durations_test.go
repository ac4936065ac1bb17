package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// forbiddenDurationCalls render a time.Duration through zerolog's global
// DurationFieldUnit: a bare number of milliseconds ("retry_in":1500) that
// says nothing about its unit, and changes meaning with a global setting
// the actors package (a library) does not own. turbo's convention is a Go
// duration string, written as .Stringer(key, d) ("retry_in":"1.5s").
var forbiddenDurationCalls = map[string]string{
	"Dur":      "zerolog's Dur logs a unit-less number: use .Stringer(key, d)",
	"Durs":     "zerolog's Durs logs unit-less numbers: log the durations as strings",
	"TimeDiff": "zerolog's TimeDiff logs a unit-less number: use .Stringer(key, t.Sub(start))",
	"Duration": "slog.Duration reaches zerolog's slog handler as Dur, a unit-less number: use slog.String(key, d.String())",
}

// Every duration in turbo's logs carries its unit: no non-test file of the
// module may call one of forbiddenDurationCalls. The check is syntactic (a
// method or function of that name, on any receiver), so a type of our own
// with a method called Dur would trip it too: name it otherwise.
func TestLogsHaveNoUnitlessDurations(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			why, bad := forbiddenDurationCalls[sel.Sel.Name]
			if sel.Sel.Name == "Duration" {
				// Only slog.Duration: time.Duration(x) is a conversion.
				pkg, isIdent := sel.X.(*ast.Ident)
				bad = isIdent && pkg.Name == "slog"
			}
			if bad {
				t.Errorf("%s: %s", fset.Position(call.Pos()), why)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module: %v", err)
	}
	// The walk must have seen the module, not an empty directory.
	if files < 50 {
		t.Fatalf("checked %d Go files under %s: is the test running from cmd/turbo?", files, root)
	}
}
