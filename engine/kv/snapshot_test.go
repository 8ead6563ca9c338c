package kv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var testMeta = Meta{Model: "fp1:1185376:abc", Tokenizer: "tok:llama:512:def", Template: "raw"}

// filledCache returns a cache of geo with n committed positions of random
// rows, written in calls of random widths up to maxBatch, with a few
// rolled-back calls in between (they overwrite ring slots).
func filledCache(t testing.TB, geo Geometry, maxBatch, n int, seed uint64) (*Cache, []int32) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	c, err := New(geo, maxBatch)
	if err != nil {
		t.Fatal(err)
	}
	write := func(start, w int) {
		if err := c.Reserve(start, w); err != nil {
			t.Fatal(err)
		}
		for p := start; p < start+w; p++ {
			for l := range geo.Layers {
				if !c.Owns(l) {
					continue
				}
				for _, row := range [][]float32{c.K(l, p), c.V(l, p)} {
					for j := range row {
						row[j] = rng.Float32()*2 - 1
					}
				}
			}
		}
	}
	for c.Len() < n {
		w := min(1+rng.IntN(maxBatch), n-c.Len())
		if c.Len()+maxBatch <= geo.Context && rng.IntN(3) == 0 {
			write(c.Len(), maxBatch)
			c.Rollback()
		}
		write(c.Len(), w)
		if err := c.Commit(w); err != nil {
			t.Fatal(err)
		}
	}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(512))
	}
	return c, ids
}

