//go:build unix && !linux

package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent has no parent-death signal to set outside Linux: children
// are killed by the harness's own cleanup only.
func dieWithParent(cmd *exec.Cmd, as *syscall.Credential) {
	if as != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: as}
	}
}
