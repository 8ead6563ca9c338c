// Package llama describes the llama architecture (stories260K, SmolLM2)
// independently of any backend: its Config read from GGUF metadata, the KV
// geometry, the RoPE spec and the names and shapes of its weights. A
// backend binds the weights and executes the layers; this package computes
// nothing per token.
//
// A llama layer is: h = x + Wo·attn(rope(Wq·n), rope(Wk·n), Wv·n) with
// n = RMSNorm(x)·attn_norm, then x' = h + Wdown·(SiLU(Wgate·m)·Wup·m) with
// m = RMSNorm(h)·ffn_norm; the embedding row is used as is (no scale), and
// the logits are Wout·RMSNorm(x)·output_norm (Wout the embedding when the
// file has no output.weight).
package llama

import (
	"fmt"
	"math"

	"anechat/engine/arch"
	"anechat/engine/arch/rope"
	"anechat/engine/kv"
)

// Config holds the hyper-parameters of a llama-architecture model.
type Config struct {
	Hidden, FFN, Layers int
	Heads, KVHeads      int
	// HeadDim is Hidden/Heads; RopeDim how many of its leading elements
	// rotate (llama.rope.dimension_count, default HeadDim).
	HeadDim, RopeDim int
	RopeBase         float64
	Eps              float32
	Vocab, Context   int
	// Tied is true when the file has no output.weight: the logits use the
	// embedding table (SmolLM2).
	Tied bool
	// BOS is the beginning-of-sequence id (-1: none); EOS the ids that end
	// generation (tokenizer.ggml.eos_token_id, then eot_token_id).
	BOS int32
	EOS []int32
}

// Metadata is what Parse reads: a GGUF file's keys and tensor directory
// (*gguf.File implements it).
type Metadata = arch.Metadata

// Parse reads the Config of a llama GGUF file. Features this package does
// not describe (RoPE scaling, frequency factors) are errors naming the key
// or tensor, never silently ignored.
func Parse(f Metadata) (Config, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return Config{}, fmt.Errorf("llama: %w", err)
	}
	if arch != "llama" {
		return Config{}, fmt.Errorf("llama: %s: architecture %q is not llama", f.Path(), arch)
	}
	var o Config
	for _, p := range []struct {
		key string
		dst *int
	}{
		{"llama.embedding_length", &o.Hidden}, {"llama.feed_forward_length", &o.FFN},
		{"llama.block_count", &o.Layers}, {"llama.attention.head_count", &o.Heads},
		{"llama.context_length", &o.Context},
	} {
		if *p.dst, err = f.Int(p.key); err != nil {
			return Config{}, fmt.Errorf("llama: %w", err)
		}
		if *p.dst <= 0 || *p.dst > 1<<24 {
			return Config{}, fmt.Errorf("llama: %s: %s = %d is out of range", f.Path(), p.key, *p.dst)
		}
	}
	o.KVHeads = o.Heads
	if _, ok := f.Value("llama.attention.head_count_kv"); ok {
		if o.KVHeads, err = f.Int("llama.attention.head_count_kv"); err != nil {
			return Config{}, fmt.Errorf("llama: %w", err)
		}
	}
	if o.KVHeads <= 0 || o.Heads%o.KVHeads != 0 || o.Hidden%o.Heads != 0 {
		return Config{}, fmt.Errorf("llama: %s: %d heads, %d kv heads, hidden %d are inconsistent", f.Path(), o.Heads, o.KVHeads, o.Hidden)
	}
	o.HeadDim = o.Hidden / o.Heads
	o.RopeDim = o.HeadDim
	if _, ok := f.Value("llama.rope.dimension_count"); ok {
		if o.RopeDim, err = f.Int("llama.rope.dimension_count"); err != nil {
			return Config{}, fmt.Errorf("llama: %w", err)
		}
		if o.RopeDim <= 0 || o.RopeDim > o.HeadDim || o.RopeDim%2 != 0 {
			return Config{}, fmt.Errorf("llama: %s: rope dimension %d must be even and at most the head dim %d", f.Path(), o.RopeDim, o.HeadDim)
		}
	}
	o.RopeBase = 10000
	if _, ok := f.Value("llama.rope.freq_base"); ok {
		b, err := f.Float32("llama.rope.freq_base")
		if err != nil {
			return Config{}, fmt.Errorf("llama: %w", err)
		}
		o.RopeBase = float64(b)
	}
	if _, ok := f.Value("llama.rope.scaling.type"); ok {
		return Config{}, fmt.Errorf("llama: %s: llama.rope.scaling.type is not supported", f.Path())
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		return Config{}, fmt.Errorf("llama: %s: tensor \"rope_freqs.weight\" (rope frequency factors) is not supported", f.Path())
	}
	o.Eps = 1e-5
	if _, ok := f.Value("llama.attention.layer_norm_rms_epsilon"); ok {
		if o.Eps, err = f.Float32("llama.attention.layer_norm_rms_epsilon"); err != nil {
			return Config{}, fmt.Errorf("llama: %w", err)
		}
	}
	ti, ok := f.Tensor(TokenEmbd)
	if !ok || len(ti.Dims) != 2 {
		return Config{}, fmt.Errorf("llama: %s: missing or malformed tensor %q", f.Path(), TokenEmbd)
	}
	o.Vocab = ti.Dims[1]
	_, hasOut := f.Tensor(Output)
	o.Tied = !hasOut
	// Token ids the vocabulary does not have are damage, not "none":
	// dropping them would start without BOS or never stop.
	if o.BOS, err = f.TokenID("tokenizer.ggml.bos_token_id", o.Vocab); err != nil {
		return Config{}, fmt.Errorf("llama: %w", err)
	}
	for _, key := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"} {
		id, err := f.TokenID(key, o.Vocab)
		if err != nil {
			return Config{}, fmt.Errorf("llama: %w", err)
		}
		if id >= 0 && !containsID(o.EOS, id) {
			o.EOS = append(o.EOS, id)
		}
	}
	return o, nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// Geometry is the KV cache layout: every layer owns its rows, KVHeads
