//go:build unix && !linux

package main

// socketOwners knows no process's sockets outside Linux: the harness then
// picks its victims among all workers whenever the fake holds requests.
func socketOwners(pids []int) map[int]int { return nil }
