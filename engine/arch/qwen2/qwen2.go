// Package qwen2 describes the qwen2 architecture (Qwen 2 and Qwen 2.5) of
// GGUF files independently of any backend: its Config read from the
// metadata, the KV geometry (arch.Decoder's: every layer attends to the
// whole prefix), the RoPE spec and the names and shapes of its
// weights. A backend binds the weights and executes the layers; this
// package computes nothing per token.
//
// A qwen2 layer is the llama layer with biases on the query, key and value
// projections and the rotation of split halves (GGUF's NeoX RoPE: the
// converter does not permute Qwen's projections as it does llama's):
//
//	n = RMSNorm(x)·attn_norm
//	q = rope(Wq·n + bq), k = rope(Wk·n + bk), v = Wv·n + bv
//	x = x + Wo·softmax(q·kᵀ/sqrt(HeadDim))·v
//	x = x + Wdown·(SiLU(Wgate·m)·Wup·m),  m = RMSNorm(x)·ffn_norm
//
// with the embedding row used as is and logits Wout·RMSNorm(x)·output_norm
// (Wout the embedding when the file has no output.weight: Qwen 2.5 0.5B).
package qwen2

import (
	"fmt"
	"math"

	"anechat/engine/arch"
	"anechat/engine/arch/rope"
)

// Name is the GGUF general.architecture of this package.
const Name = "qwen2"

// Config holds the hyper-parameters of a qwen2 model.
type Config struct {
	arch.Decoder
}

// Parse reads the Config of a qwen2 GGUF file. Features this package does
// not describe (RoPE scaling, partial rotation) are errors naming the key.
func Parse(f arch.Metadata) (Config, error) {
	d, err := arch.ParseDecoder(f, Name, arch.Rules{RopeBase: 10000, Eps: 1e-6})
	if err != nil {
		return Config{}, err
	}
	return Config{Decoder: d}, nil
}

// Rope is the rotary embedding of every layer: split halves of the whole
// head (GGUF's NeoX layout), base RopeBase, in float64 (the project's GGUF
// convention, see package rope).
func (o Config) Rope() rope.Spec { return NeoX(o.HeadDim, o.RopeBase) }

// NeoX is the RoPE spec of split halves over a whole head of dim elements,
// base theta, in float64.
func NeoX(dim int, theta float64) rope.Spec {
	return rope.Spec{Layout: rope.Halves, Precision: rope.Float64, Dim: dim, Pairs: dim / 2, FreqDim: dim, Theta: theta}
}

// AttentionScale is the factor of the query·key scores: 1/sqrt(HeadDim).
func (o Config) AttentionScale() float32 { return float32(1 / math.Sqrt(float64(o.HeadDim))) }

// Layer names the tensors of one decoder layer: the common block and the
// projection biases.
type Layer struct {
	arch.Block
	QBias, KBias, VBias arch.Tensor
}

// Layer returns the tensors of decoder layer i (blk.i.*).
func (o Config) Layer(i int) Layer {
	p := fmt.Sprintf("blk.%d.", i)
	qd, kvd := o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	return Layer{Block: o.Block(i),
		QBias: arch.Vector(p+"attn_q.bias", qd), KBias: arch.Vector(p+"attn_k.bias", kvd), VBias: arch.Vector(p+"attn_v.bias", kvd)}
}
