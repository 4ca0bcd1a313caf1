package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// socketOwners maps the local TCP ports of the given processes to their
// pids, from /proc: the fake records each request's client address, and a
// worker's connections to it are the sockets among its file descriptors.
// This is how the harness tells which worker the fake is holding requests
// for, without any help from the worker.
func socketOwners(pids []int) map[int]int {
	inodes := map[string]int{} // socket inode → pid
	for _, pid := range pids {
		fds, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
		if err != nil {
			continue // exited meanwhile
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "fd", fd.Name()))
			if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
				inodes[strings.TrimSuffix(inode, "]")] = pid
			}
		}
	}
	owners := map[int]int{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			pid, ok := inodes[fields[9]]
			if !ok {
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if port, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil {
				owners[int(port)] = pid
			}
		}
		f.Close()
	}
	return owners
}
