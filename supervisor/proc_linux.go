package supervisor

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

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
