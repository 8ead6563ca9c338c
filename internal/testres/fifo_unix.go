//go:build unix

package testres

import (
	"syscall"
	"testing"
)

// Mkfifo makes a named pipe at path (no program ever writes to it: reading
// it blocks forever).
func Mkfifo(tb testing.TB, path string) {
	tb.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		tb.Fatalf("mkfifo %s: %v", path, err)
	}
}
