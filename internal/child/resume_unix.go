//go:build unix

package child

import (
	"os"
	"syscall"
)

// resume continues a stopped process (SIGCONT).
func resume(p *os.Process) { _ = p.Signal(syscall.SIGCONT) }
