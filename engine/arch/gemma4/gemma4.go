// Package gemma4 describes the gemma4 text architecture (Gemma 4 E2B and
// its relatives) for every backend and the converter: the Config parsed
// from a Hugging Face config.json, the layer plan (sliding and full
// attention layers with their own head dims, KV sharing, MLP widths), the
// KV geometry, the RoPE spec of each layer, the weight names, and the
// embedding, per-layer-input and logit rules. It computes no forward pass.
//
// A decoder layer, as transformers' Gemma4TextDecoderLayer:
//
//	n = RMSNorm(x)·input_layernorm
//	q = RMSNorm_head(Wq·n)·q_norm, rotated;  k = RMSNorm_head(Wk·n)·k_norm, rotated;  v = RMSNorm_head(Wv·n)
//	x = x + RMSNorm(Wo·softmax(q·kᵀ)·v)·post_attention_layernorm   (scale 1; KV-shared layers read their Source's k, v)
//	x = x + RMSNorm(Wdown·(GELUTanh(Wgate·m)·Wup·m))·post_feedforward_layernorm,  m = RMSNorm(x)·pre_feedforward_layernorm
//	x = x + RMSNorm(Wple_proj·(GELUTanh(Wple_gate·x)·ple_i))·post_per_layer_input_norm   (when PLEDim > 0)
//	x = x·layer_scalar
//
// with the embedding and per-layer inputs of Embedding and PerLayerInput,
// and logits Softcap·tanh(Wout·RMSNorm(x)·norm / Softcap).
package gemma4

import (
	"fmt"
	"math"

	"anechat/engine/arch"
	"anechat/engine/arch/rope"
	"anechat/engine/kv"
)

// Geometry is the KV cache layout of the model: per layer its KV heads and
// head dim, the window on sliding layers, and the layer whose rows a
// KV-shared layer reads.
func (o Config) Geometry() (kv.Geometry, error) {
	geo := kv.Geometry{Context: o.Context, Layers: make([]kv.LayerSpec, len(o.Layers))}
	for i, lo := range o.Layers {
		geo.Layers[i] = kv.LayerSpec{KVHeads: lo.KVHeads, HeadDim: lo.HeadDim, Source: lo.Source}
		if lo.Sliding {
			geo.Layers[i].Window = o.Window
		}
	}
	return geo, geo.Validate()
}

// Rope is the rotary embedding of the layer's query and key heads: split
// halves over the whole head, RopePairs of the HeadDim/2 pairs turning
// with exponents over HeadDim (proportional partial RoPE on full layers),
// computed in float32 as transformers does.
func (l Layer) Rope() rope.Spec {
	return rope.Spec{Layout: rope.Halves, Precision: rope.Float32, Dim: l.HeadDim, Pairs: l.RopePairs,
		FreqDim: l.HeadDim, Theta: l.RopeTheta}
}

// Ropes returns the distinct RoPE specs of the layers and, for each layer,
// the index of its spec: a backend builds one table per spec and position
// (Gemma 4 has two, the sliding and the full layers', but a
// per_layer_config may give layers of one kind different head dims).
func (o Config) Ropes() (specs []rope.Spec, ropeOf []int) {
	ropeOf = make([]int, len(o.Layers))
	for li, lo := range o.Layers {
		s := lo.Rope()
		j := 0
		for j < len(specs) && specs[j] != s {
			j++
		}
		if j == len(specs) {
			specs = append(specs, s)
		}
		ropeOf[li] = j
	}
	return specs, ropeOf
}

// AttentionScale is the factor of the query·key scores: 1 (the q and k
// norms take its place).
func (Config) AttentionScale() float32 { return 1 }

// EmbedScale multiplies every embedding row: sqrt(Hidden), rounded to
// float32 as the reference's buffer is.
func (o Config) EmbedScale() float32 { return float32(math.Sqrt(float64(o.Hidden))) }

// PLEScales are the constants of the per-layer inputs. For layer i of a
// token with embedding x (already scaled by EmbedScale):
//
//	ple_i = (RMSNorm(Proj·(W·x)_i)·per_layer_projection_norm + Emb·E_ple[id]_i) · Mix
//
// where (W·x)_i is slice i (PLEDim wide) of per_layer_model_projection·x
// and E_ple[id]_i slice i of the token's embed_tokens_per_layer row.
type PLEScales struct {
	Proj, Emb, Mix float32
}

// PLEScales returns 1/sqrt(Hidden), sqrt(PLEDim) and 1/sqrt(2), each
// rounded to float32.
func (o Config) PLEScales() PLEScales {
	return PLEScales{Proj: float32(1 / math.Sqrt(float64(o.Hidden))), Emb: float32(math.Sqrt(float64(o.PLEDim))),
		Mix: float32(1 / math.Sqrt2)}
}

// MaxWidths returns the widest query projection (Heads·HeadDim) and MLP of
// any layer: what a backend sizes its per-call buffers by.
func (o Config) MaxWidths() (q, ffn int) {
	for _, lo := range o.Layers {
		q, ffn = max(q, o.Heads*lo.HeadDim), max(ffn, lo.FFN)
	}
	return q, ffn
}

// Prefixes of the tensor names: text-only checkpoints (Gemma4ForCausalLM)
// name tensors "model.…", multimodal ones (Gemma4ForConditionalGeneration)
// "model.language_model.…". lm_head.weight, when present, has none.
const (
	TextPrefix       = "model."
	MultimodalPrefix = "model.language_model."
)

// Prefix returns the prefix of a checkpoint's tensor names: has reports
// whether the checkpoint holds a tensor.
func Prefix(has func(name string) bool) string {
	if has(MultimodalPrefix + "embed_tokens.weight") {
		return MultimodalPrefix
	}
	return TextPrefix
}

