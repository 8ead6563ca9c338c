package mmap

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/internal/testres"
)

// TestOpenRefusesNonRegular: a named pipe where a model belongs is refused
// at once, naming it, by Open, ReadFile and Map (a plain open of it blocks
// until a writer comes: forever); so are a directory and a device.
func TestOpenRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "evil.gguf")
	testres.Mkfifo(t, fifo)
	cases := map[string]struct{ path, kind string }{
		"named pipe": {fifo, "a named pipe"},
		"directory":  {dir, "a directory"},
	}
	if _, err := os.Stat(os.DevNull); err == nil && os.DevNull == "/dev/null" {
		cases["device"] = struct{ path, kind string }{os.DevNull, "a character device"}
	}
	for name, c := range cases {
		for fn, call := range map[string]func() error{
			"Open":     func() error { f, err := Open(c.path); closeIf(f); return err },
			"Stat":     func() error { _, err := Stat(c.path); return err },
			"ReadFile": func() error { _, err := ReadFile(c.path, 1<<20); return err },
			"Map": func() error {
				m, err := Map(c.path)
				if err == nil {
					m.Close()
				}
				return err
			},
		} {
			t.Run(name+"/"+fn, func(t *testing.T) {
				err := testres.Promptly(t, fn+" of "+name, call)
				var nr *NotRegularError
				if !errors.As(err, &nr) || !errors.Is(err, ErrNotRegular) {
					t.Fatalf("%s(%s) = %v, want a *NotRegularError", fn, c.path, err)
				}
				want := c.path + " is not a regular file (" + c.kind + "): models must be regular files"
				if err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
			})
		}
	}
}

func closeIf(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// TestReadFile: a regular file (or a symbolic link to one) reads whole; one
// over the limit is refused, naming it and the limit.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	want := bytes.Repeat([]byte("{}"), 50)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, link} {
		if got, err := ReadFile(path, 100); err != nil || !bytes.Equal(got, want) {
			t.Errorf("ReadFile(%s, 100) = %d bytes, %v; want the 100 bytes", path, len(got), err)
		}
	}
	_, err := ReadFile(p, 99)
	if err == nil || !strings.Contains(err.Error(), p+" is 100 bytes, more than the 99") {
		t.Errorf("ReadFile over the limit: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "absent"), 100); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v", err)
	}
}

// TestSHA256: the sum of a file of several blocks, with progress adding up
// to its size; a named pipe refused at once; a cancelled context stops it.
func TestSHA256(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "weights.bin")
	data := bytes.Repeat([]byte("anechat!"), (2*sumBlock+100)/8)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	var seen int64
	got, err := SHA256(context.Background(), p, func(n int64) { seen += n })
	if err != nil || got != hex.EncodeToString(want[:]) || seen != int64(len(data)) {
		t.Errorf("SHA256 = %s, %v (progress %d of %d bytes); want %x", got, err, seen, len(data), want)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	if got, err := SHA256(context.Background(), empty, nil); err != nil || got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("SHA256 of an empty file = %s, %v", got, err)
	}
	fifo := filepath.Join(dir, "pipe.bin")
	testres.Mkfifo(t, fifo)
	err = testres.Promptly(t, "SHA256 of a named pipe", func() error { _, err := SHA256(context.Background(), fifo, nil); return err })
	if !errors.Is(err, ErrNotRegular) {
		t.Errorf("SHA256 of a named pipe: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SHA256(ctx, p, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("SHA256 with a cancelled context: %v", err)
	}
}
