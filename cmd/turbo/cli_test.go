package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite the command-line reference in cmd/turbo/README.md from the commands")

const (
	refBegin = "<!-- turbo docs: begin (generated from the commands; TestREADMECommandLineReference keeps it current) -->\n"
	refEnd   = "<!-- turbo docs: end -->\n"
)

// The command-line reference in cmd/turbo/README.md is the commands' own
// help; after a change to a command,
// `go test ./cmd/turbo -run TestREADMECommandLineReference -update` rewrites it.
func TestREADMECommandLineReference(t *testing.T) {
	const path = "README.md" // cmd/turbo/README.md
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(readme, []byte(refBegin)), bytes.Index(readme, []byte(refEnd))
	if begin < 0 || end < begin {
		t.Fatalf("cmd/turbo/README.md has no %q … %q section", strings.TrimSpace(refBegin), strings.TrimSpace(refEnd))
	}
	want := "\n" + cliReference(newRoot(&cli{ctx: context.Background()})) + "\n"
	got := string(readme[begin+len(refBegin) : end])
	if *update {
		out := append(append(append([]byte{}, readme[:begin+len(refBegin)]...), want...), readme[end:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != want {
		t.Fatalf("the command-line reference in cmd/turbo/README.md is out of date: run\n  go test ./cmd/turbo -run TestREADMECommandLineReference -update\n--- cmd/turbo/README.md\n%s\n--- commands\n%s", got, want)
	}
	for _, cmd := range []string{"turbo run", "turbo swarm", "turbo dev", "turbo produce", "turbo config check", "turbo config print", "turbo version", "turbo completion"} {
		if !strings.Contains(want, "#### "+cmd+"\n") {
			t.Errorf("the reference lacks %s", cmd)
		}
	}
}

// Every command has a description and help that lists each of its flags;
// every command that does something shows an example.
func TestEveryCommandExplainsItself(t *testing.T) {
	root := newRoot(&cli{ctx: context.Background()})
	var walk func(*cobra.Command)
	n := 0
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		if cmd.Hidden || cmd.Name() == "help" || cmd.Parent() != nil && cmd.Parent().Name() == "completion" {
			return
		}
		n++
		args := append(strings.Fields(strings.TrimPrefix(cmd.CommandPath(), "turbo")), "--help")
		r := call(t, args...)
		if r.code != exitOK || r.stderr != "" {
			t.Errorf("turbo %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
		if cmd.Short == "" || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("%s: no description or usage:\n%s", cmd.CommandPath(), r.stdout)
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !strings.Contains(r.stdout, "--"+f.Name) || f.Usage == "" {
				t.Errorf("%s --help does not explain --%s:\n%s", cmd.CommandPath(), f.Name, r.stdout)
			}
		})
		leaf := !cmd.HasSubCommands() && cmd.Name() != "version"
		if leaf && !strings.Contains(r.stdout, "Examples:\n  turbo ") {
			t.Errorf("%s --help shows no example:\n%s", cmd.CommandPath(), r.stdout)
		}
	}
	walk(root)
	if n < 9 {
		t.Fatalf("only %d commands walked", n)
	}
}

// Each shell's completion script is produced; bash's parses (bash -n), and
// it completes the commands and their flags.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := call(t, "completion", shell)
		if r.code != exitOK || len(r.stdout) < 1000 || r.stderr != "" {
			t.Fatalf("completion %s: exit %d, %d bytes, stderr %q", shell, r.code, len(r.stdout), r.stderr)
		}
		if shell != "bash" {
			continue
		}
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Fatalf("bash is needed to check the bash completion: %v", err)
		}
		check := exec.Command(bash, "-n")
		check.Stdin = strings.NewReader(r.stdout)
		if out, err := check.CombinedOutput(); err != nil {
			t.Fatalf("bash -n refuses the completion script: %v\n%s", err, out)
		}
	}
	// What the scripts ask turbo for: the commands, then a command's flags.
	r := call(t, "__complete", "")
	for _, want := range []string{"run\t", "swarm\t", "config\t", "completion\t"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("completing turbo's commands lacks %q:\n%s", want, r.stdout)
		}
	}
	r = call(t, "__complete", "swarm", "--")
	for _, want := range []string{"--config\t", "--nodes\t", "--exit-on-idle\t"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("completing turbo swarm's flags lacks %q:\n%s", want, r.stdout)
		}
	}
}
