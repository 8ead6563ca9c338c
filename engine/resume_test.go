package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/internal/testres"
)

// memStore is a SnapshotStore over a map, matching prefixes by block hashes
// the way the storage index does.
type memStore struct {
	dir  string
	recs map[string]memRec // by path
	// forgotten lists the paths Forget was called with.
	forgotten []string
}

type memRec struct {
	key    string
	meta   kv.Meta
	blocks []string
	tokens int
}

func newMemStore(dir string) *memStore { return &memStore{dir: dir, recs: map[string]memRec{}} }

func (m *memStore) Dir() string { return m.dir }

func (m *memStore) LongestPrefix(_ context.Context, meta kv.Meta, ids []int32) (StoredSnapshot, bool, error) {
	want := kv.BlockHashes(meta, ids)
	best, bestPath := 0, ""
	for path, r := range m.recs {
		if r.meta != meta {
			continue
		}
		n := 0
		for n < len(want) && n < len(r.blocks) && want[n] == r.blocks[n] {
			n++
		}
		if n > best {
			best, bestPath = n, path
		}
	}
	if best == 0 {
		return StoredSnapshot{}, false, nil
	}
	// As kvindex does: a snapshot saved under no key is nobody's (SaveRun
	// may drop it).
	return StoredSnapshot{Path: bestPath, Tokens: m.recs[bestPath].tokens, Unowned: m.recs[bestPath].key == ""}, true, nil
}

func (m *memStore) Replace(_ context.Context, key string, meta kv.Meta, ids []int32, s StoredSnapshot) ([]string, error) {
	var orphans []string
	for path, r := range m.recs {
		if key != "" && r.key == key && path != s.Path {
			delete(m.recs, path)
			orphans = append(orphans, path)
		}
	}
	m.recs[s.Path] = memRec{key: key, meta: meta, blocks: kv.BlockHashes(meta, ids), tokens: len(ids)}
	return orphans, nil
}

func (m *memStore) Forget(_ context.Context, path string) error {
	delete(m.recs, path)
	m.forgotten = append(m.forgotten, path)
	return nil
}

