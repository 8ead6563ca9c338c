package mmap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
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
			data, release, err := Map(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, content) || data == nil {
				t.Errorf("Map(%s) = %d bytes (nil %v), want %d bytes", name, len(data), data == nil, len(content))
			}
			if err := release(); err != nil {
				t.Errorf("release: %v", err)
			}
		})
	}
}

func TestMapErrors(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "absent"), dir} {
		if data, release, err := Map(p); err == nil {
			release()
			t.Errorf("Map(%s) = %d bytes, nil error; want an error", p, len(data))
		}
	}
}
