package gguf

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"anechat/engine/model/mmap"
)

// TestParseTruncatedMapping: the file is truncated after it is mapped and
// before (or while) its header is parsed. Open fails with the typed error
// instead of dying of SIGBUS.
func TestParseTruncatedMapping(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("the file is read into memory: nothing faults")
	}
	data, err := sampleWriter().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "x.gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := mmap.Map(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	_, err = parseMapped(m)
	var ce *mmap.ChangedError
	if !errors.As(err, &ce) || ce.Path != p {
		t.Fatalf("parse of a truncated mapping: %v; want a *mmap.ChangedError for %s", err, p)
	}
}
