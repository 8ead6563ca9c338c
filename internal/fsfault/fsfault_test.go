package fsfault

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("ro", func(t *testing.T) {
		ReadOnly(t, dir)
		if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "x" {
			t.Errorf("reading in a read-only dir: %q, %v", b, err)
		}
		if err := os.Remove(filepath.Join(dir, "f")); err == nil {
			t.Error("removed a file from a read-only dir")
		}
	})
	// The cleanup made it writable again.
	if err := os.WriteFile(filepath.Join(dir, "g"), nil, 0o644); err != nil {
		t.Errorf("after the subtest: %v", err)
	}
}

func TestSmallFSFill(t *testing.T) {
	dir := SmallFS(t, 256<<10)
	filler := Fill(t, dir, "filler")
	if err := os.WriteFile(filepath.Join(dir, "more"), make([]byte, 8192), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing to a full file system: %v, want ENOSPC", err)
	}
	os.Remove(filler)
	if err := os.WriteFile(filepath.Join(dir, "more"), make([]byte, 8192), 0o644); err != nil {
		t.Errorf("after freeing: %v", err)
	}
}
