package gguf

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"anechat/engine/model/mmap"
)

func TestTokenID(t *testing.T) {
	w := NewWriter()
	for k, v := range map[string]any{"in": uint32(3), "i32": int32(2), "last": uint64(9), "none32": int32(-1),
		"noneU32": uint32(math.MaxUint32), "past": uint32(10), "neg": int32(-2), "bigU64": uint64(math.MaxUint32),
		"str": "1", "float": float32(1)} {
		w.Set(k, v)
	}
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("ids.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]int32{"in": 3, "i32": 2, "last": 9, "none32": -1, "noneU32": -1, "absent": -1} {
		if id, err := f.TokenID(key, 10); err != nil || id != want {
			t.Errorf("TokenID(%s) = %d, %v; want %d", key, id, err, want)
		}
	}
	// Out of range (a uint64 0xFFFFFFFF is not llama.cpp's uint32 "none"),
	// or not an integer: errors naming the file and key.
	for _, key := range []string{"past", "neg", "bigU64", "str", "float"} {
		if id, err := f.TokenID(key, 10); err == nil || id != -1 || !strings.Contains(err.Error(), "ids.gguf") ||
			!strings.Contains(err.Error(), `"`+key+`"`) {
			t.Errorf("TokenID(%s) = %d, %v; want an error naming ids.gguf and the key", key, id, err)
		}
	}
}

func TestUnread(t *testing.T) {
	data, err := sampleWriter().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("x.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	names := func() (out []string) {
		for _, ti := range f.Unread() {
			out = append(out, ti.Name)
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"a", "q", "h"}) {
		t.Fatalf("Unread of a fresh file = %v", got)
	}
	f.TensorData("q")
	f.TensorData("nope")
	if got := names(); !slices.Equal(got, []string{"a", "h"}) {
		t.Fatalf("Unread after reading q = %v", got)
	}
}

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
