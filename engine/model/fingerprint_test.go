package model

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFingerprintFiles(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 12<<20) // larger than head + samples + tail: sampled
	for i := 0; i < len(big); i += 8 {
		binary.LittleEndian.PutUint64(big[i:], rng.Uint64())
	}
	small := []byte("tiny weights")
	a := filepath.Join(dir, "a.gguf")
	writeFile(t, a, big)
	fp, err := FingerprintFiles(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(fp, FingerprintVersion+":12582912:") {
		t.Errorf("fingerprint %q does not name the version and size", fp)
	}
	again, _ := FingerprintFiles(a)
	if again != fp {
		t.Errorf("fingerprint not stable: %s, %s", fp, again)
	}
	// Changes it must see: the header, a sampled byte, the tail, the size,
	// the name.
	for name, change := range map[string]func([]byte) []byte{
		"header": func(b []byte) []byte { b[100] ^= 1; return b },
		"head":   func(b []byte) []byte { b[4<<20-1] ^= 1; return b },
		"sample": func(b []byte) []byte { b[4<<20+10] ^= 1; return b },
		"tail":   func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"size":   func(b []byte) []byte { return append(b, 0) },
	} {
		b := change(append([]byte(nil), big...))
		p := filepath.Join(t.TempDir(), "a.gguf")
		writeFile(t, p, b)
		got, err := FingerprintFiles(p)
		if err != nil {
			t.Fatal(err)
		}
		if got == fp {
			t.Errorf("%s change not seen by the fingerprint", name)
		}
	}
	b := filepath.Join(dir, "b.gguf")
	writeFile(t, b, big)
	if got, _ := FingerprintFiles(b); got == fp {
		t.Error("file name not part of the fingerprint")
	}
	// Small files are hashed whole; order of arguments does not matter.
	s := filepath.Join(dir, "config.json")
	writeFile(t, s, small)
	x, _ := FingerprintFiles(a, s)
	y, _ := FingerprintFiles(s, a)
	if x != y || x == fp {
		t.Errorf("multi-file fingerprints %s %s (single %s)", x, y, fp)
	}
	writeFile(t, s, []byte("tiny weightz"))
	if z, _ := FingerprintFiles(a, s); z == x {
		t.Error("change in a small file not seen")
	}
	if _, err := FingerprintFiles(filepath.Join(dir, "missing")); err == nil {
		t.Error("fingerprint of a missing file")
	}
	if _, err := FingerprintFiles(); err == nil {
		t.Error("fingerprint of no files")
	}
}

func TestFingerprintDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.json"), []byte(`{"a":1}`))
	writeFile(t, filepath.Join(dir, "model.safetensors"), []byte("weights"))
	writeFile(t, filepath.Join(dir, "README.md"), []byte("ignored"))
	fp, err := FingerprintDir(dir, ".json", ".safetensors")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := FingerprintFiles(filepath.Join(dir, "config.json"), filepath.Join(dir, "model.safetensors"))
	if fp != want {
		t.Errorf("dir fingerprint %s, files %s", fp, want)
	}
	writeFile(t, filepath.Join(dir, "README.md"), []byte("changed"))
	if again, _ := FingerprintDir(dir, ".json", ".safetensors"); again != fp {
		t.Error("an ignored file changed the fingerprint")
	}
	if _, err := FingerprintDir(dir, ".bin"); err == nil {
		t.Error("fingerprint of a dir without matching files")
	}
}