// Globals are the model-wide tensors.
type Globals struct {
	// Embed is the embedding (Vocab×Hidden); Out the output projection
	// (Embed itself when Tied); Norm the final norm.
	Embed, Out, Norm arch.Tensor
	// PLEEmbed (PLEVocab × layers·PLEDim), PLEProj (layers·PLEDim ×
	// Hidden) and PLENorm (PLEDim) make the per-layer inputs; zero when
	// PLEDim is 0.
	PLEEmbed, PLEProj, PLENorm arch.Tensor
}

// Globals names the model-wide tensors of a checkpoint whose names start
// with prefix (Prefix).
func (o Config) Globals(prefix string) Globals {
	H, L := o.Hidden, len(o.Layers)
	g := Globals{Embed: arch.Matrix(prefix+"embed_tokens.weight", o.Vocab, H), Norm: arch.Vector(prefix+"norm.weight", H)}
	g.Out = g.Embed
	if !o.Tied {
		g.Out = arch.Matrix("lm_head.weight", o.Vocab, H)
	}
	if o.PLEDim > 0 {
		g.PLEEmbed = arch.Matrix(prefix+"embed_tokens_per_layer.weight", o.PLEVocab, L*o.PLEDim)
		g.PLEProj = arch.Matrix(prefix+"per_layer_model_projection.weight", L*o.PLEDim, H)
		g.PLENorm = arch.Vector(prefix+"per_layer_projection_norm.weight", o.PLEDim)
	}
	return g
}

// LayerWeights names the tensors of one decoder layer. K, V and KNorm are
// zero on KV-shared layers (they read their Source's rows); the PLE ones
// when PLEDim is 0.
type LayerWeights struct {
	InNorm, PostAttnNorm, PreFFNorm, PostFFNorm arch.Tensor
	Q, K, V, O                                  arch.Tensor
	QNorm, KNorm                                arch.Tensor
	Gate, Up, Down                              arch.Tensor
	// PLEGate (PLEDim×Hidden), PLEProj (Hidden×PLEDim), PLEPostNorm.
	PLEGate, PLEProj, PLEPostNorm arch.Tensor
	// Scalar is the layer's output scale (1 element), a buffer that
	// transformers initialises to 1: checkpoints may lack it.
	Scalar arch.Tensor
}

// Layer names the tensors of decoder layer i of a checkpoint whose names
// start with prefix.
func (o Config) Layer(i int, prefix string) LayerWeights {
	lo, H, P := o.Layers[i], o.Hidden, o.PLEDim
	p := fmt.Sprintf("%slayers.%d.", prefix, i)
	qd, kvd := o.Heads*lo.HeadDim, lo.KVHeads*lo.HeadDim
	w := LayerWeights{
		InNorm: arch.Vector(p+"input_layernorm.weight", H), PostAttnNorm: arch.Vector(p+"post_attention_layernorm.weight", H),
		PreFFNorm: arch.Vector(p+"pre_feedforward_layernorm.weight", H), PostFFNorm: arch.Vector(p+"post_feedforward_layernorm.weight", H),
		QNorm: arch.Vector(p+"self_attn.q_norm.weight", lo.HeadDim),
		Q:     arch.Matrix(p+"self_attn.q_proj.weight", qd, H), O: arch.Matrix(p+"self_attn.o_proj.weight", H, qd),
		Gate: arch.Matrix(p+"mlp.gate_proj.weight", lo.FFN, H), Up: arch.Matrix(p+"mlp.up_proj.weight", lo.FFN, H),
		Down:   arch.Matrix(p+"mlp.down_proj.weight", H, lo.FFN),
		Scalar: arch.Vector(p+"layer_scalar", 1),
	}
	if lo.Source == i {
		w.K, w.V = arch.Matrix(p+"self_attn.k_proj.weight", kvd, H), arch.Matrix(p+"self_attn.v_proj.weight", kvd, H)
		w.KNorm = arch.Vector(p+"self_attn.k_norm.weight", lo.HeadDim)
	}
	if P > 0 {
		w.PLEGate, w.PLEProj = arch.Matrix(p+"per_layer_input_gate.weight", P, H), arch.Matrix(p+"per_layer_projection.weight", H, P)
		w.PLEPostNorm = arch.Vector(p+"post_per_layer_input_norm.weight", H)
	}
	return w
}

// E2B returns the text geometry of Gemma 4 E2B (docs/gemma4-on-ane.md) cut
// to the given number of layers and vocabulary, for benchmarks with random
// weights: full attention on every 5th layer, the last shared layers (20 of
// 35, scaled down in proportion) reusing the last owning layer of their
// kind, head dims 256/512, one KV head, MLP 6144 (12288 when shared), PLE
// 256, window 512, softcap 30. layers must be at least 5.
func E2B(layers, vocab int) Config {
	o := Config{Vocab: vocab, Hidden: 1536, Heads: 8, Eps: 1e-6, Window: 512, Softcap: 30,
		PLEDim: 256, PLEVocab: vocab, Context: 32768, Tied: true, BOS: 2, EOS: []int32{1, 106}}
	shared := layers * 20 / 35
	first := layers - shared
	last := map[bool]int{}
	for i := range layers {
		l := Layer{Sliding: i%5 != 4, KVHeads: 1, Source: i, FFN: 6144}
		if l.Sliding {
			l.HeadDim, l.RopeTheta, l.RopePairs = 256, 1e4, 128
		} else {
			l.HeadDim, l.RopeTheta, l.RopePairs = 512, 1e6, 64 // proportional, factor 0.25
		}
		if i < first {
			last[l.Sliding] = i
		} else if src, ok := last[l.Sliding]; ok {
			l.Source, l.FFN = src, 2*6144
		}
		o.Layers = append(o.Layers, l)
	}
	return o
}
