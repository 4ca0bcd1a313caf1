//go:build oncepush_failpoints

package failpoint

import (
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
)

var (
	armed = os.Getenv("ONCEPUSH_FAILPOINT")
	// passes is how many times the armed step is passed before it kills
	// (ONCEPUSH_FAILPOINT_AFTER; unset: none).
	passes = afterFromEnv()
	hits   atomic.Int64
)

func afterFromEnv() int64 {
	v := os.Getenv("ONCEPUSH_FAILPOINT_AFTER")
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		// A test build only: a typo must not silently move the kill.
		panic("failpoint: ONCEPUSH_FAILPOINT_AFTER=" + strconv.Quote(v) + " is not a count")
	}
	return n
}

// Hit kills the process with SIGKILL if step is the armed failpoint and it
// has been passed ONCEPUSH_FAILPOINT_AFTER times already.
func Hit(step string) {
	if step != armed || hits.Add(1) <= passes {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not handled; never return into the step after it
}
