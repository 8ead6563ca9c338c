package testres

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// toolsOnly makes a PATH directory holding only the tools the fetch script
// needs to reuse a copy: no python, no pip, so any attempt to download fails.
func toolsOnly(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	for _, tool := range []string{"bash", "sha256sum", "cut", "ln", "cp", "mv", "mkdir", "rm", "dirname", "uname", "ls", "mktemp"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not found: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// TestFetchSmolLM2ReusesAVerifiedCopy: `make run DATA_DIR=...` (the fetch
// script with a data dir) and the tests' set-up (--file) take SmolLM2 from
// a verified copy already on this machine instead of downloading it again
// (the PATH here has no python, so a download would fail), and write
// nothing into HOME.
func TestFetchSmolLM2ReusesAVerifiedCopy(t *testing.T) {
	src := SmolLM2GGUF(t)
	want, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(RepoRoot(t), "build", "scripts", "fetch-smollm2.sh")
	home, bin := t.TempDir(), toolsOnly(t)
	run := func(args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "bash"), append([]string{script}, args...)...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + bin}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("fetch-smollm2.sh %v: %v\n%s", args, err, errb.String())
		}
		return strings.TrimSpace(out.String()), errb.String()
	}
	data := t.TempDir()
	got, msg := run(data)
	wantPath := filepath.Join(data, "models", filepath.Base(src))
	if got != wantPath || !strings.Contains(msg, "verified copy at ") {
		t.Fatalf("printed %q (stderr %q), want %s reused", got, msg, wantPath)
	}
	if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("the reused copy differs (%v)", err)
	}
	// Again: already there, nothing to do.
	if again, msg := run(data); again != wantPath || msg != "" {
		t.Fatalf("second run printed %q, %q", again, msg)
	}
	file := filepath.Join(t.TempDir(), "sub", "smol.gguf")
	if got, _ := run("--file", file); got != file {
		t.Fatalf("--file printed %q", got)
	}
	if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, want) {
		t.Fatalf("--file copy differs (%v)", err)
	}
	if w, err := Written(home); err != nil || len(w) != 0 {
		t.Fatalf("the script wrote into HOME: %v (%v)", w, err)
	}
}
