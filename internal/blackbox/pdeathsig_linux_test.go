package blackbox

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill the child if the test process dies
// without its cleanups (a timeout panic, a kill): no process is left behind.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
