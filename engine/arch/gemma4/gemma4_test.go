package gemma4

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"anechat/engine/arch"
	"anechat/engine/arch/rope"
	"anechat/engine/kv"
	"anechat/engine/model/safetensors"
)

// fixture is the tiny gemma4 checkpoint engine/cpu/testdata/gemma4/gen.py
// writes with transformers (every feature on: KV sharing, PLE, per-layer
// head dims, proportional RoPE).
const fixture = "../../cpu/testdata/gemma4/model"

func parseFixture(t *testing.T) Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixture, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := ParseConfig("config.json", data)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestWeightNames: the tensors Globals and Layer name are exactly the
// tensors of the transformers checkpoint (none missing, none left over,
// each of the shape described), so the description is the checkpoint's.
func TestWeightNames(t *testing.T) {
	o := parseFixture(t)
	d, err := safetensors.OpenDir(fixture)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	has := func(name string) bool { _, ok := d.Tensor(name); return ok }
	prefix := Prefix(has)
	if prefix != TextPrefix {
		t.Fatalf("prefix %q, want %q", prefix, TextPrefix)
	}
	described := map[string]bool{}
	check := func(tn arch.Tensor, optional bool) {
		if tn.Name == "" {
			return
		}
		ti, ok := d.Tensor(tn.Name)
		if !ok {
			if !optional {
				t.Errorf("%s: not in the checkpoint", tn.Name)
			}
			return
		}
		described[tn.Name] = true
		want := []int{tn.Rows, tn.Cols}
		if tn.Vector() {
			want = []int{tn.Cols}
		}
		if !slices.Equal(ti.Shape, want) {
			t.Errorf("%s: shape %v, described %v", tn.Name, ti.Shape, want)
		}
	}
	g := o.Globals(prefix)
	for _, tn := range []arch.Tensor{g.Embed, g.Out, g.Norm, g.PLEEmbed, g.PLEProj, g.PLENorm} {
		check(tn, false)
	}
	for i := range o.Layers {
		w := o.Layer(i, prefix)
		shared := o.Layers[i].Source != i
		if shared != (w.K.Name == "" && w.V.Name == "" && w.KNorm.Name == "") {
			t.Errorf("layer %d: shared %v but K %q V %q KNorm %q", i, shared, w.K.Name, w.V.Name, w.KNorm.Name)
		}
		for _, tn := range []arch.Tensor{w.InNorm, w.PostAttnNorm, w.PreFFNorm, w.PostFFNorm, w.Q, w.K, w.V, w.O,
			w.QNorm, w.KNorm, w.Gate, w.Up, w.Down, w.PLEGate, w.PLEProj, w.PLEPostNorm} {
			check(tn, false)
		}
		check(w.Scalar, true)
	}
	for _, ti := range d.Tensors() {
		if !described[ti.Name] {
			t.Errorf("checkpoint tensor %s is not described", ti.Name)
		}
	}
	if Prefix(func(n string) bool { return n == MultimodalPrefix+"embed_tokens.weight" }) != MultimodalPrefix {
		t.Error("a multimodal checkpoint's prefix is not recognised")
	}
}

// TestRopesPerLayerShape: every layer gets the spec of its own head dim,
// rotated pairs and base, also when a per_layer_config gives two layers of
// one kind different head dims (a table per kind would rotate the second
// layer's heads with the first's, across head boundaries).
func TestRopesPerLayerShape(t *testing.T) {
	o := Config{Layers: []Layer{
		{Sliding: true, HeadDim: 16, RopeTheta: 1e4, RopePairs: 8},
		{Sliding: false, HeadDim: 32, RopeTheta: 1e6, RopePairs: 4},
		{Sliding: true, HeadDim: 8, RopeTheta: 1e4, RopePairs: 4},
		{Sliding: true, HeadDim: 16, RopeTheta: 1e4, RopePairs: 8},
		{Sliding: false, HeadDim: 32, RopeTheta: 1e6, RopePairs: 4},
	}}
	specs, ropeOf := o.Ropes()
	if len(specs) != 3 || ropeOf[0] != ropeOf[3] || ropeOf[1] != ropeOf[4] || ropeOf[0] == ropeOf[2] {
		t.Fatalf("%d specs, layer -> spec %v; want 3, layers 0 and 3 and layers 1 and 4 sharing", len(specs), ropeOf)
	}
	for li, l := range o.Layers {
		s := specs[ropeOf[li]]
		want := rope.Spec{Layout: rope.Halves, Precision: rope.Float32, Dim: l.HeadDim, Pairs: l.RopePairs, FreqDim: l.HeadDim, Theta: l.RopeTheta}
		if s != want {
			t.Errorf("layer %d: spec %+v, want %+v", li, s, want)
		}
	}
}

