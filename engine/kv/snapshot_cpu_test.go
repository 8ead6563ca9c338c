package kv_test

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"testing"

	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/internal/testres"
)

func loadStories(t testing.TB) *cpu.Llama {
	m, err := cpu.OpenLlama(testres.Stories(t), cpu.NewPool(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// prefill runs ids from c.Len() in calls of width w and commits them.
func prefill(t *testing.T, b model.Backend, c *kv.Cache, ids []int32, w int) {
	t.Helper()
	for len(ids) > 0 {
		n := min(w, len(ids))
		if _, err := b.Forward(context.Background(), ids[:n], c.Len(), c, model.Logits); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(n); err != nil {
			t.Fatal(err)
		}
		ids = ids[n:]
	}
}

// decode feeds next and then greedy tokens one at a time for steps steps and
// returns every logits row's bits, concatenated.
func decode(t *testing.T, b model.Backend, c *kv.Cache, next int32, steps int) []byte {
	t.Helper()
	var out []byte
	for range steps {
		r, err := b.Forward(context.Background(), []int32{next}, c.Len(), c, model.Logits|model.Argmax)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(1); err != nil {
			t.Fatal(err)
		}
		for _, x := range r.Logits[0] {
			out = append(out, byte(math.Float32bits(x)), byte(math.Float32bits(x)>>8), byte(math.Float32bits(x)>>16), byte(math.Float32bits(x)>>24))
		}
		next = r.Argmax[0]
	}
	return out
}

// TestSnapshotRestoreForward checks, with the real CPU backend on
// stories260K, that a cache restored from a snapshot makes later Forward
// calls bit-identical to those on the original: with the model's full
// attention, with sliding windows imposed on some layers (the backend
// attends over cache.Visible), restored past the point where rings wrapped,
// and on the Gemma 4 fixture (window 8, KV-shared layers that the snapshot
// does not store).
func TestSnapshotRestoreForward(t *testing.T) {
	m := loadStories(t)
	cfg := m.Config()
	prompt := make([]int32, 170)
	for i := range prompt {
		prompt[i] = int32(3 + (i*37+i*i)%500)
	}
	sliding := cfg.KV
	sliding.Layers = append([]kv.LayerSpec(nil), sliding.Layers...)
	sliding.Layers[1].Window = 32
	sliding.Layers[3].Window = 48
	gemma, err := cpu.LoadGemma4(filepath.Join("..", "cpu", "testdata", "gemma4", "model"), cpu.NewPool(1))
	if err != nil {
		t.Fatal(err)
	}
	defer gemma.Close()
	for _, tc := range []struct {
		name string
		geo  kv.Geometry
		b    model.Backend
	}{{"full", cfg.KV, m}, {"sliding", sliding, m}, {"gemma4", gemma.Config().KV, gemma}} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.b
			cfg := m.Config()
			meta := kv.Meta{Model: cfg.Fingerprint, Tokenizer: "stories", Template: ""}
			orig, err := kv.New(tc.geo, 16)
			if err != nil {
				t.Fatal(err)
			}
			prefill(t, m, orig, prompt, 16)
			path, err := kv.Write(context.Background(), t.TempDir(), meta, prompt, orig)
			if err != nil {
				t.Fatal(err)
			}
			restored, err := kv.New(tc.geo, 8)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Load(context.Background(), path, meta, restored); err != nil {
				t.Fatal(err)
			}
			want := decode(t, m, orig, 1, 40)
			got := decode(t, m, restored, 1, 40)
			if !bytes.Equal(got, want) {
				t.Fatal("a restored cache gives other logits than the original")
			}
			// And the restored cache gives what a fresh prefill gives.
			fresh, _ := kv.New(tc.geo, 64)
			prefill(t, m, fresh, prompt, 64)
			if !bytes.Equal(decode(t, m, fresh, 1, 40), want) {
				t.Fatal("a fresh prefill of another width gives other logits (row independence)")
			}
		})
	}
}
