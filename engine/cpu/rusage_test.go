//go:build unix

package cpu

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time so far. On a shared machine
// CPU time per call is steadier than wall time (memory stalls still count).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
