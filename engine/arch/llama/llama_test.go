package llama

import (
	"strings"
	"testing"

	"anechat/engine/arch"
	"anechat/engine/arch/rope"
	"anechat/engine/model/gguf"
	"anechat/internal/testres"
)

func open(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestWeightNames: on stories260K (own output) and SmolLM2 (tied), the
// tensors Globals and Layer name are exactly the file's, each of the
// described shape (GGUF dims [cols, rows]).
func TestWeightNames(t *testing.T) {
	for name, path := range map[string]func(testing.TB) string{"stories260K": testres.Stories, "smollm2": testres.SmolLM2GGUF} {
		t.Run(name, func(t *testing.T) {
			f := open(t, path(t))
			o, err := Parse(f)
			if err != nil {
				t.Fatal(err)
			}
			if o.Tied != (name == "smollm2") {
				t.Errorf("Tied = %v", o.Tied)
			}
			described := map[string]bool{}
			check := func(tn arch.Tensor) {
				ti, ok := f.Tensor(tn.Name)
				if !ok {
					t.Errorf("%s: not in the file", tn.Name)
					return
				}
				described[tn.Name] = true
				want := []int{tn.Cols, tn.Rows}
				if tn.Vector() {
					want = want[:1]
				}
				if len(ti.Dims) != len(want) || ti.Dims[0] != want[0] || (len(want) == 2 && ti.Dims[1] != want[1]) {
					t.Errorf("%s: dims %v, described %v", tn.Name, ti.Dims, want)
				}
			}
			embd, out, norm := o.Globals()
			check(embd)
			check(out)
			check(norm)
			for i := range o.Layers {
				w := o.Layer(i)
				for _, tn := range []arch.Tensor{w.AttnNorm, w.FFNNorm, w.Q, w.K, w.V, w.O, w.Gate, w.Up, w.Down} {
					check(tn)
				}
			}
			for _, ti := range f.Tensors() {
				if !described[ti.Name] {
					t.Errorf("file tensor %s is not described", ti.Name)
				}
			}
			geo := o.Geometry()
			if err := geo.Validate(); err != nil || len(geo.Layers) != o.Layers || geo.Context != o.Context {
				t.Errorf("geometry %+v: %v", geo, err)
			}
			if r := o.Rope(); r.Validate() != nil || r.Layout != rope.Interleaved || r.Dim != o.RopeDim || r.Theta != o.RopeBase {
				t.Errorf("rope %+v", r)
			}
		})
	}
}

// TestParseErrors: a file that is not llama, uses RoPE scaling or names a
// token id outside its vocabulary fails naming the file and the key.
func TestParseErrors(t *testing.T) {
	build := func(set map[string]any) *gguf.File {
		keys := map[string]any{"general.architecture": "llama"}
		for _, k := range []string{"llama.embedding_length", "llama.feed_forward_length", "llama.block_count", "llama.context_length"} {
			keys[k] = uint32(8)
		}
		keys["llama.attention.head_count"] = uint32(4)
		for k, v := range set {
			keys[k] = v
		}
		w := gguf.NewWriter()
		for k, v := range keys {
			w.Set(k, v)
		}
		w.AddF32("token_embd.weight", []int{8, 16}, make([]float32, 128))
		data, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse("x.gguf", data)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if o, err := Parse(build(nil)); err != nil || o.Vocab != 16 || o.HeadDim != 2 || o.RopeDim != 2 || o.BOS != -1 {
		t.Fatalf("minimal file: %+v, %v", o, err)
	}
	for name, tc := range map[string]struct {
		set  map[string]any
		want string
	}{
		"arch":    {map[string]any{"general.architecture": "gemma"}, `"gemma" is not llama`},
		"scaling": {map[string]any{"llama.rope.scaling.type": "linear"}, "llama.rope.scaling.type"},
		"kv":      {map[string]any{"llama.attention.head_count_kv": uint32(3)}, "inconsistent"},
		"range":   {map[string]any{"llama.block_count": uint32(0)}, "llama.block_count = 0"},
		"bos":     {map[string]any{"tokenizer.ggml.bos_token_id": uint32(16)}, "tokenizer.ggml.bos_token_id"},
		"eot":     {map[string]any{"tokenizer.ggml.eot_token_id": uint32(99)}, "tokenizer.ggml.eot_token_id"},
		"rope":    {map[string]any{"llama.rope.dimension_count": uint32(3)}, "llama.rope.dimension_count = 3"},
	} {
		_, err := Parse(build(tc.set))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "x.gguf") {
			t.Errorf("%s: error %v, want one naming x.gguf and %q", name, err, tc.want)
		}
	}
}
