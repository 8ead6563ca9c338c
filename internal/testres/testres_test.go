package testres

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder stands in for a test so that Require's Fatalf and Skipf can be
// observed: both end the calling goroutine, as the real ones do.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// require runs Require on a recorder in its own goroutine (Goexit ends it).
func require(path string) (got string, r *recorder) {
	r = &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = Require(r, path, "thing", "fetch it")
	}()
	<-done
	return got, r
}

func TestRequireMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	t.Run("CI", func(t *testing.T) {
		t.Setenv("CI", "1")
		_, r := require(missing)
		if r.skip != "" || !strings.Contains(r.fatal, missing) || !strings.Contains(r.fatal, "fetch it") {
			t.Errorf("with CI set: fatal %q, skip %q; want a failure naming the path and the fix", r.fatal, r.skip)
		}
	})
	t.Run("local", func(t *testing.T) {
		t.Setenv("CI", "")
		_, r := require(missing)
		if r.fatal != "" || !strings.Contains(r.skip, missing) || !strings.Contains(r.skip, "fetch it") {
			t.Errorf("without CI: fatal %q, skip %q; want a skip naming the path and the fix", r.fatal, r.skip)
		}
	})
}

func TestRequirePresent(t *testing.T) {
	t.Setenv("CI", "1")
	p := filepath.Join(t.TempDir(), "here")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, r := require(p); got != p || r.fatal != "" || r.skip != "" {
		t.Errorf("Require(existing) = %q (fatal %q, skip %q), want %q", got, r.fatal, r.skip, p)
	}
}

func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "internal", "testres", "testres.go")); err != nil {
		t.Errorf("RepoRoot = %q, which does not hold this package: %v", root, err)
	}
}
