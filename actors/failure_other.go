//go:build !unix

package actors

// openFilesLimit: no RLIMIT_NOFILE here.
func openFilesLimit() (cur, hard uint64, ok bool) { return 0, 0, false }
