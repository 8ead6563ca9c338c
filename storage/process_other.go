//go:build !unix

package storage

// processRunning cannot tell here: the age of a temporary file alone
// decides (see ReconcileMinAge).
func processRunning(pid int) bool { return false }
