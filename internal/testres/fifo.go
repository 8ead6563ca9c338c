package testres

import (
	"testing"
	"time"
)

// promptly bounds Promptly: generous, so that a loaded 2-core machine never
// trips it; the code it catches blocks forever.
const promptly = 10 * time.Second

// Promptly runs fn and returns its error, failing the test if fn has not
// returned within 10 s: for code that used to block forever (opening a named
// pipe put where a model belongs), so that the old code fails the test
// instead of hanging it. A goroutine that never returns is left behind (the
// test binary exits anyway).
func Promptly(tb testing.TB, what string, fn func() error) error {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(promptly):
		tb.Fatalf("%s has not returned after %s: it blocks", what, promptly)
		return nil
	}
}
