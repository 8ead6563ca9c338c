// Package crashtest SIGKILLs a test's helper subprocess at chosen points, for
// the tests that check what a crash leaves on disk (DESIGN.md invariant 6).
//
// The test binary runs itself: the killing test starts Command(t, "TestXHelper",
// env) and calls KillAfter; TestXHelper, which runs only when its environment
// variable is set, works in a loop and calls Progress after each step.
package crashtest

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// progressLine is what a helper prints on stdout after each completed step.
const progressLine = "saved"

// Progress reports one completed step of a helper process to KillAfter.
func Progress() { fmt.Println(progressLine) }

// Command returns a command running only the test named test of the current
// test binary, with env ("NAME=value" entries) added to the environment.
func Command(t testing.TB, test string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// KillAfter starts cmd and SIGKILLs it after it has reported steps completed
// steps (Progress) and a further delay: the kill lands anywhere from start-up
// to the middle of a later step, whatever the machine's speed. It fails the
// test if the helper ends first or makes no progress in 30 s. The caller
// waits for cmd.
func KillAfter(t testing.TB, cmd *exec.Cmd, steps int, delay time.Duration) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan struct{}, 1<<10)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if sc.Text() == progressLine {
				done <- struct{}{}
			}
		}
		close(done)
	}()
	deadline := time.After(30 * time.Second)
	for range steps {
		select {
		case _, ok := <-done:
			if !ok {
				t.Fatal("helper ended before it was killed")
			}
		case <-deadline:
			cmd.Process.Kill()
			t.Fatal("helper made no progress in 30 s")
		}
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// KillAnywhere starts cmd and SIGKILLs it at a random point: after 0 to
// steps-1 completed steps (Progress) and a further delay of up to maxDelay,
// ten times that when no step is awaited, so that kills also land in the
// helper's start-up. It waits for cmd and fails the test unless SIGKILL
// ended it (a helper that failed or exited by itself), quoting cmd's
// stderr when it was captured in a buffer.
func KillAnywhere(t testing.TB, rng *rand.Rand, cmd *exec.Cmd, steps int, maxDelay time.Duration) {
	t.Helper()
	n := rng.IntN(steps)
	delay := time.Duration(rng.Int64N(int64(maxDelay)))
	if n == 0 {
		delay *= 10
	}
	KillAfter(t, cmd, n, delay)
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return
		}
	}
	var stderr string
	if s, ok := cmd.Stderr.(fmt.Stringer); ok {
		stderr = ": " + s.String()
	}
	t.Fatalf("helper ended with %v, want killed by SIGKILL%s", err, stderr)
}
