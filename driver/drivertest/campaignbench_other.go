//go:build !linux

package drivertest

import (
	"os"
	"time"
)

// maxRSSKiB is not measured on this platform.
func maxRSSKiB(*os.ProcessState) int64 { return -1 }

func busyCPU() time.Duration { return 0 }

func loadAverage() string { return "?" }
