//go:build !unix

package testres

import "testing"

// Mkfifo skips the test: this system has no named pipes in its file system.
func Mkfifo(tb testing.TB, path string) {
	tb.Helper()
	tb.Skipf("no named pipes on this system (wanted one at %s)", path)
}
