// Package gemma3 describes the gemma3 text architecture (Gemma 3 270M, 1B,
// 4B, 12B, 27B) of GGUF files independently of any backend: its Config
// read from the metadata, the layer plan (sliding and global attention
// layers), the KV geometry, the RoPE spec of each layer kind, the weight
// names, and the embedding and logit rules. It computes no forward pass.
//
// A decoder layer, as transformers' Gemma3DecoderLayer:
//
//	n = RMSNorm(x)·attn_norm
//	q = rope(RMSNorm_head(Wq·n)·attn_q_norm), k = rope(RMSNorm_head(Wk·n)·attn_k_norm), v = Wv·n
//	x = x + RMSNorm(Wo·softmax(QueryScale·q·kᵀ)·v)·post_attention_norm
//	x = x + RMSNorm(Wdown·(GELUTanh(Wgate·m)·Wup·m))·post_ffw_norm,  m = RMSNorm(x)·ffn_norm
//
// on the embedding row times sqrt(Hidden), with logits
// Wout·RMSNorm(x)·output_norm (Wout the embedding: Gemma ties them), soft-
// capped when the file says so. Transformers' Gemma3RMSNorm multiplies by
// (1 + weight); llama.cpp's converter stores 1 + weight in the GGUF, so
// every norm here is a plain RMSNorm by the stored vector.
//
// Sliding layers attend to the last Window positions and rotate with base
// LocalBase (10 000); every Pattern-th layer (6: layers 5, 11, 17, …) is
// global, attending to the whole prefix with base RopeBase (1 000 000).
// Gemma 3 has no attention-logit softcapping (Gemma 2 had); a file that
// declares one is refused.
package gemma3

import (
	"fmt"
	"math"

	"anechat/engine/arch"
	"anechat/engine/arch/qwen2"
	"anechat/engine/arch/rope"
	"anechat/engine/kv"
)

// Name is the GGUF general.architecture of this package.
const Name = "gemma3"

// Config holds the hyper-parameters of a gemma3 model.
type Config struct {
	arch.Decoder
	// Window is the sliding window of the sliding layers (0: every layer
	// is global, the file has no gemma3.attention.sliding_window).
	Window int
	// Sliding says, per layer, whether it is a sliding layer.
	Sliding []bool
	// LocalBase is the RoPE base of the sliding layers
	// (gemma3.rope.freq_base_swa, 10 000 when absent); RopeBase is the
	// global layers'.
	LocalBase float64
	// QueryScale multiplies the query·key scores: 1/sqrt of transformers'
	// query_pre_attn_scalar, which the GGUF does not store; llama.cpp
	// derives it as 1/sqrt(HeadDim), except for the 62-layer 27B model
	// (1/sqrt(Hidden/Heads)), and so does Parse.
	QueryScale float32
	// Softcap caps the logits, Softcap·tanh(z/Softcap), when positive
	// (gemma3.final_logit_softcapping; Gemma 3's checkpoints have none).
	Softcap float32
}

// DefaultPattern is the layer pattern when the file gives none: five
// sliding layers, then a global one.
const DefaultPattern = 6

// Parse reads the Config of a gemma3 GGUF file. Features this package does
// not describe (RoPE scaling, attention softcapping) are errors naming the
// key.
func Parse(f arch.Metadata) (Config, error) {
	d, err := arch.ParseDecoder(f, Name, arch.Rules{RopeBase: 10000, Eps: 1e-6})
	if err != nil {
		return Config{}, err
	}
	o := Config{Decoder: d, LocalBase: 10000, Sliding: make([]bool, d.Layers)}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("gemma3: %s: %s", f.Path(), fmt.Sprintf(format, args...))
	}
	if _, ok := f.Value(d.Key("attention.logit_softcapping")); ok {
		return Config{}, fail("%s is not supported (Gemma 3 has no attention softcapping)", d.Key("attention.logit_softcapping"))
	}
	if _, ok := f.Value(d.Key("final_logit_softcapping")); ok {
		if o.Softcap, err = f.Float32(d.Key("final_logit_softcapping")); err != nil {
			return Config{}, fmt.Errorf("gemma3: %w", err)
		}
		if o.Softcap < 0 || math.IsInf(float64(o.Softcap), 0) || o.Softcap != o.Softcap {
			return Config{}, fail("%s = %g must be positive", d.Key("final_logit_softcapping"), o.Softcap)
		}
	}
	if _, ok := f.Value(d.Key("rope.freq_base_swa")); ok {
		b, err := f.Float32(d.Key("rope.freq_base_swa"))
		if err != nil {
			return Config{}, fmt.Errorf("gemma3: %w", err)
		}
		if !(b > 0) {
			return Config{}, fail("%s = %g must be positive", d.Key("rope.freq_base_swa"), b)
		}
		o.LocalBase = float64(b)
	}
	if _, ok := f.Value(d.Key("attention.sliding_window")); ok {
		if o.Window, err = f.Int(d.Key("attention.sliding_window")); err != nil {
			return Config{}, fmt.Errorf("gemma3: %w", err)
		}
		if o.Window <= 0 || o.Window > 1<<24 {
			return Config{}, fail("%s = %d is out of range", d.Key("attention.sliding_window"), o.Window)
		}
		if o.Sliding, err = pattern(f, d); err != nil {
			return Config{}, err
		}
	}
	hd := d.HeadDim
	if d.Layers == 62 {
		hd = d.Hidden / d.Heads
	}
	o.QueryScale = float32(1 / math.Sqrt(float64(hd)))
	return o, nil
}

