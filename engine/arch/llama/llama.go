// Package llama describes the llama architecture (stories260K, SmolLM2)
// independently of any backend: its Config read from GGUF metadata, the KV
// geometry (arch.Decoder's), the RoPE spec and the names and shapes of its
// weights (arch.Decoder's Globals and Block). A backend binds the weights
// and executes the layers; this package computes nothing per token.
//
// A llama layer:
//
//	n = RMSNorm(x)·attn_norm
//	q = rope(Wq·n), k = rope(Wk·n), v = Wv·n
//	x = x + Wo·softmax(q·kᵀ/sqrt(HeadDim))·v
//	x = x + Wdown·(SiLU(Wgate·m)·Wup·m),  m = RMSNorm(x)·ffn_norm
//
// on the embedding row as is (no scale), with logits
// Wout·RMSNorm(x)·output_norm (Wout the embedding when the file has no
// output.weight).
package llama

import (
	"math"

	"anechat/engine/arch"
	"anechat/engine/arch/rope"
)

// Name is the GGUF general.architecture of this package.
const Name = "llama"

// Config holds the hyper-parameters of a llama-architecture model: those
// every GGUF decoder has (arch.Decoder), RopeDim possibly below HeadDim.
type Config struct {
	arch.Decoder
}

// Metadata is what Parse reads: a GGUF file's keys and tensor directory
// (*gguf.File implements it).
type Metadata = arch.Metadata

// Parse reads the Config of a llama GGUF file (arch.ParseDecoder: RoPE
// base 10000 and epsilon 1e-5 when absent, a partial rotation allowed).
// Features this package does not describe (RoPE scaling, frequency
// factors) are errors naming the key or tensor, never silently ignored.
func Parse(f Metadata) (Config, error) {
	d, err := arch.ParseDecoder(f, Name, arch.Rules{RopeBase: 10000, Eps: 1e-5, PartialRope: true})
	if err != nil {
		return Config{}, err
	}
	return Config{Decoder: d}, nil
}

// Rope is the rotary embedding of every layer: adjacent pairs of the first
// RopeDim elements of each query and key head, base RopeBase, in float64.
func (o Config) Rope() rope.Spec {
	return rope.Spec{Layout: rope.Interleaved, Precision: rope.Float64, Dim: o.RopeDim, Pairs: o.RopeDim / 2,
		FreqDim: o.RopeDim, Theta: o.RopeBase}
}

// AttentionScale is the factor of the query·key scores: 1/sqrt(HeadDim).
func (o Config) AttentionScale() float32 { return float32(1 / math.Sqrt(float64(o.HeadDim))) }

// Layer names the tensors of one decoder layer: the common block, nothing
// more.
type Layer struct {
	arch.Block
}

// Layer returns the tensors of decoder layer i (blk.i.*).
func (o Config) Layer(i int) Layer { return Layer{Block: o.Block(i)} }
