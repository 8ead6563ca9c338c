package safetensors

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"anechat/engine/model/mmap"
)

// TestParseTruncatedMapping: the file is truncated after it is mapped and
// before its header is parsed: Open fails with the typed error instead of
// dying of SIGBUS.
func TestParseTruncatedMapping(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("the file is read into memory: nothing faults")
	}
	p := filepath.Join(t.TempDir(), "x.safetensors")
	if err := os.WriteFile(p, sample(), 0o644); err != nil {
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

func TestClosedTensorData(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.safetensors")
	if err := os.WriteFile(p, sample(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	name := f.Tensors()[0].Name
	f.Close()
	if _, err := f.TensorData(name); err == nil {
		t.Fatal("TensorData of a closed file succeeded")
	}
}
