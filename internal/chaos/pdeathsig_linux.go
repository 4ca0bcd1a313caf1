package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the child when the harness dies
// without its cleanup (a panic, a kill): no process is left behind. as, when
// not nil, runs the child as that user; the parent-death signal is set after
// the change of user, which would otherwise clear it.
func dieWithParent(cmd *exec.Cmd, as *syscall.Credential) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: as}
}
