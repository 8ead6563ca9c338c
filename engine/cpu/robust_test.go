package cpu

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"anechat/engine/arch"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
	"anechat/engine/model/safetensors"
	"anechat/engine/sample"
)

// TestArgmaxAgreesWithGreedy: the backend's argmax (model.Argmax) and
// greedy picking from logits pick the same id for every row, NaN included.
// Before, Argmax started from x[0] and NaN never compares greater, so a
// NaN at x[0] won and a row of NaN gave token 0, where sample.Greedy skips
// NaN and gives -1.
func TestArgmaxAgreesWithGreedy(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		x    []float32
		want int32
	}{
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{nan, 1, 2}, 2},
		{[]float32{1, nan, 0}, 0},
		{[]float32{nan, nan, nan}, -1},
		{nil, -1},
		{[]float32{-inf, nan, -inf}, 0},
		{[]float32{nan, inf, 5}, 1},
	}
	for _, c := range cases {
		if got, g := Argmax(c.x), sample.Greedy(c.x); got != c.want || got != g {
			t.Errorf("Argmax(%v) = %d, sample.Greedy = %d; want %d from both", c.x, got, g, c.want)
		}
	}
	// Through a backend's Result, as the decode loops see it.
	r := result([]float32{nan, 1, 2, nan, nan, nan}, 2, 3, model.Argmax|model.Logits)
	for i, row := range r.Logits {
		if r.Argmax[i] != sample.Greedy(row) {
			t.Errorf("row %d: Argmax %d, Greedy %d", i, r.Argmax[i], sample.Greedy(row))
		}
	}
	if r.Argmax[0] != 2 || r.Argmax[1] != -1 {
		t.Errorf("Result argmax %v, want [2 -1]", r.Argmax)
	}
}

// oneWorkerFirst runs fn(data, lo) on pool for 4 chunks such that a worker
// other than the caller's goroutine (worker 0) runs fn first: worker 0
// waits until one has started.
func oneWorkerFirst(p *Pool, fn func(lo int)) {
	started := make(chan struct{})
	var once sync.Once
	p.Run(4, 1, 1<<20, taskFunc(func(worker, lo, hi int) {
		if worker == 0 {
			<-started
			return
		}
		once.Do(func() { close(started) })
		fn(lo)
	}))
}

// TestPoolCarriesWorkerPanics: a panic on a worker goroutine reaches the
// caller of Run, with the worker's stack, instead of killing the process
// (an unrecovered panic on any goroutine does).
func TestPoolCarriesWorkerPanics(t *testing.T) {
	defer func() {
		r := recover()
		wp, ok := r.(*WorkerPanic)
		if !ok || wp.Value != "boom" || !strings.Contains(string(wp.Stack), "TestPoolCarriesWorkerPanics") ||
			!strings.Contains(wp.Error(), "boom") {
			t.Fatalf("recovered %v; want a *WorkerPanic with the value and the worker's stack", r)
		}
	}()
	oneWorkerFirst(NewPool(4), func(int) { panic("boom") })
	t.Fatal("Run returned after a worker panicked")
}

// TestPoolCarriesWorkerFaults: a worker goroutine reads a mapping whose file
// was truncated. The fault reaches the guarded caller as a changed file, not
// a SIGBUS that kills the process.
func TestPoolCarriesWorkerFaults(t *testing.T) {
	p := filepath.Join(t.TempDir(), "weights.bin")
	if err := os.WriteFile(p, make([]byte, 1<<20), 0o644); err != nil {
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
	var sink atomic.Int64
	err = func() (err error) {
		defer mmap.Guard(&err, m)()
		oneWorkerFirst(NewPool(4), func(lo int) { sink.Add(int64(m.Data()[lo*65536])) })
		return nil
	}()
	var ce *mmap.ChangedError
	if !errors.As(err, &ce) || ce.Path != p || !errors.Is(err, model.ErrModelChanged) {
		t.Fatalf("err = %v; want a *mmap.ChangedError for %s", err, p)
	}
}

// truncatedLlama writes a random llama of typ to a temp file, opens it on a
// pool of 4 workers and truncates the file right after the token
// embeddings: lookups still work, every matrix product faults.
func truncatedLlama(t *testing.T, typ gguf.Type) (*Llama, string) {
	t.Helper()
	o := arch.Decoder{Hidden: 256, FFN: 512, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 1024, Context: 64}
	data, err := RandomLlama(o, typ, 3)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "random.gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := OpenLlama(p, NewPool(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.CheckFiles(); err != nil {
		t.Fatalf("CheckFiles of an intact file: %v", err)
	}
	emb, _ := m.File().Tensor("token_embd.weight")
	if err := os.Truncate(p, emb.Offset+emb.Size); err != nil {
		t.Fatal(err)
	}
	return m, p
}

