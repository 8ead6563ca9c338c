package arch

import (
	"fmt"

	"anechat/engine/kv"
	"anechat/engine/model/gguf"
)

// Metadata is what the architecture parsers read: a GGUF file's keys and
// tensor directory (*gguf.File implements it).
type Metadata interface {
	Path() string
	Value(key string) (any, bool)
	Int(key string) (int, error)
	String(key string) (string, error)
	Float32(key string) (float32, error)
	// TokenID reads a token id key: -1 when absent or -1 (none), an
	// error when it is not an id of an n-token vocabulary.
	TokenID(key string, n int) (int32, error)
	Tensor(name string) (gguf.TensorInfo, bool)
}

// Decoder holds the hyper-parameters every GGUF decoder-only transformer
// declares under its architecture's key prefix (ARCH.embedding_length,
// ...), as ParseDecoder reads them. The architecture packages add their
// own keys on top.
type Decoder struct {
	// Arch is general.architecture, the prefix of the keys.
	Arch                string
	Hidden, FFN, Layers int
	Heads, KVHeads      int
	// HeadDim is ARCH.attention.key_length (which must equal
	// value_length), Hidden/Heads when absent.
	HeadDim int
	// RopeDim is how many leading elements of each query and key head
	// rotate: ARCH.rope.dimension_count, HeadDim when absent (below
	// HeadDim only for an architecture whose Rules allow it).
	RopeDim int
	// RopeBase is ARCH.rope.freq_base (Rules.RopeBase when absent).
	RopeBase float64
	Eps      float32
	Vocab    int
	Context  int
	// Tied is true when the file has no output.weight: the logits use the
	// embedding table.
	Tied bool
	// BOS is the beginning-of-sequence id (-1: none); EOS the ids that end
	// generation (tokenizer.ggml.eos_token_id, then eot_token_id).
	BOS int32
	EOS []int32
}

// The names of the model-wide tensors of every GGUF decoder.
const (
	TokenEmbd  = "token_embd.weight"
	Output     = "output.weight"
	OutputNorm = "output_norm.weight"
)

// Key is the metadata key ARCH.name of d's architecture.
func (d Decoder) Key(name string) string { return d.Arch + "." + name }

// Rules are what differs between the architectures ParseDecoder reads:
// the values of keys a file may leave out, and the variations the
// architecture describes.
type Rules struct {
	// RopeBase and Eps stand in for absent ARCH.rope.freq_base and
	// ARCH.attention.layer_norm_rms_epsilon.
	RopeBase float64
	Eps      float32
	// PartialRope accepts ARCH.rope.dimension_count below the head dim:
	// the architecture rotates the leading RopeDim elements of a head
	// (llama); otherwise it is an error.
	PartialRope bool
}