// TestFixtureConfig: the fixture's plan as gen.py made it (KV sharing from
// layer 3, double-wide MLPs there, 16/32 head dims, proportional RoPE of 4
// pairs on full layers) and its geometry.
func TestFixtureConfig(t *testing.T) {
	o := parseFixture(t)
	want := []Layer{
		{Sliding: true, HeadDim: 16, KVHeads: 2, Source: 0, FFN: 96, RopeTheta: 1e4, RopePairs: 8},
		{Sliding: true, HeadDim: 16, KVHeads: 2, Source: 1, FFN: 96, RopeTheta: 1e4, RopePairs: 8},
		{Sliding: false, HeadDim: 32, KVHeads: 2, Source: 2, FFN: 96, RopeTheta: 1e6, RopePairs: 4},
		{Sliding: true, HeadDim: 16, KVHeads: 2, Source: 1, FFN: 192, RopeTheta: 1e4, RopePairs: 8},
		{Sliding: true, HeadDim: 16, KVHeads: 2, Source: 1, FFN: 192, RopeTheta: 1e4, RopePairs: 8},
		{Sliding: false, HeadDim: 32, KVHeads: 2, Source: 2, FFN: 192, RopeTheta: 1e6, RopePairs: 4},
	}
	if !slices.Equal(o.Layers, want) {
		t.Errorf("layers =\n%v\nwant\n%v", o.Layers, want)
	}
	geo, err := o.Geometry()
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range geo.Layers {
		w := 0
		if want[i].Sliding {
			w = 8
		}
		if (l != kv.LayerSpec{KVHeads: 2, HeadDim: want[i].HeadDim, Source: want[i].Source, Window: w}) {
			t.Errorf("KV layer %d = %+v", i, l)
		}
	}
	if q, ffn := o.MaxWidths(); q != 4*32 || ffn != 192 {
		t.Errorf("MaxWidths = %d, %d", q, ffn)
	}
	if k := o.PLEScales(); k.Emb != 4 || k.Proj != float32(1/8.0) || k.Mix != float32(0.7071067811865476) {
		t.Errorf("PLE scales %+v", k)
	}
	if o.EmbedScale() != 8 {
		t.Errorf("embed scale %v, want sqrt(64)", o.EmbedScale())
	}
}

// TestE2B checks E2B(35, …) against the published facts
// (docs/gemma4-on-ane.md): full attention on layers 4, 9, …, 34; layers 15-34
// KV-shared, reading layer 13 (sliding) or 14 (full); MLP 12288 on them.
func TestE2B(t *testing.T) {
	o := E2B(35, 262144)
	if len(o.Layers) != 35 {
		t.Fatalf("%d layers", len(o.Layers))
	}
	for i, l := range o.Layers {
		full := i%5 == 4
		src, ffn := i, 6144
		if i >= 15 {
			src, ffn = 13, 12288
			if full {
				src = 14
			}
		}
		hd, pairs := 256, 128
		if full {
			hd, pairs = 512, 64
		}
		if l.Sliding == full || l.Source != src || l.FFN != ffn || l.HeadDim != hd || l.RopePairs != pairs || l.KVHeads != 1 {
			t.Errorf("layer %d = %+v", i, l)
		}
	}
	if _, err := o.Geometry(); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseConfig: any config.json bytes either fail or give a
// geometry the KV cache accepts, with every KV-shared layer reading an
// earlier owning layer of its own kind.
func FuzzParseConfig(f *testing.F) {
	data, err := os.ReadFile(filepath.Join(fixture, "config.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"model_type":"gemma4","text_config":{"model_type":"gemma4_text"}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := ParseConfig("config.json", data)
		if err != nil {
			if !strings.Contains(err.Error(), "config.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		geo := kv.Geometry{Context: o.Context}
		for i, l := range o.Layers {
			if l.Source > i || o.Layers[l.Source].Sliding != l.Sliding || o.Layers[l.Source].Source != l.Source {
				t.Fatalf("layer %d reads layer %d", i, l.Source)
			}
			if l.RopePairs < 0 || l.RopePairs > l.HeadDim/2 || o.Heads%l.KVHeads != 0 {
				t.Fatalf("layer %d: %+v", i, l)
			}
			spec := kv.LayerSpec{KVHeads: l.KVHeads, HeadDim: l.HeadDim, Source: l.Source}
			if l.Sliding {
				spec.Window = o.Window
			}
			geo.Layers = append(geo.Layers, spec)
		}
		if err := geo.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}