// TestLlamaTruncatedUnderForward: the weights file is truncated while the
// model is loaded; a wide Forward (matrix products on the worker pool, in
// the assembly kernels of each weight type) fails with the typed error and
// rolls its rows back. Before, the process died of SIGBUS.
func TestLlamaTruncatedUnderForward(t *testing.T) {
	for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.Q8_0, gguf.Q4_0} {
		t.Run(typ.String(), func(t *testing.T) {
			m, p := truncatedLlama(t, typ)
			c, err := kv.New(m.Config().KV, 8)
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Forward(context.Background(), []int32{1, 2, 3, 4, 5, 6, 7, 8}, 0, c, model.Logits)
			var ce *mmap.ChangedError
			if !errors.As(err, &ce) || ce.Path != p || !strings.Contains(err.Error(), "reload the model") {
				t.Fatalf("Forward on a truncated file: %v; want a *mmap.ChangedError for %s", err, p)
			}
			if c.Pending() != 0 {
				t.Fatalf("%d rows left pending", c.Pending())
			}
			if err := m.CheckFiles(); !errors.Is(err, model.ErrModelChanged) {
				t.Fatalf("CheckFiles after truncation: %v", err)
			}
		})
	}
}

// TestGemma4TruncatedUnderForward: the same for a safetensors model.
func TestGemma4TruncatedUnderForward(t *testing.T) {
	dir := copyFixture(t, nil)
	m, err := LoadGemma4(dir, NewPool(4))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := filepath.Join(dir, "model.safetensors")
	if err := os.Truncate(p, 4096); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckFiles(); !errors.Is(err, model.ErrModelChanged) || !strings.Contains(err.Error(), p) {
		t.Fatalf("CheckFiles after truncation: %v", err)
	}
	c, err := kv.New(m.Config().KV, 8)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Forward(context.Background(), []int32{2, 3, 4, 5}, 0, c, model.Argmax)
	var ce *mmap.ChangedError
	if !errors.As(err, &ce) || ce.Path != p || c.Pending() != 0 {
		t.Fatalf("Forward on a truncated file: %v (%d pending); want a *mmap.ChangedError for %s", err, c.Pending(), p)
	}
}