// ParseDecoder reads the common hyper-parameters of a GGUF file whose
// general.architecture must be arch, by the architecture's rules. What no
// architecture here describes is an error naming the key or tensor, never
// silently ignored: RoPE scaling, frequency factors, a partial rotation
// (rope.dimension_count below the head dim) unless rules allow it,
// different key and value head dims.
func ParseDecoder(f Metadata, arch string, rules Rules) (Decoder, error) {
	got, err := f.String("general.architecture")
	if err != nil {
		return Decoder{}, fmt.Errorf("%s: %w", arch, err)
	}
	if got != arch {
		return Decoder{}, fmt.Errorf("%s: %s: architecture %q is not %s", arch, f.Path(), got, arch)
	}
	d := Decoder{Arch: arch}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: %s", arch, f.Path(), fmt.Sprintf(format, args...))
	}
	intKey := func(name string, dst *int, required bool) error {
		key := d.Key(name)
		if _, ok := f.Value(key); !ok && !required {
			return nil
		}
		v, err := f.Int(key)
		if err != nil {
			return fmt.Errorf("%s: %w", arch, err)
		}
		if v <= 0 || v > 1<<24 {
			return fail("%s = %d is out of range", key, v)
		}
		*dst = v
		return nil
	}
	for _, p := range []struct {
		name string
		dst  *int
	}{
		{"embedding_length", &d.Hidden}, {"feed_forward_length", &d.FFN}, {"block_count", &d.Layers},
		{"attention.head_count", &d.Heads}, {"context_length", &d.Context},
	} {
		if err := intKey(p.name, p.dst, true); err != nil {
			return Decoder{}, err
		}
	}
	d.KVHeads = d.Heads
	if err := intKey("attention.head_count_kv", &d.KVHeads, false); err != nil {
		return Decoder{}, err
	}
	if d.Heads%d.KVHeads != 0 {
		return Decoder{}, fail("%d heads and %d kv heads are inconsistent (heads must be a multiple of kv heads)", d.Heads, d.KVHeads)
	}
	if d.Hidden%d.Heads == 0 {
		d.HeadDim = d.Hidden / d.Heads
	}
	if err := intKey("attention.key_length", &d.HeadDim, false); err != nil {
		return Decoder{}, err
	}
	vd := d.HeadDim
	if err := intKey("attention.value_length", &vd, false); err != nil {
		return Decoder{}, err
	}
	switch {
	case d.HeadDim == 0:
		return Decoder{}, fail("hidden %d is not a multiple of %d heads and %s is absent", d.Hidden, d.Heads, d.Key("attention.key_length"))
	case vd != d.HeadDim:
		return Decoder{}, fail("%s = %d differs from %s = %d (not supported)", d.Key("attention.value_length"), vd, d.Key("attention.key_length"), d.HeadDim)
	case d.HeadDim%2 != 0:
		return Decoder{}, fail("head dim %d is odd", d.HeadDim)
	}
	d.RopeDim = d.HeadDim
	if err := intKey("rope.dimension_count", &d.RopeDim, false); err != nil {
		return Decoder{}, err
	}
	switch {
	case d.RopeDim != d.HeadDim && !rules.PartialRope:
		return Decoder{}, fail("%s = %d rotates part of the %d-wide heads (not supported)", d.Key("rope.dimension_count"), d.RopeDim, d.HeadDim)
	case d.RopeDim > d.HeadDim || d.RopeDim%2 != 0:
		return Decoder{}, fail("%s = %d must be even and at most the head dim %d", d.Key("rope.dimension_count"), d.RopeDim, d.HeadDim)
	}
	d.RopeBase = rules.RopeBase
	if _, ok := f.Value(d.Key("rope.freq_base")); ok {
		b, err := f.Float32(d.Key("rope.freq_base"))
		if err != nil {
			return Decoder{}, fmt.Errorf("%s: %w", arch, err)
		}
		d.RopeBase = float64(b)
	}
	if !(d.RopeBase > 0) {
		return Decoder{}, fail("%s = %g must be positive", d.Key("rope.freq_base"), d.RopeBase)
	}
	if v, ok := f.Value(d.Key("rope.scaling.type")); ok && v != "none" {
		return Decoder{}, fail("%s = %v is not supported", d.Key("rope.scaling.type"), v)
	}
	if v, ok := f.Value(d.Key("rope.scaling.factor")); ok {
		if s, err := f.Float32(d.Key("rope.scaling.factor")); err != nil || s != 1 {
			return Decoder{}, fail("%s = %v is not supported", d.Key("rope.scaling.factor"), v)
		}
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		return Decoder{}, fail("tensor \"rope_freqs.weight\" (rope frequency factors) is not supported")
	}
	d.Eps = rules.Eps
	if _, ok := f.Value(d.Key("attention.layer_norm_rms_epsilon")); ok {
		if d.Eps, err = f.Float32(d.Key("attention.layer_norm_rms_epsilon")); err != nil {
			return Decoder{}, fmt.Errorf("%s: %w", arch, err)
		}
	}
	if !(d.Eps > 0) {
		return Decoder{}, fail("%s = %g must be positive", d.Key("attention.layer_norm_rms_epsilon"), d.Eps)
	}
	ti, ok := f.Tensor(TokenEmbd)
	if !ok || len(ti.Dims) != 2 {
		return Decoder{}, fail("missing or malformed tensor %q", TokenEmbd)
	}
	d.Vocab = ti.Dims[1]
	_, hasOut := f.Tensor(Output)
	d.Tied = !hasOut
	// Token ids the vocabulary does not have are damage, not "none":
	// dropping them would start without BOS or never stop.
	if d.BOS, err = f.TokenID("tokenizer.ggml.bos_token_id", d.Vocab); err != nil {
		return Decoder{}, fmt.Errorf("%s: %w", arch, err)
	}
	for _, key := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"} {
		id, err := f.TokenID(key, d.Vocab)
		if err != nil {
			return Decoder{}, fmt.Errorf("%s: %w", arch, err)
		}
		if id >= 0 && !containsID(d.EOS, id) {
			d.EOS = append(d.EOS, id)
		}
	}
	return d, nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// Globals are the model-wide tensors of d: the embedding (Vocab×Hidden),
// the output projection (the embedding itself when Tied) and the final
// norm.
func (d Decoder) Globals() (embd, out, norm Tensor) {
	embd = Matrix(TokenEmbd, d.Vocab, d.Hidden)
	out = embd
	if !d.Tied {
		out = Matrix(Output, d.Vocab, d.Hidden)
	}
	return embd, out, Vector(OutputNorm, d.Hidden)
}

// Geometry is the KV cache layout of a decoder whose layers all attend to
// the whole prefix: every layer owns its rows, KVHeads heads of HeadDim.
func (d Decoder) Geometry() kv.Geometry {
	geo := kv.Geometry{Context: d.Context, Layers: make([]kv.LayerSpec, d.Layers)}
	for i := range geo.Layers {
		geo.Layers[i] = kv.LayerSpec{KVHeads: d.KVHeads, HeadDim: d.HeadDim, Source: i}
	}
	return geo
}

// Block names the tensors every GGUF decoder layer has (blk.i.*): the
// attention's input norm and projections, the MLP's norm and
// projections.
type Block struct {
	AttnNorm, FFNNorm Tensor
	Q, K, V, O        Tensor
	Gate, Up, Down    Tensor
}

// Block returns the common tensors of layer i.
func (d Decoder) Block(i int) Block {
	p := fmt.Sprintf("blk.%d.", i)
	qd, kvd := d.Heads*d.HeadDim, d.KVHeads*d.HeadDim
	return Block{
		AttnNorm: Vector(p+"attn_norm.weight", d.Hidden), FFNNorm: Vector(p+"ffn_norm.weight", d.Hidden),
		Q: Matrix(p+"attn_q.weight", qd, d.Hidden), K: Matrix(p+"attn_k.weight", kvd, d.Hidden),
		V: Matrix(p+"attn_v.weight", kvd, d.Hidden), O: Matrix(p+"attn_output.weight", d.Hidden, qd),
		Gate: Matrix(p+"ffn_gate.weight", d.FFN, d.Hidden), Up: Matrix(p+"ffn_up.weight", d.FFN, d.Hidden),
		Down: Matrix(p+"ffn_down.weight", d.Hidden, d.FFN),
	}
}
