package cpu

import (
	"fmt"
	"math"

	"anechat/engine/arch/gemma3"
	"anechat/engine/arch/qwen2"
	"anechat/engine/arch/qwen3"
	"anechat/engine/model/gguf"
)

// RandomSpec is the geometry of a random-weight GGUF decoder (RandomGGUF).
type RandomSpec struct {
	// Arch is the architecture: qwen2, qwen3 or gemma3.
	Arch                string
	Hidden, FFN, Layers int
	Heads, KVHeads      int
	// HeadDim is written as ARCH.attention.key_length/value_length when
	// it is not Hidden/Heads (0: Hidden/Heads).
	HeadDim        int
	Vocab, Context int
	RopeBase       float64
	// Tied leaves output.weight out: the logits use the embedding.
	Tied bool
	// Bias adds projection biases to a qwen3 file (qwen2 always has them).
	Bias bool
	// Window is gemma3's sliding window (0: none, every layer global);
	// Pattern its ARCH.attention.sliding_window_pattern (0: not written,
	// the default of 6).
	Window, Pattern int
	// Softcap is gemma3's final_logit_softcapping (0: not written).
	Softcap float32
	// NoEOS leaves tokenizer.ggml.eos_token_id out (else 2): generation
	// then stops only at its length, as tests of whole runs want.
	NoEOS bool
}

// RandomGGUF encodes a GGUF file of spec's architecture with random
// weights, matrices stored as typ (random blocks for the quantised types;
// norms, biases F32; norms near 1, as
// Gemma's stored 1+weight are), and a byte-level vocabulary of spec.Vocab
// placeholder tokens. It exists for tests and fixtures: the architecture's
// reference implementation loads the same file. Deterministic in seed.
func RandomGGUF(spec RandomSpec, typ gguf.Type, seed uint64) ([]byte, error) {
	s := spec
	if s.Hidden <= 0 || s.Heads <= 0 || s.Layers <= 0 || s.Vocab <= 0 || s.FFN <= 0 || s.Context <= 0 {
		return nil, fmt.Errorf("cpu: random %s: incomplete spec %+v", s.Arch, s)
	}
	if s.KVHeads == 0 {
		s.KVHeads = s.Heads
	}
	if s.HeadDim == 0 {
		s.HeadDim = s.Hidden / s.Heads
	}
	if s.RopeBase == 0 {
		s.RopeBase = 10000
	}
	switch s.Arch {
	case qwen2.Name:
		s.Bias = true
	case qwen3.Name, gemma3.Name:
	default:
		return nil, fmt.Errorf("cpu: random: architecture %q (want qwen2, qwen3 or gemma3)", s.Arch)
	}
	r := newRand(seed)
	w := gguf.NewWriter()
	key := func(name string) string { return s.Arch + "." + name }
	w.Set("general.architecture", s.Arch)
	w.Set("general.name", "random "+s.Arch)
	w.Set(key("embedding_length"), uint32(s.Hidden))
	w.Set(key("feed_forward_length"), uint32(s.FFN))
	w.Set(key("block_count"), uint32(s.Layers))
	w.Set(key("attention.head_count"), uint32(s.Heads))
	w.Set(key("attention.head_count_kv"), uint32(s.KVHeads))
	w.Set(key("attention.key_length"), uint32(s.HeadDim))
	w.Set(key("attention.value_length"), uint32(s.HeadDim))
	w.Set(key("rope.freq_base"), float32(s.RopeBase))
	w.Set(key("context_length"), uint32(s.Context))
	eps := float32(1e-6)
	w.Set(key("attention.layer_norm_rms_epsilon"), eps)
	if s.Arch == gemma3.Name {
		if s.Window > 0 {
			w.Set(key("attention.sliding_window"), uint32(s.Window))
		}
		if s.Pattern > 0 {
			w.Set(key("attention.sliding_window_pattern"), uint32(s.Pattern))
		}
		if s.Softcap > 0 {
			w.Set(key("final_logit_softcapping"), s.Softcap)
		}
	}
	tokens := make([]string, s.Vocab)
	types := make([]int32, s.Vocab)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("<t%d>", i)
		types[i] = 1
	}
	w.Set("tokenizer.ggml.model", "gpt2")
	w.Set("tokenizer.ggml.pre", "default")
	w.Set("tokenizer.ggml.tokens", tokens)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.merges", []string{})
	w.Set("tokenizer.ggml.bos_token_id", uint32(1))
	if !s.NoEOS {
		w.Set("tokenizer.ggml.eos_token_id", uint32(2))
	}
	var err error
	mat := func(name string, rows, cols int) {
		if err != nil {
			return
		}
		scale := 1 / math.Sqrt(float64(cols))
		if typ != gguf.F32 && typ != gguf.F16 && typ != gguf.BF16 {
			if cols%typ.BlockSize() != 0 {
				err = fmt.Errorf("tensor %q: %d columns are not whole %s blocks", name, cols, typ)
				return
			}
			w.AddTensor(name, typ, []int{cols, rows}, randomBlocks(r, typ, rows*cols, float32(scale)))
			return
		}
		vals := make([]float32, rows*cols)
		for i := range vals {
			vals[i] = float32(r.NormFloat64() * scale)
		}
		var data []byte
		if data, err = Quantize(typ, vals, cols); err == nil {
			w.AddTensor(name, typ, []int{cols, rows}, data)
		}
	}
	vec := func(name string, n int, mean, sd float64) {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + sd*r.NormFloat64())
		}
		w.AddF32(name, []int{n}, v)
	}
	qd, kvd := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	mat("token_embd.weight", s.Vocab, s.Hidden)
	vec("output_norm.weight", s.Hidden, 1, 0.1)
	if !s.Tied {
		mat("output.weight", s.Vocab, s.Hidden)
	}
	for i := range s.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		vec(p+"attn_norm.weight", s.Hidden, 1, 0.1)
		vec(p+"ffn_norm.weight", s.Hidden, 1, 0.1)
		mat(p+"attn_q.weight", qd, s.Hidden)
		mat(p+"attn_k.weight", kvd, s.Hidden)
		mat(p+"attn_v.weight", kvd, s.Hidden)
		mat(p+"attn_output.weight", s.Hidden, qd)
		mat(p+"ffn_gate.weight", s.FFN, s.Hidden)
		mat(p+"ffn_up.weight", s.FFN, s.Hidden)
		mat(p+"ffn_down.weight", s.Hidden, s.FFN)
		if s.Bias {
			vec(p+"attn_q.bias", qd, 0, 0.2)
			vec(p+"attn_k.bias", kvd, 0, 0.2)
			vec(p+"attn_v.bias", kvd, 0, 0.2)
		}
		if s.Arch != qwen2.Name {
			vec(p+"attn_q_norm.weight", s.HeadDim, 1, 0.1)
			vec(p+"attn_k_norm.weight", s.HeadDim, 1, 0.1)
		}
		if s.Arch == gemma3.Name {
			vec(p+"post_attention_norm.weight", s.Hidden, 1, 0.1)
			vec(p+"post_ffw_norm.weight", s.Hidden, 1, 0.1)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cpu: random %s: %w", s.Arch, err)
	}
	return w.Bytes()
}