// heads of HeadDim, no window.
func (o Config) Geometry() kv.Geometry {
	geo := kv.Geometry{Context: o.Context, Layers: make([]kv.LayerSpec, o.Layers)}
	for i := range geo.Layers {
		geo.Layers[i] = kv.LayerSpec{KVHeads: o.KVHeads, HeadDim: o.HeadDim, Source: i}
	}
	return geo
}

// Rope is the rotary embedding of every layer: adjacent pairs of the first
// RopeDim elements of each query and key head, base RopeBase, in float64.
func (o Config) Rope() rope.Spec {
	return rope.Spec{Layout: rope.Interleaved, Precision: rope.Float64, Dim: o.RopeDim, Pairs: o.RopeDim / 2,
		FreqDim: o.RopeDim, Theta: o.RopeBase}
}

// AttentionScale is the factor of the query·key scores: 1/sqrt(HeadDim).
func (o Config) AttentionScale() float32 { return float32(1 / math.Sqrt(float64(o.HeadDim))) }

// The names of the model-wide tensors.
const (
	TokenEmbd  = "token_embd.weight"
	Output     = "output.weight"
	OutputNorm = "output_norm.weight"
)

// Tensor names a weight and its shape (GGUF dims [Cols, Rows]).
type Tensor = arch.Tensor

// Globals are the model-wide tensors: the embedding (Vocab×Hidden), the
// output projection (the embedding itself when Tied) and the final norm.
func (o Config) Globals() (embd, out, norm Tensor) {
	embd = arch.Matrix(TokenEmbd, o.Vocab, o.Hidden)
	out = embd
	if !o.Tied {
		out = arch.Matrix(Output, o.Vocab, o.Hidden)
	}
	return embd, out, arch.Vector(OutputNorm, o.Hidden)
}

// Layer names the tensors of decoder layer i.
type Layer struct {
	AttnNorm, FFNNorm Tensor
	Q, K, V, O        Tensor
	Gate, Up, Down    Tensor
}

// Layer returns the tensors of decoder layer i (blk.i.*).
func (o Config) Layer(i int) Layer {
	p := fmt.Sprintf("blk.%d.", i)
	qd, kvd := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	return Layer{
		AttnNorm: arch.Vector(p+"attn_norm.weight", o.Hidden), FFNNorm: arch.Vector(p+"ffn_norm.weight", o.Hidden),
		Q: arch.Matrix(p+"attn_q.weight", qd, o.Hidden), K: arch.Matrix(p+"attn_k.weight", kvd, o.Hidden),
		V: arch.Matrix(p+"attn_v.weight", kvd, o.Hidden), O: arch.Matrix(p+"attn_output.weight", o.Hidden, qd),
		Gate: arch.Matrix(p+"ffn_gate.weight", o.FFN, o.Hidden), Up: arch.Matrix(p+"ffn_up.weight", o.FFN, o.Hidden),
		Down: arch.Matrix(p+"ffn_down.weight", o.Hidden, o.FFN),
	}
}
