//go:build oncepush_failpoints

package failpoint

import (
	"os"
	"syscall"
)

var armed = os.Getenv("ONCEPUSH_FAILPOINT")

// Hit kills the process with SIGKILL if step is the armed failpoint.
func Hit(step string) {
	if step != armed {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not handled; never return into the step after it
}
