package mmap

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMap(t *testing.T) {
	dir := t.TempDir()
	want := bytes.Repeat([]byte("weights\x00\xff"), 1000)
	for name, content := range map[string][]byte{"full": want, "empty": nil} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, content, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := Map(p)
			if err != nil {
				t.Fatal(err)
			}
			if data := m.Data(); !bytes.Equal(data, content) || data == nil || m.Path() != p {
				t.Errorf("Map(%s) = %d bytes (nil %v) at %q, want %d bytes", name, len(data), data == nil, m.Path(), len(content))
			}
			if err := m.Check(); err != nil {
				t.Errorf("Check of an unchanged file: %v", err)
			}
			if err := m.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if err := m.Close(); err != nil || m.Data() != nil {
				t.Errorf("second close: %v, %d bytes left", err, len(m.Data()))
			}
		})
	}
}

func TestMapErrors(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "absent"), dir} {
		if m, err := Map(p); err == nil {
			m.Close()
			t.Errorf("Map(%s) = %d bytes, nil error; want an error", p, len(m.Data()))
		}
	}
}

// mapped writes size bytes to a new file and maps it.
func mapped(t *testing.T, size int) (string, *Mapping) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(p, bytes.Repeat([]byte{7}, size), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Map(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return p, m
}

func TestCheck(t *testing.T) {
	const size = 3 * 65536
	cases := []struct {
		name, reason string
		change       func(t *testing.T, p string)
	}{
		{"truncated", "size changed from 196608 to 4096 bytes", func(t *testing.T, p string) {
			if err := os.Truncate(p, 4096); err != nil {
				t.Fatal(err)
			}
		}},
		{"rewritten in place", "was modified at", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte{1, 2, 3}, 100)
			f.Close()
			// The same size: only the time tells. Make it differ even on a
			// file system with a coarse clock.
			later := time.Now().Add(2 * time.Second)
			if err := os.Chtimes(p, later, later); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced", "another file was put in its place", func(t *testing.T, p string) {
			tmp := p + ".part"
			if err := os.WriteFile(tmp, bytes.Repeat([]byte{7}, size), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, p); err != nil {
				t.Fatal(err)
			}
		}},
		{"removed", "can no longer be read", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, m := mapped(t, size)
			c.change(t, p)
			err := m.Check()
			var ce *ChangedError
			if !errors.As(err, &ce) || !errors.Is(err, ErrChanged) || ce.Path != p || !strings.Contains(err.Error(), c.reason) ||
				!strings.Contains(err.Error(), "reload the model") {
				t.Fatalf("Check = %v; want a *ChangedError naming %s, saying %q and to reload", err, p, c.reason)
			}
		})
	}
}

// readAll sums every byte of data (touching each page).
func readAll(data []byte) (sum int) {
	for i := 0; i < len(data); i += 512 {
		sum += int(data[i])
	}
	return sum
}

func guardedRead(data []byte, maps ...*Mapping) (sum int, err error) {
	defer Guard(&err, maps...)()
	return readAll(data), nil
}

func TestGuardTruncated(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("the file is read into memory: nothing faults")
	}
	p, m := mapped(t, 4*65536)
	if sum, err := guardedRead(m.Data(), m); err != nil || sum != 7*4*65536/512 {
		t.Fatalf("read of the intact file = %d, %v", sum, err)
	}
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	_, err := guardedRead(m.Data(), m)
	var ce *ChangedError
	if !errors.As(err, &ce) || ce.Path != p || !strings.Contains(err.Error(), "size changed") {
		t.Fatalf("read of a truncated mapping: %v; want a *ChangedError for %s", err, p)
	}
	// The goroutine's setting is restored, and the process goes on.
	if _, err := guardedRead(make([]byte, 4096), m); err != nil {
		t.Fatal(err)
	}
}

func TestGuardOtherPanics(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("the file is read into memory: nothing faults")
	}
	// A fault on a mapping the guard does not cover, and a plain panic,
	// both go on as panics: neither is a changed model file.
	p, other := mapped(t, 4*65536)
	_, mine := mapped(t, 4096)
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	for name, fn := range map[string]func() (int, error){
		"fault elsewhere": func() (int, error) { return guardedRead(other.Data(), mine) },
		"plain panic": func() (sum int, err error) {
			defer Guard(&err, mine)()
			panic("a bug")
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil {
					t.Error("no panic")
				} else if Fault(r, mine) != nil {
					t.Errorf("Fault(%v) blames the guarded file", r)
				}
			}()
			_, err := fn()
			t.Errorf("returned %v instead of panicking", err)
		})
	}
}
