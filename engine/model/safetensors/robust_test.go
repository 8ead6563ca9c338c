package safetensors

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"anechat/engine/model/mmap"
)

func TestUnread(t *testing.T) {
	d, err := OpenDir(filepath.Join(fixture, "model"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	all := d.Unread()
	if len(all) != 98 || !slices.IsSortedFunc(all, func(a, b TensorInfo) int { return strings.Compare(a.Name, b.Name) }) {
		t.Fatalf("Unread of a fresh directory: %d tensors (sorted %v)", len(all), slices.IsSortedFunc(all, func(a, b TensorInfo) int { return strings.Compare(a.Name, b.Name) }))
	}
	d.TensorData("model.norm.weight")
	d.Float32s("model.layers.0.layer_scalar")
	left := d.Unread()
	if len(left) != 96 || slices.ContainsFunc(left, func(t TensorInfo) bool {
		return t.Name == "model.norm.weight" || t.Name == "model.layers.0.layer_scalar"
	}) {
		t.Fatalf("Unread after reading two tensors: %d left", len(left))
	}
	if ms := d.Mappings(); len(ms) != 1 || ms[0].Check() != nil {
		t.Fatalf("Mappings = %v", ms)
	}
}

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