// sameLive checks that b holds exactly a's live rows, bit for bit.
func sameLive(t *testing.T, a, b *Cache) {
	t.Helper()
	if a.Len() != b.Len() {
		t.Fatalf("Len %d and %d", a.Len(), b.Len())
	}
	for l := range a.Geometry().Layers {
		lo, hi := a.Live(l)
		if blo, bhi := b.Live(l); blo != lo || bhi != hi {
			t.Fatalf("layer %d: Live %d..%d and %d..%d", l, lo, hi, blo, bhi)
		}
		for p := lo; p < hi; p++ {
			if !bytes.Equal(floatBytes(a.K(l, p)), floatBytes(b.K(l, p))) || !bytes.Equal(floatBytes(a.V(l, p)), floatBytes(b.V(l, p))) {
				t.Fatalf("layer %d row %d differs", l, p)
			}
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	geo := testGeometry(400)
	dir := t.TempDir()
	for _, n := range []int{0, 1, 3, 5, 6, 64, 150, 400} {
		src, ids := filledCache(t, geo, 4, n, uint64(n))
		path, err := Write(context.Background(), dir, testMeta, ids, src)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(path) != dir || !strings.HasSuffix(path, ".kv") || len(filepath.Base(path)) != 35 {
			t.Errorf("snapshot path %s: want dir/<32 hex>.kv", path)
		}
		dst, err := New(geo, 7)
		if err != nil {
			t.Fatal(err)
		}
		h, err := Load(context.Background(), path, testMeta, dst)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if h.Meta != testMeta || !slices.Equal(h.Tokens, ids) || h.Geometry.Context != geo.Context {
			t.Errorf("n=%d: header %+v", n, h)
		}
		if filepath.Base(path) != h.Name() {
			t.Errorf("file %s, header name %s", path, h.Name())
		}
		sameLive(t, src, dst)
		st, _ := os.Stat(path)
		if st.Size() != h.FileSize() {
			t.Errorf("file size %d, header says %d", st.Size(), h.FileSize())
		}
		for i, s := range h.Sections {
			if s.Rows > 0 && s.Offset%SectionAlign != 0 {
				t.Errorf("layer %d section at %d, not aligned", i, s.Offset)
			}
			if !src.Owns(i) && s.Rows != 0 {
				t.Errorf("shared layer %d stores %d rows", i, s.Rows)
			}
			if w := geo.Layers[i].Window; w > 0 && s.Rows > w {
				t.Errorf("sliding layer %d stores %d rows, window %d", i, s.Rows, w)
			}
		}
		// Writing the same state again names the same file, which Create
		// reports it did not create.
		again, created, err := Create(context.Background(), dir, testMeta, ids, src)
		if err != nil || again != path || created {
			t.Errorf("rewrite: %s, created %v, %v; first %s", again, created, err, path)
		}
		os.Remove(path)
		if again, created, err := Create(context.Background(), dir, testMeta, ids, src); err != nil || again != path || !created {
			t.Errorf("write after removing the file: %s, created %v, %v", again, created, err)
		}
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left", e.Name())
		}
	}
}

// TestSnapshotContinue checks that a restored cache continues like the
// original: a rolled-back and a committed call on each, then the same rows
// visible everywhere, and the same Truncate outcomes.
func TestSnapshotContinue(t *testing.T) {
	geo := testGeometry(300)
	src, ids := filledCache(t, geo, 4, 97, 3)
	path, err := Write(context.Background(), t.TempDir(), testMeta, ids, src)
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := New(geo, 4)
	if _, err := Load(context.Background(), path, testMeta, dst); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Cache{src, dst} {
		for _, commit := range []int{0, 3} {
			if err := c.Reserve(c.Len(), 4); err != nil {
				t.Fatal(err)
			}
			for p := c.Len(); p < c.Len()+4; p++ {
				for l := range geo.Layers {
					if c.Owns(l) {
						fill(c.K(l, p), rowValue(l, p, commit))
						fill(c.V(l, p), -rowValue(l, p, commit))
					}
				}
			}
			if err := c.Commit(commit); err != nil {
				t.Fatal(err)
			}
		}
	}
	sameLive(t, src, dst)
	for _, n := range []int{99, 98, 97, 95} {
		e1, e2 := src.Truncate(n), dst.Truncate(n)
		if (e1 == nil) != (e2 == nil) {
			t.Errorf("Truncate(%d): original %v, restored %v", n, e1, e2)
		}
	}
}

func writeTestSnapshot(t *testing.T, n int) (string, []byte, *Header, Geometry) {
	t.Helper()
	geo := testGeometry(200)
	src, ids := filledCache(t, geo, 4, n, 11)
	path, err := Write(context.Background(), t.TempDir(), testMeta, ids, src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	return path, b, h, geo
}

// loadFails writes b to a file, loads it into a cache that held rows before,
// and checks that the load fails with target and leaves the cache empty.
func loadFails(t *testing.T, what string, b []byte, meta Meta, geo Geometry, target error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.kv")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := filledCache(t, geo, 4, 10, 1)
	_, err := Load(context.Background(), path, meta, c)
	if err == nil {
		t.Fatalf("%s: loaded", what)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("%s: %v, want %v", what, err, target)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("%s: error %q does not name the file", what, err)
	}
	if c.Len() != 0 || c.Pending() != 0 {
		t.Errorf("%s: failed load left Len %d", what, c.Len())
	}
}

func TestSnapshotTruncated(t *testing.T) {
	_, b, h, geo := writeTestSnapshot(t, 150)
	cuts := []int{0, 1, 8, 15, 16, h.Size - 1, h.Size, h.Size + 1, int(h.Sections[0].Offset), int(h.Sections[0].Offset) + 5, len(b) - 4, len(b) - 1}
	for _, s := range h.Sections {
		if s.Rows > 0 {
			cuts = append(cuts, int(s.Offset+s.Size/2))
		}
	}
	for _, n := range cuts {
		loadFails(t, "truncated", b[:n], testMeta, geo, ErrCorrupt)
	}
	loadFails(t, "appended", append(bytes.Clone(b), 0), testMeta, geo, ErrCorrupt)
}

// TestSnapshotBitFlips flips one bit in every header byte, a random bit in
// every section, in the padding, and at random places: every flip must be
// caught.
func TestSnapshotBitFlips(t *testing.T) {
	_, b, h, geo := writeTestSnapshot(t, 150)
	rng := rand.New(rand.NewPCG(5, 5))
	var at []int
	for i := 0; i < h.Size; i++ {
		at = append(at, i)
	}
	for _, s := range h.Sections {
		if s.Rows > 0 {
			at = append(at, int(s.Offset), int(s.Offset+s.Size-1), int(s.Offset)+rng.IntN(int(s.Size)))
			at = append(at, int(s.Offset)-1) // padding before it
		}
	}
	for range 50 {
		at = append(at, rng.IntN(len(b)))
	}
	for _, i := range at {
		bad := bytes.Clone(b)
		bad[i] ^= 1 << rng.IntN(8)
		loadFails(t, "bit flip", bad, testMeta, geo, nil)
	}
}

func TestSnapshotMismatch(t *testing.T) {
	_, b, _, geo := writeTestSnapshot(t, 40)
	for name, m := range map[string]Meta{
		"model":     {Model: "fp1:other", Tokenizer: testMeta.Tokenizer, Template: testMeta.Template},
		"tokenizer": {Model: testMeta.Model, Tokenizer: "tok:other", Template: testMeta.Template},
		"template":  {Model: testMeta.Model, Tokenizer: testMeta.Tokenizer, Template: "gemma4:xyz"},
	} {
		loadFails(t, name, b, m, geo, ErrMismatch)
	}
	other := testGeometry(201)
	loadFails(t, "context", b, testMeta, other, ErrMismatch)
	other = testGeometry(200)
	other.Layers[2].Window = 4
	loadFails(t, "window", b, testMeta, other, ErrMismatch)
}

func TestSnapshotVersion(t *testing.T) {
	_, b, h, geo := writeTestSnapshot(t, 40)
	bad := bytes.Clone(b)
	binary.LittleEndian.PutUint32(bad[8:], FormatVersion+1)
	binary.LittleEndian.PutUint32(bad[h.Size-4:], crc32.Checksum(bad[:h.Size-4], castagnoli))
	loadFails(t, "version", bad, testMeta, geo, ErrVersion)
}

func TestSnapshotMissing(t *testing.T) {
	c, _ := New(testGeometry(10), 2)
	_, err := Load(context.Background(), filepath.Join(t.TempDir(), "gone.kv"), testMeta, c)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadHeader(filepath.Join(t.TempDir(), "gone.kv")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadHeader of a missing file: %v", err)
	}
}

func TestSnapshotCancelled(t *testing.T) {
	path, _, _, geo := writeTestSnapshot(t, 40)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, _ := New(geo, 4)
	if _, err := Load(ctx, path, testMeta, c); !errors.Is(err, context.Canceled) || c.Len() != 0 {
		t.Errorf("cancelled load: %v, Len %d", err, c.Len())
	}
	src, ids := filledCache(t, geo, 4, 20, 2)
	dir := t.TempDir()
	if _, err := Write(ctx, dir, testMeta, ids, src); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled write: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("cancelled write left %d files", len(ents))
	}
}

func TestWriteErrors(t *testing.T) {
	src, ids := filledCache(t, testGeometry(50), 4, 10, 2)
	if _, err := Write(context.Background(), t.TempDir(), testMeta, ids[:9], src); err == nil {
		t.Error("snapshot with fewer ids than positions written")
	}
	ids[3] = -1
	if _, err := Write(context.Background(), t.TempDir(), testMeta, ids, src); err == nil {
		t.Error("snapshot with a negative id written")
	}
}

func TestReadHeader(t *testing.T) {
	path, _, h, _ := writeTestSnapshot(t, 70)
	got, err := ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name() != h.Name() || !slices.Equal(got.Tokens, h.Tokens) {
		t.Errorf("ReadHeader differs from ParseHeader")
	}
}

// FuzzParseHeader checks that no input makes the header parser panic or
// allocate without bound, and that whatever it accepts re-encodes to the
// same bytes (the parser accepts exactly what the writer produces).
func FuzzParseHeader(f *testing.F) {
	for _, n := range []int{0, 1, 9} {
		c, ids := filledCache(f, testGeometry(20), 3, n, uint64(n))
		h := &Header{Meta: testMeta, Geometry: c.Geometry(), Tokens: ids}
		h.Size = headerSize(testMeta, len(h.Geometry.Layers), n)
		h.Sections = layout(h.Geometry, n, h.Size)
		f.Add(h.encode())
	}
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		// Make the checksum right half the time, so that the fuzzer gets
		// past it into the fields.
		if len(b) > 16 && b[len(b)-1]&1 == 0 {
			if size := int(binary.LittleEndian.Uint32(b[12:])); size >= 8 && size <= len(b) {
				binary.LittleEndian.PutUint32(b[size-4:], crc32.Checksum(b[:size-4], castagnoli))
			}
		}
		h, err := ParseHeader(b)
		if err != nil {
			if h != nil {
				t.Fatal("header returned with an error")
			}
			return
		}
		if enc := h.encode(); !bytes.Equal(enc, b[:h.Size]) {
			t.Fatalf("accepted header re-encodes differently")
		}
		if h.FileSize() < int64(h.Size) {
			t.Fatalf("file size %d below header size %d", h.FileSize(), h.Size)
		}
	})
}