// rewriteGGUF re-encodes the GGUF data with its metadata edited (meta
// returns the value to write for a key, nil to drop it); more may add keys
// and tensors.
func rewriteGGUF(t testing.TB, data []byte, meta func(key string, v any) any, more func(w *gguf.Writer)) []byte {
	t.Helper()
	f, err := gguf.Parse("x", data)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for _, k := range f.Keys() {
		v, _ := f.Value(k)
		if meta != nil {
			v = meta(k, v)
		}
		if v != nil {
			w.Set(k, v)
		}
	}
	for _, ti := range f.Tensors() {
		d, _ := f.TensorData(ti.Name)
		w.AddTensor(ti.Name, ti.Type, ti.Dims, d)
	}
	if more != nil {
		more(w)
	}
	out, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// setKey returns a meta edit that sets key to v.
func setKey(key string, v any) func(string, any) any {
	return func(k string, old any) any {
		if k == key {
			return v
		}
		return old
	}
}

// TestLoadDamagedMetadata: metadata that does not match the weights is a
// load error naming the file and the field, where it used to load and
// compute garbage (layers ignored, weights ignored) or silently drop a
// token id (no BOS, no end of reply).
func TestLoadDamagedMetadata(t *testing.T) {
	good, err := RandomLlama(tinyOpts, gguf.F32, 1) // 2 layers, vocab 128
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
		want []string
	}{
		{"block_count smaller than the blocks", rewriteGGUF(t, good, setKey("llama.block_count", uint32(1)), nil),
			[]string{`tensor "blk.1.attn_norm.weight"`, "(and 8 more)", "llama.block_count = 1", "layer 1"}},
		{"bos out of range", rewriteGGUF(t, good, setKey("tokenizer.ggml.bos_token_id", uint32(128)), nil),
			[]string{`"tokenizer.ggml.bos_token_id" = 128`, "128-token vocabulary"}},
		{"eos out of range", rewriteGGUF(t, good, setKey("tokenizer.ggml.eos_token_id", uint32(5000)), nil),
			[]string{`"tokenizer.ggml.eos_token_id" = 5000`}},
		{"eot out of range", rewriteGGUF(t, good, nil, func(w *gguf.Writer) { w.Set("tokenizer.ggml.eot_token_id", uint32(128)) }),
			[]string{`"tokenizer.ggml.eot_token_id" = 128`}},
		{"negative bos", rewriteGGUF(t, good, setKey("tokenizer.ggml.bos_token_id", int32(-7)), nil),
			[]string{`"tokenizer.ggml.bos_token_id" = -7`}},
		{"extra weight", rewriteGGUF(t, good, nil, func(w *gguf.Writer) {
			w.AddF32("blk.0.attn_q.bias", []int{64}, make([]float32, 64))
		}), []string{`tensor "blk.0.attn_q.bias"`, "not a weight of the model"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := gguf.Parse("bad.gguf", c.data)
			if err != nil {
				t.Fatal(err)
			}
			_, err = LoadLlama(f, nil)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range append(c.want, "bad.gguf") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// llama.cpp's "no token" (-1, also written as uint32 0xFFFFFFFF) is
	// absent, not damage.
	for _, none := range []any{uint32(math.MaxUint32), int32(-1)} {
		f, err := gguf.Parse("none.gguf", rewriteGGUF(t, good, setKey("tokenizer.ggml.eos_token_id", none), nil))
		if err != nil {
			t.Fatal(err)
		}
		m, err := LoadLlama(f, nil)
		if err != nil {
			t.Fatalf("eos_token_id %v (none): %v", none, err)
		}
		if cfg := m.Config(); cfg.BOS != 1 || len(cfg.EOS) != 0 {
			t.Fatalf("eos_token_id %v (none): BOS %d, EOS %v; want 1, none", none, cfg.BOS, cfg.EOS)
		}
	}
}

// fewerLayers edits the fixture's config.json to say 5 layers where the
// weights have 6.
func fewerLayers(c map[string]any) {
	c["num_hidden_layers"] = 5
	c["layer_types"] = c["layer_types"].([]any)[:5]
	c["num_kv_shared_layers"] = 2
}

// noPLEFixture is copyFixture of the fixture without per-layer inputs: its
// per-layer tensors dropped, hidden_size_per_layer_input 0.
func noPLEFixture(t *testing.T, edit func(map[string]any)) string {
	t.Helper()
	dir := copyFixture(t, func(c map[string]any) {
		c["hidden_size_per_layer_input"] = 0
		if edit != nil {
			edit(c)
		}
	})
	p := filepath.Join(dir, "model.safetensors")
	src, err := safetensors.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	infos, datas := map[string]safetensors.TensorInfo{}, map[string][]byte{}
	for _, ti := range src.Tensors() {
		if strings.Contains(ti.Name, "per_layer") {
			continue
		}
		d, _ := src.TensorData(ti.Name)
		infos[ti.Name], datas[ti.Name] = ti, append([]byte(nil), d...)
	}
	src.Close()
	writeSafetensors(t, p, infos, datas)
	return dir
}

// TestGemma4DamagedConfig: config.json (or generation_config.json) that
// does not match the weights is a load error naming the file and field,
// where it used to load and compute garbage or drop token ids.
func TestGemma4DamagedConfig(t *testing.T) {
	cases := []struct {
		name string
		edit func(map[string]any)
		gen  string // generation_config.json, if any
		want []string
	}{
		{"num_hidden_layers smaller than the layers", fewerLayers, "",
			// The per-layer embedding table is as wide as all layers.
			[]string{"model.safetensors", `"model.embed_tokens_per_layer.weight" has shape [512 96], want [512 80]`}},
		{"per-layer inputs off, tables present", func(c map[string]any) { c["hidden_size_per_layer_input"] = 0 }, "",
			[]string{`tensor "model.embed_tokens_per_layer.weight"`, "not a weight of the model"}},
		{"bos out of range", func(c map[string]any) { c["bos_token_id"] = 512 }, "",
			[]string{"config.json", "bos_token_id = 512", "512-token vocabulary"}},
		{"eos out of range", func(c map[string]any) { c["eos_token_id"] = []int{1, 9999} }, "",
			[]string{"config.json", "eos_token_id 9999"}},
		{"negative eos", func(c map[string]any) { c["eos_token_id"] = -1 }, "",
			[]string{"config.json", "eos_token_id -1"}},
		{"generation eos out of range", nil, `{"eos_token_id": [1, 6, 600]}`,
			[]string{"generation_config.json", "eos_token_id 600"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyFixture(t, c.edit)
			if c.gen != "" {
				if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(c.gen), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m, err := LoadGemma4(dir, nil)
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// Without per-layer inputs nothing else is as wide as all layers: the
	// weights of the layer past num_hidden_layers are what tells.
	m, err := LoadGemma4(noPLEFixture(t, nil), nil)
	if err != nil {
		t.Fatalf("fixture without per-layer inputs: %v", err)
	}
	m.Close()
	_, err = LoadGemma4(noPLEFixture(t, fewerLayers), nil)
	for _, w := range []string{"model.safetensors", `"model.layers.5.`, "config.json num_hidden_layers = 5", "layer 5"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("no per-layer inputs, num_hidden_layers smaller: error %v lacks %q", err, w)
		}
	}

	// null is "none".
	m, err = LoadGemma4(copyFixture(t, func(c map[string]any) { c["bos_token_id"] = nil }), nil)
	if err != nil {
		t.Fatalf("bos_token_id null: %v", err)
	}
	defer m.Close()
	if m.Config().BOS != -1 {
		t.Fatalf("bos_token_id null: BOS %d", m.Config().BOS)
	}
}

// FuzzLoadLlama: any GGUF bytes either fail to load with an error or give
// a model whose token ids are in its vocabulary and which binds every
// tensor of the file; nothing panics.
func FuzzLoadLlama(f *testing.F) {
	good, err := RandomLlama(arch.Decoder{Hidden: 8, FFN: 8, Layers: 2, Heads: 2, KVHeads: 1, Vocab: 8, Context: 16}, gguf.F32, 1)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(rewriteGGUF(f, good, setKey("llama.block_count", uint32(1)), nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.Parse("fuzz.gguf", data)
		if err != nil {
			return
		}
		m, err := LoadLlama(file, NewPool(1))
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.gguf") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		cfg := m.Config()
		if cfg.BOS < -1 || int(cfg.BOS) >= cfg.VocabSize {
			t.Fatalf("BOS %d for a vocabulary of %d", cfg.BOS, cfg.VocabSize)
		}
		for _, id := range cfg.EOS {
			if id < 0 || int(id) >= cfg.VocabSize {
				t.Fatalf("EOS %d for a vocabulary of %d", id, cfg.VocabSize)
			}
		}
		if u := file.Unread(); len(u) != 0 {
			t.Fatalf("loaded with %d tensors unbound (%s...)", len(u), u[0].Name)
		}
	})
}
