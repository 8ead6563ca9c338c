// Package fsfault gives tests file systems that misbehave the way users'
// disks do: a read-only directory and a small, fillable file system. It
// works as root too (where permission bits do not stop writes), and skips
// the test when the machine allows neither way.
package fsfault

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// ReadOnly makes the existing directory dir read-only for the rest of the
// test: files in it can be read, none can be created, renamed or removed.
// Without root it drops the write bits; as root (which ignores them) it
// bind-mounts dir read-only onto itself. Either is undone at cleanup.
func ReadOnly(t testing.TB, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, st.Mode().Perm()) })
	} else {
		if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil {
			t.Skipf("cannot bind-mount %s read-only here (%v: %s)", dir, err, out)
		}
		t.Cleanup(func() { exec.Command("umount", dir).Run() })
		if out, err := exec.Command("mount", "-o", "remount,bind,ro", dir).CombinedOutput(); err != nil {
			t.Skipf("cannot remount %s read-only here (%v: %s)", dir, err, out)
		}
	}
	probe := filepath.Join(dir, ".fsfault-probe")
	if err := os.WriteFile(probe, nil, 0o644); err == nil {
		os.Remove(probe)
		t.Skipf("%s is still writable after making it read-only", dir)
	}
}

// SmallFS mounts a file system of size bytes on a new temporary directory
// and returns it, unmounted at cleanup. It needs root (a tmpfs mount): the
// test is skipped otherwise.
func SmallFS(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root")
	}
	dir := t.TempDir()
	opt := "size=" + strconv.FormatInt(size, 10)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opt, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// Fill writes a file named name in dir until the file system is full and
// returns its path; removing it frees the space again.
func Fill(t testing.TB, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return path
		}
	}
}
