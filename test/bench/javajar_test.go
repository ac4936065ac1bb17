package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

// The Java peers — the Confluent Parallel Consumer (./parallelconsumer) and
// a share-group consumer (./sharegroup) — are Maven projects, each built
// into one jar (its dependencies shaded in) outside the source tree: in
// .cache/bench/ at the module root (git-ignored), named by a hash of the
// program's files, so a second run does not build again and an edited
// program is built afresh. Maven's own downloads land in ~/.m2.
type javaPeer struct {
	sources string // the Maven project's directory, under test/bench
	name    string // its artifact: target/<name>.jar, cached as <name>-<hash>.jar
	once    sync.Once
	path    string
	err     error
}

var (
	pcProgram    = &javaPeer{sources: "parallelconsumer", name: "pc-bench"}
	shareProgram = &javaPeer{sources: "sharegroup", name: "share-bench"}
)

// jar returns the peer's jar, building it if needed, or an error that the
// peer's rows show as n/a: "java unavailable" without a Java runtime,
// "maven unavailable" without Maven and no jar built before.
func (p *javaPeer) jar(b *testing.B) (string, error) {
	p.once.Do(func() { p.path, p.err = p.build(b) })
	return p.path, p.err
}

func (p *javaPeer) build(b *testing.B) (string, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return "", errors.New("java unavailable")
	}
	files, err := sourceFiles(p.sources)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", p.sources, err)
	}
	hash, err := hashFiles(p.sources, files)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", p.sources, err)
	}
	jar := filepath.Join(moduleRoot, ".cache", "bench", p.name+"-"+hash[:16]+".jar")
	if _, err := os.Stat(jar); err == nil {
		return jar, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", errors.New("maven unavailable")
	}
	// Maven builds in a copy, so that its target/ never lands in the tree.
	work, err := os.MkdirTemp("", "turbo-"+p.name+"-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	if err := copyFiles(p.sources, work, files); err != nil {
		return "", err
	}
	b.Logf("building the %s peer with Maven (once; cached as %s)", p.sources, jar)
	start := time.Now()
	cmd := exec.Command("mvn", "-q", "-B", "-DskipTests", "package")
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Logf("mvn package: %v\n%s", err, out)
		return "", fmt.Errorf("maven build failed: %v", err)
	}
	b.Logf("built in %s", time.Since(start).Round(time.Second))
	if err := os.MkdirAll(filepath.Dir(jar), 0o755); err != nil {
		return "", err
	}
	// Rename is atomic: a concurrent run sees the whole jar or none.
	tmp := jar + fmt.Sprintf(".%d.tmp", os.Getpid())
	data, err := os.ReadFile(filepath.Join(work, "target", p.name+".jar"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, jar); err != nil {
		return "", err
	}
	// Jars of earlier versions of the program are of no further use.
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(jar), p.name+"-*.jar"))
	for _, f := range stale {
		if f != jar {
			_ = os.Remove(f)
		}
	}
	return jar, nil
}

// sourceFiles lists the program's files (not a target/ of a build by hand).
func sourceFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "target":
			return filepath.SkipDir
		case d.Type().IsRegular():
			rel, err := filepath.Rel(dir, path)
			files = append(files, rel)
			return err
		}
		return nil
	})
	sort.Strings(files)
	return files, err
}

// hashFiles hashes the names and contents of files under dir.
func hashFiles(dir string, files []string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(f), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyFiles copies files from one directory to another.
func copyFiles(from, to string, files []string) error {
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			return err
		}
		dst := filepath.Join(to, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
