package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/rs/zerolog"
)

// fdFields adds the descriptor figures to a log line (open_files only when
// it can be counted).
func fdFields(e *zerolog.Event) {
	soft, open := fdUsage()
	e.Uint64("open_files_limit", soft)
	if open >= 0 {
		e.Int("open_files", open)
	}
}

// fdUsage returns the soft RLIMIT_NOFILE and how many descriptors are open
// (-1 when /proc/self/fd cannot be read: out of descriptors, precisely).
func fdUsage() (soft uint64, open int) {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		soft = lim.Cur
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return soft, -1
	}
	return soft, len(ents) - 1 // less the one ReadDir used
}

// residentBytes reads a process's resident set size (VmRSS) from
// /proc/PID/status: measured from outside, so a hung process is measured too.
func residentBytes(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseVmRSS(b)
}

func parseVmRSS(status []byte) (uint64, error) {
	for line := range bytes.Lines(status) {
		rest, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", line)
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected VmRSS line %q", line)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmRSS line (a kernel thread, or a zombie)")
}