// pattern reads which layers slide: gemma3.attention.sliding_window_pattern
// is either a period n (layer i slides unless i%n == n-1; 0: every layer
// slides) or one bool per layer; absent, the period is DefaultPattern.
func pattern(f arch.Metadata, d arch.Decoder) ([]bool, error) {
	key := d.Key("attention.sliding_window_pattern")
	s := make([]bool, d.Layers)
	v, ok := f.Value(key)
	if bs, isArr := v.([]bool); ok && isArr {
		if len(bs) != d.Layers {
			return nil, fmt.Errorf("gemma3: %s: %s has %d entries for %d layers", f.Path(), key, len(bs), d.Layers)
		}
		copy(s, bs)
		return s, nil
	}
	n := DefaultPattern
	if ok {
		var err error
		if n, err = f.Int(key); err != nil {
			return nil, fmt.Errorf("gemma3: %w", err)
		}
		if n < 0 || n > d.Layers+1 {
			return nil, fmt.Errorf("gemma3: %s: %s = %d is out of range", f.Path(), key, n)
		}
	}
	for i := range s {
		s[i] = n == 0 || i%n < n-1
	}
	return s, nil
}

// Geometry is the KV cache layout: every layer owns its rows, KVHeads
// heads of HeadDim; sliding layers keep a window of Window rows.
func (o Config) Geometry() kv.Geometry {
	geo := o.Decoder.Geometry()
	for i := range geo.Layers {
		if o.Sliding[i] {
			geo.Layers[i].Window = o.Window
		}
	}
	return geo
}

// Rope is the rotary embedding of layer i's query and key heads: split
// halves of the whole head (GGUF's NeoX layout) in float64, base LocalBase
// on sliding layers and RopeBase on global ones.
func (o Config) Rope(i int) rope.Spec {
	global, local := o.Ropes()
	if o.Sliding[i] {
		return local
	}
	return global
}

// Ropes returns the two RoPE specs, the global layers' and the sliding
// layers': a backend builds one table of each per call.
func (o Config) Ropes() (global, local rope.Spec) {
	return qwen2.NeoX(o.HeadDim, o.RopeBase), qwen2.NeoX(o.HeadDim, o.LocalBase)
}

// EmbedScale multiplies every embedding row: sqrt(Hidden) rounded to
// float32, as llama.cpp scales its float32 rows (transformers rounds it to
// the weights' dtype, float32 for a dequantised GGUF).
func (o Config) EmbedScale() float32 { return float32(math.Sqrt(float64(o.Hidden))) }

// Layer names the tensors of one decoder layer: the common block, the
// per-head query and key norms and the norms of the two blocks' outputs.
type Layer struct {
	arch.Block
	QNorm, KNorm             arch.Tensor
	PostAttnNorm, PostFFNorm arch.Tensor
}

// Layer returns the tensors of decoder layer i (blk.i.*).
func (o Config) Layer(i int) Layer {
	p := fmt.Sprintf("blk.%d.", i)
	return Layer{Block: o.Block(i),
		QNorm: arch.Vector(p+"attn_q_norm.weight", o.HeadDim), KNorm: arch.Vector(p+"attn_k_norm.weight", o.HeadDim),
		PostAttnNorm: arch.Vector(p+"post_attention_norm.weight", o.Hidden), PostFFNorm: arch.Vector(p+"post_ffw_norm.weight", o.Hidden)}
}
