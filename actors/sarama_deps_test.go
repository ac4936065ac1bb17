package actors

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// saramaSide are the files of this package that may import sarama: the
// sarama side of the client proxy (the group, its claims' feed, the aux
// client, the session's watch) and what reads the brokers directly
// (WaitCaughtUp, the high-watermark refresh). The rest of the tree speaks to
// Kafka through kafkaSide, so a second Kafka side replaces these files and
// nothing else.
var saramaSide = []string{
	"caughtup.go", "group.go", "hwmrefresh.go", "kafkaaux.go", "kafkaside.go", "partitioner.go",
	"session.go", "sessionwatch.go", "tree.go", "txnsarama.go",
}

func TestOnlyTheSaramaSideImportsSarama(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/IBM/sarama") && !slices.Contains(saramaSide, name) {
				t.Errorf("%s imports %s: only the sarama side's files may (saramaSide); reach Kafka through kafkaSide", name, path)
			}
		}
	}
}
