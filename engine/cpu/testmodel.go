package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"anechat/engine/arch"
	"anechat/engine/model/gguf"
)

// RandomLlama encodes a llama-architecture GGUF file with random weights of
// the given geometry (Hidden, FFN, Layers, Heads, KVHeads, Vocab, Context;
// RopeDim, RopeBase and Eps when set), matrices stored as typ (norms and embeddings F32 unless
// typ is quantised, in which case the embedding uses typ as well). It exists
// for tests and benchmarks (row independence, memory-bound speed) where no
// real model of the right shape is at hand. Deterministic in seed.
func RandomLlama(o arch.Decoder, typ gguf.Type, seed uint64) ([]byte, error) {
	if o.Hidden%o.Heads != 0 || o.Heads%o.KVHeads != 0 {
		return nil, fmt.Errorf("cpu: random llama: inconsistent heads")
	}
	hd := o.Hidden / o.Heads
	if o.RopeDim == 0 {
		o.RopeDim = hd
	}
	if o.RopeBase == 0 {
		o.RopeBase = 10000
	}
	if o.Eps == 0 {
		o.Eps = 1e-5
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := gguf.NewWriter()
	w.Set("general.architecture", "llama")
	w.Set("llama.embedding_length", uint32(o.Hidden))
	w.Set("llama.feed_forward_length", uint32(o.FFN))
	w.Set("llama.block_count", uint32(o.Layers))
	w.Set("llama.attention.head_count", uint32(o.Heads))
	w.Set("llama.attention.head_count_kv", uint32(o.KVHeads))
	w.Set("llama.rope.dimension_count", uint32(o.RopeDim))
	w.Set("llama.rope.freq_base", float32(o.RopeBase))
	w.Set("llama.context_length", uint32(o.Context))
	w.Set("llama.attention.layer_norm_rms_epsilon", o.Eps)
	w.Set("tokenizer.ggml.bos_token_id", uint32(1))
	w.Set("tokenizer.ggml.eos_token_id", uint32(2))
	var err error
	mat := func(name string, rows, cols int, t gguf.Type) {
		if err != nil {
			return
		}
		scale := float32(1 / math.Sqrt(float64(cols)))
		if integerType(t) {
			// Random blocks straight away: quantising normal samples is too
			// slow for the benchmark's half-gigabyte models.
			w.AddTensor(name, t, []int{cols, rows}, randomBlocks(r, t, rows*cols, scale))
			return
		}
		vals := make([]float32, rows*cols)
		for i := range vals {
			vals[i] = float32(r.NormFloat64()) * scale
		}
		var data []byte
		if data, err = Quantize(t, vals, cols); err == nil {
			w.AddTensor(name, t, []int{cols, rows}, data)
		}
	}
	norm := func(name string) {
		v := make([]float32, o.Hidden)
		for i := range v {
			v[i] = 1 + float32(0.1*float32(r.NormFloat64())) // not fused on arm64
		}
		w.AddF32(name, []int{o.Hidden}, v)
	}
	qd, kvd := o.Heads*hd, o.KVHeads*hd
	mat("token_embd.weight", o.Vocab, o.Hidden, typ)
	norm("output_norm.weight")
	mat("output.weight", o.Vocab, o.Hidden, typ)
	for i := range o.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		norm(p + "attn_norm.weight")
		norm(p + "ffn_norm.weight")
		mat(p+"attn_q.weight", qd, o.Hidden, typ)
		mat(p+"attn_k.weight", kvd, o.Hidden, typ)
		mat(p+"attn_v.weight", kvd, o.Hidden, typ)
		mat(p+"attn_output.weight", o.Hidden, qd, typ)
		mat(p+"ffn_gate.weight", o.FFN, o.Hidden, typ)
		mat(p+"ffn_up.weight", o.FFN, o.Hidden, typ)
		mat(p+"ffn_down.weight", o.Hidden, o.FFN, typ)
	}
	if err != nil {
		return nil, fmt.Errorf("cpu: random llama: %w", err)
	}
	return w.Bytes()
}

// randomBlocks returns n elements of random quantised blocks of type t with
// values of roughly unit variance times scale.
func randomBlocks(r *rand.Rand, t gguf.Type, n int, scale float32) []byte {
	out := make([]byte, t.RowBytes(n))
	for i := 0; i < len(out); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < len(out); j++ {
			out[i+j] = byte(v >> (8 * j))
		}
	}
	bs := t.BlockBytes()
	for b := 0; b < len(out); b += bs {
		switch t {
		case gguf.Q4_0: // q-8 uniform in -8..7: sd ~4.6
			binary.LittleEndian.PutUint16(out[b:], ToF16(scale/4.6))
		case gguf.Q4_1: // q uniform in 0..15 around -7.5
			binary.LittleEndian.PutUint16(out[b:], ToF16(scale/4.6))
			binary.LittleEndian.PutUint16(out[b+2:], ToF16(-7.5*scale/4.6))
		case gguf.Q8_0: // int8 uniform: sd ~74
			binary.LittleEndian.PutUint16(out[b:], ToF16(scale/74))
		case gguf.Q5_0: // q-16 uniform in -16..15: sd ~9.2
			binary.LittleEndian.PutUint16(out[b:], ToF16(scale/9.2))
		case gguf.Q5_1: // q uniform in 0..31 around -15.5
			binary.LittleEndian.PutUint16(out[b:], ToF16(scale/9.2))
			binary.LittleEndian.PutUint16(out[b+2:], ToF16(-15.5*scale/9.2))
		case gguf.Q2_K: // scales 0..15 (~8), q 0..3 (sd ~1.1), mins 0..15 (~8) around -1.5
			binary.LittleEndian.PutUint16(out[b+80:], ToF16(scale/9))
			binary.LittleEndian.PutUint16(out[b+82:], ToF16(1.5*scale/9))
		case gguf.Q3_K: // scales -32..31 (sd ~18), q -4..3 (sd ~2.3)
			binary.LittleEndian.PutUint16(out[b+108:], ToF16(scale/41))
		case gguf.Q4_K: // scales 0..63 (~32), q 0..15 (sd ~4.6), mins around -7.5
			binary.LittleEndian.PutUint16(out[b:], ToF16(scale/147))
			binary.LittleEndian.PutUint16(out[b+2:], ToF16(7.5*scale/147))
		case gguf.Q5_K: // as Q4_K with q 0..31 (sd ~9.2)
			binary.LittleEndian.PutUint16(out[b:], ToF16(scale/294))
			binary.LittleEndian.PutUint16(out[b+2:], ToF16(15.5*scale/294))
		case gguf.Q6_K: // scales int8 (sd ~74), q-32 (sd ~18)
			binary.LittleEndian.PutUint16(out[b+208:], ToF16(scale/1332))
		}
	}
	return out
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
