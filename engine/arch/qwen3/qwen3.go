// Package qwen3 describes the qwen3 architecture (dense Qwen 3) of GGUF
// files independently of any backend: its Config read from the metadata,
// the KV geometry (arch.Decoder's), the RoPE spec and the names and shapes
// of its weights. A backend binds the weights and executes the layers;
// this package computes nothing per token.
//
// A qwen3 layer is the qwen2 layer without the projection biases (unless
// the file has them: attention_bias) and with an RMSNorm of every query and
// key head before the rotation:
//
//	n = RMSNorm(x)·attn_norm
//	q = rope(RMSNorm_head(Wq·n)·attn_q_norm), k = rope(RMSNorm_head(Wk·n)·attn_k_norm), v = Wv·n
//	x = x + Wo·softmax(q·kᵀ/sqrt(HeadDim))·v
//	x = x + Wdown·(SiLU(Wgate·m)·Wup·m),  m = RMSNorm(x)·ffn_norm
//
// The head dim is qwen3.attention.key_length, which need not be
// Hidden/Heads (Qwen 3 0.6B: 1024 hidden, 16 heads of 128).
package qwen3

import (
	"fmt"
	"math"

	"anechat/engine/arch"
	"anechat/engine/arch/qwen2"
	"anechat/engine/arch/rope"
)

// Name is the GGUF general.architecture of this package.
const Name = "qwen3"

// Config holds the hyper-parameters of a qwen3 model.
type Config struct {
	arch.Decoder
	// Bias is true when the projections have biases (blk.0.attn_q.bias is
	// in the file: a checkpoint with attention_bias).
	Bias bool
}

// Parse reads the Config of a qwen3 GGUF file. Features this package does
// not describe (RoPE scaling, partial rotation) are errors naming the key.
func Parse(f arch.Metadata) (Config, error) {
	d, err := arch.ParseDecoder(f, Name, arch.Rules{RopeBase: 10000, Eps: 1e-6})
	if err != nil {
		return Config{}, err
	}
	_, bias := f.Tensor("blk.0.attn_q.bias")
	return Config{Decoder: d, Bias: bias}, nil
}

// Rope is the rotary embedding of every layer: split halves of the whole
// head, base RopeBase, in float64.
func (o Config) Rope() rope.Spec { return qwen2.NeoX(o.HeadDim, o.RopeBase) }

// AttentionScale is the factor of the query·key scores: 1/sqrt(HeadDim).
func (o Config) AttentionScale() float32 { return float32(1 / math.Sqrt(float64(o.HeadDim))) }

// Layer names the tensors of one decoder layer: the common block, the
// per-head query and key norms, and the biases when Bias (zero Tensors
// otherwise).
type Layer struct {
	arch.Block
	QNorm, KNorm        arch.Tensor
	QBias, KBias, VBias arch.Tensor
}

// Layer returns the tensors of decoder layer i (blk.i.*).
func (o Config) Layer(i int) Layer {
	p := fmt.Sprintf("blk.%d.", i)
	l := Layer{Block: o.Block(i),
		QNorm: arch.Vector(p+"attn_q_norm.weight", o.HeadDim), KNorm: arch.Vector(p+"attn_k_norm.weight", o.HeadDim)}
	if o.Bias {
		qd, kvd := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
		l.QBias, l.KBias, l.VBias = arch.Vector(p+"attn_q.bias", qd), arch.Vector(p+"attn_k.bias", kvd), arch.Vector(p+"attn_v.bias", kvd)
	}
	return l
}
