package testkit

import (
	"bufio"
	"bytes"
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
	// This process's descendants first (the turbo processes a test starts,
	// a swarm's nodes), then this process (an in-process client), then the
	// others: a scan of every process's descriptors reads thousands of
	// links when a Kafka broker runs on the machine, and this process holds
	// a descriptor for every connection its ledgers serve.
	mine, others := family(os.Getpid())
	order := make([]int, 0, len(mine)+len(others))
	order = append(append(append(order, mine[1:]...), mine[0]), others...)
	for _, pid := range order {
		if holds(pid, want) {
			return pid
		}
	}
	return 0
}

// holds reports whether process pid has a descriptor open on link (e.g.
// "socket:[123]").
func holds(pid int, link string) bool {
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && l == link {
			return true
		}
	}
	return false
}

// family splits the machine's processes into root and its descendants
// (root first), and the others.
func family(root int) (mine, others []int) {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		parent[pid] = ppid(pid)
	}
	in := map[int]bool{root: true}
	var inFamily func(pid int, depth int) bool
	inFamily = func(pid, depth int) bool {
		if v, ok := in[pid]; ok || depth > 64 {
			return v
		}
		p, ok := parent[pid]
		v := ok && p != 0 && p != pid && inFamily(p, depth+1)
		in[pid] = v
		return v
	}
	mine = append(mine, root)
	for pid := range parent {
		switch {
		case pid == root:
		case inFamily(pid, 0):
			mine = append(mine, pid)
		default:
			others = append(others, pid)
		}
	}
	return mine, others
}

// ppid is the parent of process pid (0 when it cannot tell): the fourth
// field of /proc/PID/stat, after the command name in parentheses (which may
// hold spaces and parentheses itself).
func ppid(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // state ppid ...
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
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
	// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout
	// inode: only the line with both addresses is split (a machine running
	// brokers lists thousands of sockets).
	pair := []byte(" " + local + " " + remote + " ")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), pair) {
			continue
		}
		if fields := strings.Fields(sc.Text()); len(fields) > 9 && fields[1] == local && fields[2] == remote {
			return fields[9]
		}
	}
	return ""
}
