package drivertest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// maxRSSKiB is a finished child's peak resident set (getrusage's
// ru_maxrss, in KiB on Linux).
func maxRSSKiB(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return -1
}

// busyCPU is the machine's CPU time spent not idle since boot, every
// process's (/proc/stat, USER_HZ = 100 ticks a second on Linux).
func busyCPU() time.Duration {
	doc, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(doc), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:8] { // user nice system idle iowait irq softirq
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond
}

// loadAverage is the one-minute load average.
func loadAverage() string {
	doc, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(doc))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