// gemma4Fixture opens the tiny random-weight Gemma 4 fixture committed under
// engine/cpu/testdata: sliding window 8 on 4 of its 6 layers, the last 3
// layers KV-shared, context 256.
func gemma4Fixture(t testing.TB) model.Backend {
	t.Helper()
	m, err := cpu.LoadGemma4(filepath.Join("cpu", "testdata", "gemma4", "model"), cpu.NewPool(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func storiesModel(t testing.TB) *cpu.Llama {
	t.Helper()
	m, err := cpu.OpenLlama(testres.Stories(t), cpu.NewPool(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// run prefills ids[from:] on c in calls of up to 64 tokens, then decodes
// greedily; it returns the generated ids and the bits of every logits row
// from the prompt's last one on.
func run(t *testing.T, b model.Backend, c *kv.Cache, ids []int32, from, steps int) ([]int32, []byte) {
	t.Helper()
	ctx := context.Background()
	var last []float32
	for p := from; p < len(ids); {
		n := min(64, len(ids)-p)
		r, err := b.Forward(ctx, ids[p:p+n], p, c, model.Logits)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(n); err != nil {
			t.Fatal(err)
		}
		last = r.Logits[n-1]
		p += n
	}
	var gen []int32
	var bits []byte
	for range steps {
		next := cpu.Argmax(last)
		for _, x := range last {
			bits = append(bits, byte(math.Float32bits(x)), byte(math.Float32bits(x)>>8), byte(math.Float32bits(x)>>16), byte(math.Float32bits(x)>>24))
		}
		gen = append(gen, next)
		r, err := b.Forward(ctx, []int32{next}, c.Len(), c, model.Logits)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(1); err != nil {
			t.Fatal(err)
		}
		last = r.Logits[0]
	}
	return gen, bits
}

func testPrompt(n, salt int) []int32 {
	ids := make([]int32, n)
	ids[0] = 1
	for i := 1; i < n; i++ {
		ids[i] = int32(3 + (i*31+i*i*7+salt)%500)
	}
	return ids
}

func slidingGeometry(g kv.Geometry) kv.Geometry {
	g.Layers = append([]kv.LayerSpec(nil), g.Layers...)
	g.Layers[0].Window = 100
	g.Layers[2].Window = 40
	return g
}

// TestResumeExact checks that generation after Restore + batched prefill of
// the remainder is bit-identical to a fresh prefill, for full-prefix,
// whole-prompt and partial-prefix matches, with full attention and with
// sliding windows, and reports how many positions were restored.
func TestResumeExact(t *testing.T) {
	stories := storiesModel(t)
	gemma := gemma4Fixture(t)
	prompt := testPrompt(230, 0)
	other := append(append([]int32(nil), prompt[:150]...), testPrompt(90, 5)[1:]...) // shares 150 tokens
	m := stories
	for _, tc := range []struct {
		name     string
		geo      kv.Geometry
		stored   []int32
		restored int // positions Restore must give
		b        model.Backend
	}{
		{"full prefix", m.Config().KV, prompt[:192], 192, nil},
		{"whole prompt", m.Config().KV, prompt, 229, nil},
		{"partial prefix", m.Config().KV, other, 150, nil},
		{"longer stored", m.Config().KV, append(append([]int32(nil), prompt...), 5, 6, 7), 229, nil},
		{"sliding full prefix", slidingGeometry(m.Config().KV), prompt[:200], 200, nil},
		{"sliding whole prompt", slidingGeometry(m.Config().KV), prompt, 229, nil},
		{"sliding partial", slidingGeometry(m.Config().KV), other, 0, nil}, // rows before the end of a window are gone: fresh
		// Gemma 4: window 8 (the prompt crosses it many times), KV-shared
		// layers (stored nothing, read their source's restored rows).
		{"gemma4 full prefix", gemma.Config().KV, prompt[:192], 192, gemma},
		{"gemma4 whole prompt", gemma.Config().KV, prompt, 229, gemma},
		{"gemma4 partial", gemma.Config().KV, other, 0, gemma},
		{"gemma4 longer stored", gemma.Config().KV, append(append([]int32(nil), prompt...), 5, 6, 7), 0, gemma},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m model.Backend = stories
			if tc.b != nil {
				m = tc.b
			}
			meta := kv.Meta{Model: m.Config().Fingerprint, Tokenizer: "tok", Template: ""}
			fresh, _ := kv.New(tc.geo, 64)
			wantIDs, wantBits := run(t, m, fresh, prompt, 0, 12)

			store := newMemStore(t.TempDir())
			var logBuf bytes.Buffer
			r := &Resumer{Store: store, Meta: meta, Log: slog.New(slog.NewTextHandler(&logBuf, nil))}
			src, _ := kv.New(tc.geo, 64)
			run(t, m, src, tc.stored, 0, 0)
			if _, err := r.Save(context.Background(), "conv", tc.stored, src); err != nil {
				t.Fatal(err)
			}
			c, _ := kv.New(tc.geo, 64)
			n := r.Restore(context.Background(), prompt, c)
			if n != tc.restored || c.Len() != n {
				t.Fatalf("restored %d positions (cache %d), want %d; log: %s", n, c.Len(), tc.restored, logBuf.String())
			}
			gotIDs, gotBits := run(t, m, c, prompt, n, 12)
			if !slices.Equal(gotIDs, wantIDs) || !bytes.Equal(gotBits, wantBits) {
				t.Fatalf("resumed generation differs from a fresh one:\n got %v\nwant %v", gotIDs, wantIDs)
			}
			if tc.restored == 0 && !strings.Contains(logBuf.String(), "prefilling normally") {
				t.Errorf("fallback not logged: %q", logBuf.String())
			}
		})
	}
}

// TestResumeFailClosed: a damaged file, a missing file, a snapshot of another
// model or tokenizer behind a (wrong) index record: Restore gives 0, logs
// why, forgets the record, and a fresh prefill follows.
func TestResumeFailClosed(t *testing.T) {
	m := storiesModel(t)
	meta := kv.Meta{Model: m.Config().Fingerprint, Tokenizer: "stories-tok"}
	prompt := testPrompt(130, 1)
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string, s *memStore)
		reason string
	}{
		{"flipped bit", func(t *testing.T, path string, _ *memStore) {
			b, _ := os.ReadFile(path)
			b[len(b)-100] ^= 4
			os.WriteFile(path, b, 0o644)
		}, "checksum"},
		{"truncated", func(t *testing.T, path string, _ *memStore) {
			b, _ := os.ReadFile(path)
			os.WriteFile(path, b[:len(b)/2], 0o644)
		}, "damaged"},
		{"missing file", func(t *testing.T, path string, _ *memStore) { os.Remove(path) }, "no such file"},
		{"other model", func(t *testing.T, path string, s *memStore) {
			rec := s.recs[path]
			rec.meta = kv.Meta{Model: "fp1:other", Tokenizer: meta.Tokenizer}
			rec.blocks = kv.BlockHashes(rec.meta, prompt)
			s.recs[path] = rec
		}, "model fingerprint"},
		{"other tokenizer", func(t *testing.T, path string, s *memStore) {
			rec := s.recs[path]
			rec.meta = kv.Meta{Model: meta.Model, Tokenizer: "other"}
			rec.blocks = kv.BlockHashes(rec.meta, prompt)
			s.recs[path] = rec
		}, "tokenizer fingerprint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newMemStore(t.TempDir())
			var logBuf bytes.Buffer
			src, _ := kv.New(m.Config().KV, 64)
			run(t, m, src, prompt, 0, 0)
			saver := &Resumer{Store: store, Meta: meta}
			if _, err := saver.Save(context.Background(), "c", prompt, src); err != nil {
				t.Fatal(err)
			}
			var path string
			for p := range store.recs {
				path = p
			}
			tc.damage(t, path, store)
			// The reader's meta is that of the record, so the index offers
			// the file; when the record is wrong (another model or
			// tokenizer than the file's), the file's header must refuse.
			lookMeta := store.recs[path].meta
			r := &Resumer{Store: store, Meta: lookMeta, Log: slog.New(slog.NewTextHandler(&logBuf, nil))}
			c, _ := kv.New(m.Config().KV, 64)
			if n := r.Restore(context.Background(), prompt, c); n != 0 || c.Len() != 0 {
				t.Fatalf("restored %d positions from a bad snapshot", n)
			}
			// One line, at Warn (the CLI shows no less), naming the file
			// and why.
			if log := logBuf.String(); strings.Count(log, "\n") != 1 || !strings.Contains(log, "level=WARN") ||
				!strings.Contains(log, path) || !strings.Contains(log, tc.reason) || !strings.Contains(log, "prefilling normally") {
				t.Errorf("log %q: want one Warn line naming %s and saying %q", log, path, tc.reason)
			}
			if len(store.forgotten) != 1 || store.forgotten[0] != path {
				t.Errorf("forgotten %v, want %s", store.forgotten, path)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("bad snapshot file not deleted: %v", err)
			}
			fresh, _ := kv.New(m.Config().KV, 64)
			want, _ := run(t, m, fresh, prompt, 0, 8)
			got, _ := run(t, m, c, prompt, 0, 8)
			if !slices.Equal(got, want) {
				t.Error("the fallback prefill differs from a fresh one")
			}
		})
	}
}

// failingStore is a memStore whose Replace fails (a full disk under the
// database) or whose Forget fails.
type failingStore struct {
	*memStore
	replace, forget error
}

func (f *failingStore) Replace(ctx context.Context, key string, meta kv.Meta, ids []int32, s StoredSnapshot) ([]string, error) {
	if f.replace != nil {
		return nil, f.replace
	}
	return f.memStore.Replace(ctx, key, meta, ids, s)
}

func (f *failingStore) Forget(ctx context.Context, path string) error {
	if f.forget != nil {
		return f.forget
	}
	return f.memStore.Forget(ctx, path)
}

// TestSaveUnrecordedFileRemoved: when the snapshot file is written but its
// record cannot be (a full disk under the database), Save fails and removes
// the file it created, which would otherwise keep the disk full; a file that
// was there already (the same snapshot, recorded before) stays with its
// record.
func TestSaveUnrecordedFileRemoved(t *testing.T) {
	m := storiesModel(t)
	meta := kv.Meta{Model: m.Config().Fingerprint, Tokenizer: "t"}
	dir := t.TempDir()
	store := &failingStore{memStore: newMemStore(dir)}
	r := &Resumer{Store: store, Meta: meta}
	prompt := testPrompt(150, 3)
	c, _ := kv.New(m.Config().KV, 64)
	run(t, m, c, prompt[:100], 0, 0)
	kept, err := r.Save(context.Background(), "a", prompt[:100], c)
	if err != nil {
		t.Fatal(err)
	}
	store.replace = errors.New("database or disk is full")
	if _, err := r.Save(context.Background(), "b", prompt[:100], c); err == nil || !strings.Contains(err.Error(), "disk is full") {
		t.Errorf("saving with a failing record: %v", err)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("a recorded snapshot was removed when saving it again failed: %v", err)
	}
	run(t, m, c, prompt, 100, 0)
	if _, err := r.Save(context.Background(), "a", prompt, c); err == nil {
		t.Error("saving with a failing record succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || filepath.Join(dir, ents[0].Name()) != kept {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("files after the failed saves: %v, want only %s", names, filepath.Base(kept))
	}
}

// TestDropCleanupFailure: when a bad snapshot cannot be forgotten, Restore
// still says so in its one Warn line.
func TestDropCleanupFailure(t *testing.T) {
	m := storiesModel(t)
	meta := kv.Meta{Model: m.Config().Fingerprint, Tokenizer: "t"}
	store := &failingStore{memStore: newMemStore(t.TempDir())}
	prompt := testPrompt(130, 4)
	c, _ := kv.New(m.Config().KV, 64)
	run(t, m, c, prompt, 0, 0)
	path, err := (&Resumer{Store: store, Meta: meta}).Save(context.Background(), "a", prompt, c)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, []byte("not a snapshot"), 0o644)
	store.forget = errors.New("database is locked")
	var logBuf bytes.Buffer
	r := &Resumer{Store: store, Meta: meta, Log: slog.New(slog.NewTextHandler(&logBuf, nil))}
	if n := r.Restore(context.Background(), prompt, c); n != 0 {
		t.Errorf("restored %d from a damaged file", n)
	}
	if log := logBuf.String(); strings.Count(log, "\n") != 1 || !strings.Contains(log, "level=WARN") || !strings.Contains(log, path) ||
		!strings.Contains(log, "forgetting it failed: database is locked") {
		t.Errorf("log %q", log)
	}
}

// TestResumeReplace: saving a conversation's snapshot again replaces the
// file and the record; short prompts never touch the store.
func TestResumeReplace(t *testing.T) {
	m := storiesModel(t)
	meta := kv.Meta{Model: m.Config().Fingerprint, Tokenizer: "t"}
	dir := t.TempDir()
	store := newMemStore(dir)
	r := &Resumer{Store: store, Meta: meta}
	prompt := testPrompt(150, 2)
	c, _ := kv.New(m.Config().KV, 64)
	run(t, m, c, prompt[:100], 0, 0)
	first, err := r.Save(context.Background(), "conv", prompt[:100], c)
	if err != nil {
		t.Fatal(err)
	}
	run(t, m, c, prompt, 100, 0)
	second, err := r.Save(context.Background(), "conv", prompt, c)
	if err != nil {
		t.Fatal(err)
	}
	if first == second {
		t.Fatal("different snapshots got one name")
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("replaced snapshot %s still on disk", first)
	}
	if _, ok := store.recs[second]; !ok || len(store.recs) != 1 {
		t.Errorf("records after replace: %v", store.recs)
	}
	// Saving the same state again keeps the file.
	if again, err := r.Save(context.Background(), "conv", prompt, c); err != nil || again != second {
		t.Errorf("re-save: %s %v", again, err)
	}
	if _, err := os.Stat(second); err != nil {
		t.Errorf("re-save deleted the snapshot: %v", err)
	}
	if _, err := r.Save(context.Background(), "conv", prompt[:10], c); err == nil {
		t.Error("save with ids not matching the cache accepted")
	}
	if n := r.Restore(context.Background(), prompt[:64], c); n != 0 {
		t.Errorf("a prompt of one block restored %d", n)
	}
}
