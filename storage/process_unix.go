//go:build unix

package storage

import (
	"errors"
	"syscall"
)

// processRunning reports whether a process with id pid exists on this
// machine (signal 0 checks without signalling; EPERM means it exists but is
// another user's). A recycled pid reads as running: its temporary file then
// waits for a later start, which is safe.
func processRunning(pid int) bool {
	if pid <= 0 {
		return false // 0 and -1 would address process groups
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
