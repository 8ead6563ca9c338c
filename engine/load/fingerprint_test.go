package load

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/internal/testres"
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
	fp, err := Fingerprint(dir, a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(fp, FingerprintVersion+":12582912:") {
		t.Errorf("fingerprint %q does not name the version and size", fp)
	}
	again, _ := Fingerprint(dir, a)
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
		got, err := Fingerprint(filepath.Dir(p), p)
		if err != nil {
			t.Fatal(err)
		}
		if got == fp {
			t.Errorf("%s change not seen by the fingerprint", name)
		}
	}
	b := filepath.Join(dir, "b.gguf")
	writeFile(t, b, big)
	if got, _ := Fingerprint(dir, b); got == fp {
		t.Error("file name not part of the fingerprint")
	}
	// Small files are hashed whole; order of arguments does not matter.
	s := filepath.Join(dir, "config.json")
	writeFile(t, s, small)
	x, _ := Fingerprint(dir, a, s)
	y, _ := Fingerprint(dir, s, a)
	if x != y || x == fp {
		t.Errorf("multi-file fingerprints %s %s (single %s)", x, y, fp)
	}
	writeFile(t, s, []byte("tiny weightz"))
	if z, _ := Fingerprint(dir, a, s); z == x {
		t.Error("change in a small file not seen")
	}
	if _, err := Fingerprint(dir, filepath.Join(dir, "missing")); err == nil {
		t.Error("fingerprint of a missing file")
	}
	if _, err := Fingerprint(dir); err == nil {
		t.Error("fingerprint of no files")
	}
}

// TestFingerprintNested: a Core ML bundle holds files of the same name in
// different chunks; each is hashed under its path relative to the bundle, so
// the order is fixed and moving a file between chunks changes the identity.
func TestFingerprintNested(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/weight.bin", "b/weight.bin"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		writeFile(t, filepath.Join(dir, p), []byte(p))
	}
	a, b := filepath.Join(dir, "a/weight.bin"), filepath.Join(dir, "b/weight.bin")
	x, err := Fingerprint(dir, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if y, _ := Fingerprint(dir, b, a); y != x {
		t.Errorf("order of arguments changed the fingerprint: %s, %s", x, y)
	}
	writeFile(t, a, []byte("b/weight.bin"))
	writeFile(t, b, []byte("a/weight.bin"))
	if z, _ := Fingerprint(dir, a, b); z == x {
		t.Error("swapping two chunks' files kept the fingerprint")
	}
	if _, err := Fingerprint(filepath.Join(dir, "a"), b); err == nil {
		t.Error("a file outside the root was fingerprinted")
	}
}

// TestFingerprintStable: the identities of the real test models are those
// the previous scheme (base names, flat files) gave, so the KV snapshots
// and cost tables already stored in users' data directories stay valid.
func TestFingerprintStable(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{testres.Stories(t), "fp1:1185376:e389ecdb802e55e8619fbb28f7c642bd"},
		{filepath.Join(testres.RepoRoot(t), "engine/cpu/testdata/gemma4/model"), "fp1:1413205:9df2c2db359f5c95f6652316498c09b1"},
	} {
		src, err := Detect(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if src.Fingerprint != c.want {
			t.Errorf("%s: fingerprint %s, want %s", c.path, src.Fingerprint, c.want)
		}
	}
}
