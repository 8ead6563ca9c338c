//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Process returns this process's user+system CPU time so far, or 0 if the
// system does not report it.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
