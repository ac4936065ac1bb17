// Package module checks that turbo can be fetched as a Go module by others:
// the module zip the go command builds accepts what is committed, and an
// outside module gets turbo through a module proxy and builds and runs the
// README's examples against it.
package module

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// modulePath is the path turbo is fetched by.
const modulePath = "github.com/turbokafka/turbo"

// TestModuleZips checks that the files committed at HEAD make a valid module
// zip. The go command builds that zip whenever someone fetches the module,
// and refuses the whole module for one bad name (a file named after a
// device reserved on Windows, such as aux.go; two paths that differ only in
// case; a path that is not valid UTF-8), so `go get` would fail for every
// embedder while nothing here notices.
func TestModuleZips(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := headCommit(ctx, t)
	if path := modfile.ModulePath(c.goMod); path != modulePath {
		t.Fatalf("go.mod at %s declares module %q, want %q", c.short(), path, modulePath)
	}
	cf, err := modzip.CheckFiles(c.files)
	for _, f := range cf.Omitted {
		t.Logf("left out of the module zip: %v", f)
	}
	if err != nil {
		t.Fatalf("the files committed at %s make no module zip, so `go get %s` fails:\n%v", c.short(), modulePath, err)
	}
	if err := c.moduleZip(io.Discard, c.pseudoVersion(time.Now())); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files committed, %d in the module zip", len(c.files), len(cf.Valid))
}

// commit is what is committed at HEAD, read as the go command reads a git
// revision when it fetches a module.
type commit struct {
	root  string // the repository's top directory
	hash  string
	goMod []byte
	files []modzip.File
	// archive holds the files' contents.
	archive *zip.Reader
}

func (c commit) short() string { return c.hash[:12] }

// headCommit reads HEAD of the repository this test runs in, with `git
// archive` as the go command does: it leaves out what .gitattributes marks
// export-ignore, and sees neither untracked files nor uncommitted changes.
// Outside a git checkout (turbo unpacked from a module zip, which is proof
// enough that it zips) the test is skipped.
func headCommit(ctx context.Context, t *testing.T) commit {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("no git to read the committed files with: %v", err)
	}
	root, err := git(ctx, ".", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	c := commit{root: strings.TrimSpace(string(root))}
	hash, err := git(ctx, c.root, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	c.hash = strings.TrimSpace(string(hash))
	// The settings the go command uses, so that line endings are as
	// committed whatever this machine's git configuration says.
	archive, err := git(ctx, c.root, "-c", "core.autocrlf=input", "-c", "core.eol=lf", "archive", "--format=zip", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	c.archive, err = zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatalf("reading the output of git archive: %v", err)
	}
	for _, f := range c.archive.File {
		if strings.HasSuffix(f.Name, "/") {
			continue // a directory
		}
		c.files = append(c.files, archiveFile{f})
		if f.Name == "go.mod" {
			if c.goMod, err = c.read("go.mod"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if c.goMod == nil {
		t.Fatalf("no go.mod committed at the top of %s", c.root)
	}
	return c
}

// read returns a committed file's contents.
func (c commit) read(name string) ([]byte, error) {
	f, err := c.archive.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// moduleZip writes the module zip of version to w, as a module proxy serves
// it.
func (c commit) moduleZip(w io.Writer, version string) error {
	if err := modzip.Create(w, module.Version{Path: modulePath, Version: version}, c.files); err != nil {
		return fmt.Errorf("the module as committed at %s cannot be zipped, so `go get %s` fails for every embedder:\n%w",
			c.short(), modulePath, err)
	}
	return nil
}

// pseudoVersion is a pseudo-version of the commit at time at.
func (c commit) pseudoVersion(at time.Time) string {
	return module.PseudoVersion("", "", at, c.short())
}

// archiveFile is a file of git archive's zip, as module zip functions take it.
type archiveFile struct{ f *zip.File }

func (a archiveFile) Path() string                { return a.f.Name }
func (a archiveFile) Lstat() (fs.FileInfo, error) { return a.f.FileInfo(), nil }
func (a archiveFile) Open() (io.ReadCloser, error) {
	return a.f.Open()
}

// git runs git in dir and returns its standard output.
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
