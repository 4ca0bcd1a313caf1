//go:build oncepush_failpoints

package wallclock

import (
	"errors"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

var offset atomic.Int64 // a time.Duration

// Now is time.Now plus the offset the harness set.
func Now() time.Time { return time.Now().Add(time.Duration(offset.Load())) }

func init() {
	dir := os.Getenv("ONCEPUSH_CLOCK_DIR")
	if dir == "" {
		return
	}
	path := filepath.Join(dir, strconv.Itoa(os.Getpid()))
	// Installed before main runs: a SIGUSR1 never meets the default action,
	// which would end the process.
	steps := make(chan os.Signal, 1)
	signal.Notify(steps, syscall.SIGUSR1)
	load(path, 1)
	go func() {
		for n := 2; ; n++ {
			<-steps
			load(path, n)
		}
	}()
}

// load reads the offset from path and acknowledges the nth read.
func load(path string, n int) {
	b, err := os.ReadFile(path)
	var d time.Duration
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		panic("wallclock: " + err.Error())
	default:
		// A test build only: an offset that does not parse must not be
		// taken for zero.
		if d, err = time.ParseDuration(strings.TrimSpace(string(b))); err != nil {
			panic("wallclock: " + path + ": " + err.Error())
		}
	}
	offset.Store(int64(d))
	if err := os.WriteFile(path+".ack", []byte(strconv.Itoa(n)), 0o600); err != nil {
		panic("wallclock: " + err.Error())
	}
}
