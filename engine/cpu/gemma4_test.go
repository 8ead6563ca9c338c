package cpu

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"anechat/engine/arch/gemma4"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/safetensors"
)

// The fixture written by testdata/gemma4/gen.py with transformers: a tiny
// random gemma4 text model with every feature on, window 8.
const gemma4Dir = "testdata/gemma4"

type gemma4Case struct {
	Name      string  `json:"name"`
	Prompt    []int32 `json:"prompt_ids"`
	Greedy    []int32 `json:"greedy_ids"`
	MinMargin float64 `json:"min_margin"`
	logits    []float32
}

func (c gemma4Case) seq() []int32 { return append(append([]int32(nil), c.Prompt...), c.Greedy...) }

// loadGemma4Fixture loads the fixture model and its transformers references.
func loadGemma4Fixture(t testing.TB) (*Gemma4, []gemma4Case) {
	t.Helper()
	m, err := LoadGemma4(filepath.Join(gemma4Dir, "model"), NewPool(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	data, err := os.ReadFile(filepath.Join(gemma4Dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []gemma4Case `json:"cases"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(gemma4Dir, "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	V := m.Config().VocabSize
	for i := range ref.Cases {
		c := &ref.Cases[i]
		ti, ok := f.Tensor(c.Name + ".logits")
		if !ok {
			t.Fatalf("no reference logits for %s", c.Name)
		}
		raw, _ := f.TensorData(ti.Name)
		if c.logits, err = safetensors.Float32s(ti, raw); err != nil {
			t.Fatal(err)
		}
		if len(ti.Shape) != 2 || ti.Shape[0] != len(c.seq()) || ti.Shape[1] != V {
			t.Fatalf("%s: reference logits of shape %v for %d positions", c.Name, ti.Shape, len(c.seq()))
		}
	}
	if len(ref.Cases) < 3 {
		t.Fatalf("%d reference cases", len(ref.Cases))
	}
	return m, ref.Cases
}

// decode runs seq through m in calls of width w (the last call narrower),
// committing every row, and returns the logits of every position.
func decode(t testing.TB, m model.Backend, seq []int32, w, maxBatch int) [][]float32 {
	t.Helper()
	c, err := kv.New(m.Config().KV, maxBatch)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for p := 0; p < len(seq); p += w {
		toks := seq[p:min(p+w, len(seq))]
		r, err := m.Forward(context.Background(), toks, p, c, model.Logits)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(len(toks)); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Logits...)
	}
	return out
}

func TestGemma4Config(t *testing.T) {
	m, _ := loadGemma4Fixture(t)
	o := m.Arch()
	if o.Vocab != 512 || o.Hidden != 64 || o.Heads != 4 || o.Window != 8 || o.Softcap != 30 || o.PLEDim != 16 || !o.Tied {
		t.Errorf("options = %+v", o)
	}
	want := []gemma4.Layer{
		{Sliding: true, HeadDim: 16, KVHeads: 2, Source: 0, FFN: 96, RopeTheta: 1e4, RopePairs: 8},
		{Sliding: true, HeadDim: 16, KVHeads: 2, Source: 1, FFN: 96, RopeTheta: 1e4, RopePairs: 8},
		{Sliding: false, HeadDim: 32, KVHeads: 2, Source: 2, FFN: 96, RopeTheta: 1e6, RopePairs: 4},
		{Sliding: true, HeadDim: 16, KVHeads: 2, Source: 1, FFN: 192, RopeTheta: 1e4, RopePairs: 8},
		{Sliding: true, HeadDim: 16, KVHeads: 2, Source: 1, FFN: 192, RopeTheta: 1e4, RopePairs: 8},
		{Sliding: false, HeadDim: 32, KVHeads: 2, Source: 2, FFN: 192, RopeTheta: 1e6, RopePairs: 4},
	}
	if fmt.Sprint(o.Layers) != fmt.Sprint(want) {
		t.Errorf("layers =\n%v\nwant\n%v", o.Layers, want)
	}
	cfg := m.Config()
	if cfg.Arch != "gemma4" || cfg.BOS != 2 || fmt.Sprint(cfg.EOS) != "[1 6]" || cfg.ContextLen != 256 {
		t.Errorf("config = %+v", cfg)
	}
	for i, l := range cfg.KV.Layers {
		if w := map[bool]int{true: 8, false: 0}[want[i].Sliding]; l.Window != w || l.Source != want[i].Source || l.HeadDim != want[i].HeadDim {
			t.Errorf("KV layer %d = %+v", i, l)
		}
	}
}

// TestGemma4Reference compares every position's logits, decoding one token
// at a time through the sliding rings (window 8, ring 16, sequences of up
// to 91 positions), with transformers' (fp32, eager attention): the row's
// largest difference is within 1e-4 of its largest logit (measured: < 2e-5).
func TestGemma4Reference(t *testing.T) {
	m, cases := loadGemma4Fixture(t)
	V := m.Config().VocabSize
	for _, c := range cases {
		got := decode(t, m, c.seq(), 1, 8)
		worst := 0.0
		for p, row := range got {
			ref := c.logits[p*V : (p+1)*V]
			// Relative error of the row: max |go-ref| / max |ref|.
			diff, scale, at := 0.0, 0.0, 0
			for i, v := range row {
				if d := math.Abs(float64(v) - float64(ref[i])); d > diff {
					diff, at = d, i
				}
				scale = math.Max(scale, math.Abs(float64(ref[i])))
			}
			rel := diff / scale
			worst = math.Max(worst, rel)
			if rel > 1e-4 || math.IsNaN(rel) {
				t.Fatalf("%s: position %d (of %d): relative error %.2e (logit %d = %v, transformers %v)", c.Name, p, len(got), rel, at, row[at], ref[at])
			}
		}
		t.Logf("%s: %d positions, worst relative error %.2e", c.Name, len(got), worst)
	}
}

// TestGemma4Greedy prefills each prompt in one call, then decodes greedily:
// the 64 ids equal transformers' greedy ids.
func TestGemma4Greedy(t *testing.T) {
	m, cases := loadGemma4Fixture(t)
	for _, c := range cases {
		cache, err := kv.New(m.Config().KV, 32)
		if err != nil {
			t.Fatal(err)
		}
		// Prefill as the Session does: only the last row's greedy id.
		r, err := m.Forward(context.Background(), c.Prompt, 0, cache, model.Argmax|model.Last)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Argmax) != 1 || r.Logits != nil {
			t.Fatalf("%s: Last gave %d ids, logits %v", c.Name, len(r.Argmax), r.Logits != nil)
		}
		cache.Commit(len(c.Prompt))
		next := r.Argmax[0]
		var got []int32
		for len(got) < len(c.Greedy) {
			got = append(got, next)
			pos := len(c.Prompt) + len(got) - 1
			r, err := m.Forward(context.Background(), []int32{next}, pos, cache, model.Argmax)
			if err != nil {
				t.Fatal(err)
			}
			cache.Commit(1)
			next = r.Argmax[0]
		}
		if fmt.Sprint(got) != fmt.Sprint(c.Greedy) {
			t.Errorf("%s: greedy\n%v\ntransformers\n%v", c.Name, got, c.Greedy)
		}
	}
}

// TestGemma4RowIndependence checks DESIGN.md invariant 1: calls of width 2,
// 3, 4 and 8 give logits bit-identical to width-1 decoding, also past the
// sliding window and across ring wrap-around; so do prefill-sized calls
// wider than the window (16, 32 tokens in a ring of window+32 slots).
func TestGemma4RowIndependence(t *testing.T) {
	m, cases := loadGemma4Fixture(t)
	for _, c := range cases[:2] {
		seq := c.seq()
		one := decode(t, m, seq, 1, 8)
		for _, w := range []int{2, 3, 4, 8, 16, 32} {
			got := decode(t, m, seq, w, max(8, w))
			for p := range one {
				if !model.SameBits(got[p], one[p]) {
					t.Fatalf("%s: width %d: logits at position %d differ from width 1", c.Name, w, p)
				}
			}
		}
	}
}

// TestGemma4Rollback is the speculation pattern: a width-K call whose rows
// are only partly committed, the rest dropped, then decoding continues. The
// logits equal plain width-1 decoding bit for bit, so rejected rows leave
// nothing behind (in full layers or in the sliding rings).
func TestGemma4Rollback(t *testing.T) {
	m, cases := loadGemma4Fixture(t)
	seq := cases[1].seq()
	one := decode(t, m, seq, 1, 8)
	cache, err := kv.New(m.Config().KV, 8)
	if err != nil {
		t.Fatal(err)
	}
	wrong := make([]int32, 8)
	for i := range wrong {
		wrong[i] = int32(300 + i)
	}
	for p, step := 0, 0; p < len(seq); step++ {
		w := []int{4, 8, 3, 5, 2}[step%5]
		keep := []int{1, 3, 2, 5, 1}[step%5]
		w, keep = min(w, len(seq)-p), min(keep, len(seq)-p)
		// The first keep tokens are the true ones, the rest a bad draft.
		toks := append(append([]int32(nil), seq[p:p+keep]...), wrong[:w-keep]...)
		r, err := m.Forward(context.Background(), toks, p, cache, model.Logits)
		if err != nil {
			t.Fatal(err)
		}
		for i := range keep {
			if !model.SameBits(r.Logits[i], one[p+i]) {
				t.Fatalf("step %d: position %d differs from width-1 decoding", step, p+i)
			}
		}
		if err := cache.Commit(keep); err != nil {
			t.Fatal(err)
		}
		p += keep
	}
}

func TestGemma4ForwardErrors(t *testing.T) {
	m, _ := loadGemma4Fixture(t)
	cache, _ := kv.New(m.Config().KV, 4)
	ctx := context.Background()
	if _, err := m.Forward(ctx, []int32{512}, 0, cache, model.Logits); !errors.Is(err, ErrInput) {
		t.Errorf("token 512: err = %v", err)
	}
	if _, err := m.Forward(ctx, nil, 0, cache, model.Logits); !errors.Is(err, ErrInput) {
		t.Errorf("no tokens: err = %v", err)
	}
	if _, err := m.Forward(ctx, []int32{2, 3}, 5, cache, model.Logits); !errors.Is(err, kv.ErrPosition) {
		t.Errorf("wrong start: err = %v", err)
	}
	other, _ := kv.New(kv.Geometry{Context: 16, Layers: []kv.LayerSpec{{KVHeads: 1, HeadDim: 4}}}, 4)
	if _, err := m.Forward(ctx, []int32{2}, 0, other, model.Logits); !errors.Is(err, ErrInput) {
		t.Errorf("foreign cache: err = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Forward(cctx, []int32{2}, 0, cache, model.Logits); !errors.Is(err, context.Canceled) || cache.Pending() != 0 {
		t.Errorf("cancelled: err = %v, %d pending", err, cache.Pending())
	}
}

// copyFixture copies the fixture model directory to a temp dir, editing
// config.json through edit (nil: unchanged).
func copyFixture(t *testing.T, edit func(map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(gemma4Dir, "model")
	for _, name := range []string{"config.json", "model.safetensors"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "config.json" && edit != nil {
			var cfg map[string]any
			if err := json.Unmarshal(data, &cfg); err != nil {
				t.Fatal(err)
			}
			edit(cfg)
			data, _ = json.Marshal(cfg)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestGemma4LoadErrors: bad input gives an error naming the file and the
// tensor or field, never a panic.
func TestGemma4LoadErrors(t *testing.T) {
	cases := []struct {
		name string
		edit func(map[string]any)
		want []string
	}{
		{"wrong shape", func(c map[string]any) { c["hidden_size"] = 32 }, []string{"model.safetensors", `"model.embed_tokens.weight"`, "[512 64]", "want [512 32]"}},
		{"missing tensor", func(c map[string]any) { c["num_kv_shared_layers"] = 2 }, []string{`"model.layers.3.self_attn.k_proj.weight"`, "missing"}},
		{"double-wide off", func(c map[string]any) { c["use_double_wide_mlp"] = false }, []string{`"model.layers.3.mlp.gate_proj.weight"`, "[192 64]"}},
		{"moe", func(c map[string]any) { c["enable_moe_block"] = true }, []string{"config.json", "enable_moe_block"}},
		{"activation", func(c map[string]any) { c["hidden_activation"] = "silu" }, []string{"config.json", "silu"}},
		{"arch", func(c map[string]any) { c["model_type"] = "llama" }, []string{"config.json", `"llama"`}},
		{"layer types", func(c map[string]any) { c["layer_types"] = []string{"full_attention"} }, []string{"config.json", "layer_types"}},
		{"rope", func(c map[string]any) {
			c["rope_parameters"].(map[string]any)["full_attention"].(map[string]any)["rope_type"] = "yarn"
		}, []string{"config.json", "yarn"}},
		{"shared kind", func(c map[string]any) { c["num_kv_shared_layers"] = 4 }, []string{"config.json", "layer 2 is KV-shared"}},
	}
	for _, c := range cases {
		_, err := LoadGemma4(copyFixture(t, c.edit), nil)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}

	// A truncated weight file.
	dir := copyFixture(t, nil)
	p := filepath.Join(dir, "model.safetensors")
	data, _ := os.ReadFile(p)
	os.WriteFile(p, data[:len(data)-100], 0o644)
	if _, err := LoadGemma4(dir, nil); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "past the") {
		t.Errorf("truncated: err = %v", err)
	}
	// A weight of an integer dtype: the header is rewritten in place (same
	// length) so that one tensor claims to be I32.
	dir = copyFixture(t, nil)
	p = filepath.Join(dir, "model.safetensors")
	data, _ = os.ReadFile(p)
	i := strings.Index(string(data), `"model.norm.weight":{"dtype":"F32"`)
	if i < 0 {
		t.Fatal("fixture header layout changed")
	}
	copy(data[i+len(`"model.norm.weight":{"dtype":"`):], "I32")
	os.WriteFile(p, data, 0o644)
	if _, err := LoadGemma4(dir, nil); err == nil || !strings.Contains(err.Error(), `"model.norm.weight"`) || !strings.Contains(err.Error(), "I32") {
		t.Errorf("integer dtype: err = %v", err)
	}
	// No directory at all.
	if _, err := LoadGemma4(filepath.Join(t.TempDir(), "absent"), nil); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("absent dir: err = %v", err)
	}
}

// TestRandomGemma4Quantised: row independence (widths 1-8, past the window)
// also holds with quantised weights, on a random model of the E2B layer
// pattern at toy size.
func TestRandomGemma4Quantised(t *testing.T) {
	o := gemma4.E2B(10, 96)
	o.Hidden, o.Heads, o.PLEDim, o.Window, o.Context = 64, 2, 32, 6, 64
	for i := range o.Layers {
		l := &o.Layers[i]
		l.HeadDim, l.RopePairs, l.FFN = l.HeadDim/8, l.RopePairs/8, l.FFN/64
	}
	for _, typ := range []gguf.Type{gguf.Q8_0, gguf.Q4_1, gguf.BF16} {
		m, err := RandomGemma4(o, typ, 7, NewPool(2))
		if err != nil {
			t.Fatal(err)
		}
		seq := make([]int32, 30)
		for i := range seq {
			seq[i] = int32((i*37 + 5) % o.Vocab)
		}
		one := decode(t, m, seq, 1, 8)
		for _, row := range one {
			for _, v := range row {
				if math.IsNaN(float64(v)) || math.Abs(float64(v)) > 30 {
					t.Fatalf("%s: logit %v outside the softcap", typ, v)
				}
			}
		}
		if model.SameBits(one[0], one[1]) {
			t.Fatalf("%s: two positions gave the same logits", typ)
		}
		for _, w := range []int{2, 3, 4, 8} {
			got := decode(t, m, seq, w, 8)
			for p := range one {
				if !model.SameBits(got[p], one[p]) {
					t.Fatalf("%s: width %d: position %d differs from width 1", typ, w, p)
				}
			}
		}
	}
}

// writeSafetensors writes tensors (name -> info and bytes) as one file.
func writeSafetensors(t *testing.T, path string, infos map[string]safetensors.TensorInfo, data map[string][]byte) {
	t.Helper()
	header := map[string]any{}
	var body []byte
	names := make([]string, 0, len(infos))
	for name := range infos {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ti := infos[name]
		header[name] = map[string]any{"dtype": ti.DType, "shape": ti.Shape, "data_offsets": []int{len(body), len(body) + len(data[name])}}
		body = append(body, data[name]...)
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), body...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGemma4CheckpointLayouts loads the fixture in the layouts real
// checkpoints use: a multimodal config (model_type gemma4, the text model in
// text_config, tensors under model.language_model., extra vision tensors),
// sharded with an index; and an older config giving the full layers' head
// dim as global_head_dim instead of per_layer_config. Both give logits
// bit-identical to the fixture's own layout.
func TestGemma4CheckpointLayouts(t *testing.T) {
	m, cases := loadGemma4Fixture(t)
	seq := cases[0].seq()[:24]
	want := decode(t, m, seq, 4, 8)

	src, err := safetensors.OpenDir(filepath.Join(gemma4Dir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfgData := src.Config()
	var text map[string]any
	if err := json.Unmarshal(cfgData, &text); err != nil {
		t.Fatal(err)
	}

	// Multimodal, sharded.
	dir := t.TempDir()
	shards := []map[string]safetensors.TensorInfo{{}, {}}
	datas := []map[string][]byte{{}, {}}
	index := map[string]string{}
	for i, ti := range src.Tensors() {
		name := strings.Replace(ti.Name, "model.", "model.language_model.", 1)
		raw, _ := src.TensorData(ti.Name)
		shards[i%2][name], datas[i%2][name] = ti, raw
		index[name] = fmt.Sprintf("model-%05d-of-00002.safetensors", i%2+1)
	}
	shards[0]["model.vision_tower.patch.weight"] = safetensors.TensorInfo{DType: safetensors.BF16, Shape: []int{2, 2}}
	datas[0]["model.vision_tower.patch.weight"] = make([]byte, 8)
	index["model.vision_tower.patch.weight"] = "model-00001-of-00002.safetensors"
	for i := range shards {
		writeSafetensors(t, filepath.Join(dir, fmt.Sprintf("model-%05d-of-00002.safetensors", i+1)), shards[i], datas[i])
	}
	idx, _ := json.Marshal(map[string]any{"weight_map": index})
	os.WriteFile(filepath.Join(dir, safetensors.IndexName), idx, 0o644)
	eos := text["eos_token_id"]
	delete(text, "eos_token_id")
	mm, _ := json.Marshal(map[string]any{"model_type": "gemma4", "text_config": text, "eos_token_id": eos,
		"vision_config": map[string]any{"model_type": "gemma4_vision"}})
	os.WriteFile(filepath.Join(dir, "config.json"), mm, 0o644)
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"eos_token_id":[1,6,7]}`), 0o644)
	mmModel, err := LoadGemma4(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mmModel.Close()
	if fmt.Sprint(mmModel.Config().EOS) != "[1 6 7]" {
		t.Errorf("EOS = %v, want config's plus generation_config's", mmModel.Config().EOS)
	}
	got := decode(t, mmModel, seq, 4, 8)
	for p := range want {
		if !model.SameBits(got[p], want[p]) {
			t.Fatalf("multimodal layout: position %d differs", p)
		}
	}

	// global_head_dim instead of per_layer_config.
	old := copyFixture(t, func(c map[string]any) {
		delete(c, "per_layer_config")
		c["global_head_dim"] = 32
	})
	oldModel, err := LoadGemma4(old, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer oldModel.Close()
	got = decode(t, oldModel, seq, 4, 8)
	for p := range want {
		if !model.SameBits(got[p], want[p]) {
			t.Fatalf("global_head_dim config: position %d differs", p)
		}
	}
}

// TestGemma4WindowMask pins DESIGN.md invariant 2 on the sliding layers from
// below: in a width-8 call at position p, no query may read a row older
// than p-W+1 (the oldest any of them may see). Those rows, still held in
// the rings, are overwritten with NaN: the call's logits stay bit-identical.
// (From above, row independence shows that no query sees a later row of its
// own call; the reference logits show that every row inside the window is
// seen.)
func TestGemma4WindowMask(t *testing.T) {
	m, cases := loadGemma4Fixture(t)
	seq := cases[1].seq()
	const p, width = 40, 8
	run := func(poison bool) [][]float32 {
		cache, err := kv.New(m.Config().KV, width)
		if err != nil {
			t.Fatal(err)
		}
		for pos := 0; pos < p; pos += 4 {
			if _, err := m.Forward(context.Background(), seq[pos:pos+4], pos, cache, model.Argmax); err != nil {
				t.Fatal(err)
			}
			cache.Commit(4)
		}
		if poison {
			W := m.Arch().Window
			oldest := p - (W + width) + 1 // the ring holds the last W+width positions
			n := 0
			for layer, l := range m.Config().KV.Layers {
				if l.Window == 0 || !cache.Owns(layer) {
					continue
				}
				for pos := oldest; pos < p-W+1; pos++ {
					for _, row := range [][]float32{cache.K(layer, pos), cache.V(layer, pos)} {
						for i := range row {
							row[i] = float32(math.NaN())
						}
					}
					n++
				}
			}
			if n == 0 {
				t.Fatal("nothing poisoned")
			}
		}
		r, err := m.Forward(context.Background(), seq[p:p+width], p, cache, model.Logits)
		if err != nil {
			t.Fatal(err)
		}
		return r.Logits
	}
	clean, poisoned := run(false), run(true)
	for i := range clean {
		if !model.SameBits(clean[i], poisoned[i]) {
			t.Fatalf("query %d of the call at %d read a row outside its window", i, p)
		}
	}
}

// TestGemma4BF16 loads the fixture saved with BF16 weights (as real
// checkpoints are) and compares every position of the first case with
// transformers' fp32 logits from the same rounded weights. The weights are
// used in place: the matrices stay BF16.
func TestGemma4BF16(t *testing.T) {
	_, cases := loadGemma4Fixture(t)
	m, err := LoadGemma4(filepath.Join(gemma4Dir, "model-bf16"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if gate := m.layers[3].(*gemma4Layer).mlp.gate; m.embd.Type != gguf.BF16 || gate.Type != gguf.BF16 {
		t.Fatalf("weights are %s, %s, not BF16", m.embd.Type, gate.Type)
	}
	f, err := safetensors.Open(filepath.Join(gemma4Dir, "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti, ok := f.Tensor(cases[0].Name + ".bf16.logits")
	if !ok {
		t.Fatal("no BF16 reference logits")
	}
	raw, _ := f.TensorData(ti.Name)
	ref, err := safetensors.Float32s(ti, raw)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config().VocabSize
	got := decode(t, m, cases[0].seq(), 4, 8)
	if len(got)*V != len(ref) {
		t.Fatalf("%d positions, reference has %d", len(got), len(ref)/V)
	}
	worst := 0.0
	for p, row := range got {
		diff, scale := 0.0, 0.0
		for i, v := range row {
			diff = math.Max(diff, math.Abs(float64(v)-float64(ref[p*V+i])))
			scale = math.Max(scale, math.Abs(float64(ref[p*V+i])))
		}
		if rel := diff / scale; rel > 1e-4 || math.IsNaN(rel) {
			t.Fatalf("position %d: relative error %.2e", p, rel)
		} else {
			worst = math.Max(worst, rel)
		}
	}
	t.Logf("%d positions, worst relative error %.2e", len(got), worst)
}
