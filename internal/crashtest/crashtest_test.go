package crashtest

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

const helperEnv = "ANECHAT_CRASHTEST_HELPER"

// TestLoopHelper is the subprocess of TestKillAfter: it reports steps until
// it is killed.
func TestLoopHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process of TestKillAfter; runs only as its subprocess")
	}
	for {
		Progress()
		time.Sleep(time.Millisecond)
	}
}

func TestKillAfter(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("inside the helper")
	}
	cmd := Command(t, "TestLoopHelper", helperEnv+"=1")
	KillAfter(t, cmd, 3, time.Millisecond)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("helper ended with %v, want killed", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && (!ws.Signaled() || ws.Signal() != syscall.SIGKILL) {
		t.Errorf("helper status %v, want killed by SIGKILL", ws)
	}
}

// TestKillAnywhere: the helper is killed by SIGKILL at whatever point the
// random schedule picks, 5 times.
func TestKillAnywhere(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("inside the helper")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		KillAnywhere(t, rng, Command(t, "TestLoopHelper", helperEnv+"=1"), 3, time.Millisecond)
	}
}
