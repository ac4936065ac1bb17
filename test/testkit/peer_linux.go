package testkit

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// peerPID returns the PID of the process on this machine that holds the
// client end of a loopback TCP connection, given its two ends as this
// server sees them (remote: the client's address; local: this server's),
// or 0 when it cannot tell. The ledger's endpoint uses it to judge
// ownership between processes that all post to the same URL (a swarm's
// nodes share one configuration): Linux lists every TCP socket with its
// inode in /proc/net/tcp, and a process's descriptors name the inodes of
// their sockets. Both ends must match: Linux lets connections to different
// destinations share a local port, so the client's address alone may name
// another process's socket (it did, in CI).
func peerPID(remote, local string) int {
	client, server := procNetAddr(remote), procNetAddr(local)
	if client == "" || server == "" {
		return 0
	}
	inode := socketInode(client, server)
	if inode == "" || inode == "0" {
		return 0
	}
	want := "socket:[" + inode + "]"
	procs, _ := filepath.Glob("/proc/[0-9]*/fd")
	for _, fdDir := range procs {
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && link == want {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(fdDir)))
				return pid
			}
		}
	}
	return 0
}

// procNetAddr writes an IPv4 address as /proc/net/tcp does: one 32-bit
// word in host (little-endian) order, then the port, in hex; "" for
// anything else.
func procNetAddr(addr string) string {
	a, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil || a.IP.To4() == nil {
		return ""
	}
	ip := a.IP.To4()
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
}

// socketInode returns the inode of the TCP socket from local to remote
// (in /proc/net/tcp's notation), "" if there is none.
func socketInode(local, remote string) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(fields) > 9 && fields[1] == local && fields[2] == remote {
			return fields[9]
		}
	}
	return ""
}
