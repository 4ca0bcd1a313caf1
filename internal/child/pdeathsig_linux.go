package child

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes the kernel kill the child when this process dies
// without its cleanup (a panic, a timeout, a kill): no process is left
// behind. It keeps the rest of cmd's SysProcAttr (a Credential: the signal
// is set after the change of user, which would otherwise clear it).
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
