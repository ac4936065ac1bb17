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
// client end of a loopback TCP connection whose client address is remote
// ("127.0.0.1:54321"), or 0 when it cannot tell. The ledger's endpoint
// uses it to judge ownership between processes that all post to the same
// URL (a swarm's nodes share one configuration): Linux lists every TCP
// socket with its inode in /proc/net/tcp, and a process's descriptors name
// the inodes of their sockets.
func peerPID(remote string) int {
	addr, err := net.ResolveTCPAddr("tcp", remote)
	if err != nil || addr.IP.To4() == nil {
		return 0
	}
	ip := addr.IP.To4()
	// /proc/net/tcp writes an IPv4 address as one 32-bit word in host
	// (little-endian) order, then the port in hex.
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], addr.Port)
	inode := socketInode(local)
	if inode == "" {
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

// socketInode returns the inode of the TCP socket whose local address is
// local (in /proc/net/tcp's notation), "" if there is none.
func socketInode(local string) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		if len(fields) > 9 && fields[1] == local {
			return fields[9]
		}
	}
	return ""
}
