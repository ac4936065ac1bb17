//go:build unix

package actors

import "syscall"

// openFilesLimit returns the process's soft and hard RLIMIT_NOFILE.
func openFilesLimit() (cur, hard uint64, ok bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, false
	}
	return uint64(rl.Cur), uint64(rl.Max), true
}
