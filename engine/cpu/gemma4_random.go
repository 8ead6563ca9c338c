package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"

	"anechat/engine/arch/gemma4"
	"anechat/engine/model/gguf"
)

// RandomGemma4 builds a gemma4 model of geometry o with random weights
// stored as typ (any type the CPU kernels compute with), norms near 1. It
// exists for benchmarks and tests at geometries no fixture has (such as
// gemma4.E2B); it is deterministic in seed. pool may be nil: the model then
// makes one, which its Close ends.
func RandomGemma4(o gemma4.Config, typ gguf.Type, seed uint64, pool *Pool) (*Gemma4, error) {
	if !Supported(typ) {
		return nil, fmt.Errorf("cpu: random gemma4: type %s is not supported", typ)
	}
	if o.Vocab <= 0 || o.Hidden <= 0 || o.Heads <= 0 || len(o.Layers) == 0 || o.Context <= 0 {
		return nil, fmt.Errorf("cpu: random gemma4: incomplete options %+v", o)
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var err error
	mat := func(name string, rows, cols int) *Matrix {
		if err != nil {
			return nil
		}
		data := randomWeights(r, typ, rows, cols)
		var m *Matrix
		if m, err = NewMatrix(name, typ, rows, cols, data); err != nil {
			err = fmt.Errorf("cpu: random gemma4: %w", err)
		}
		return m
	}
	norm := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1 + float32(0.1*float32(r.NormFloat64())) // not fused on arm64
		}
		return v
	}
	H, L, P := o.Hidden, len(o.Layers), o.PLEDim
	m := &Gemma4{opt: o}
	m.embed = mat("embed_tokens.weight", o.Vocab, H)
	m.out = m.embed
	if !o.Tied {
		m.out = mat("lm_head.weight", o.Vocab, H)
	}
	m.norm = norm(H)
	if P > 0 {
		m.pleEmb = mat("embed_tokens_per_layer.weight", o.PLEVocab, L*P)
		m.pleIn = mat("per_layer_model_projection.weight", L*P, H)
		m.pleNrm = norm(P)
	}
	m.layers = make([]gemma4Layer, L)
	for i, lo := range o.Layers {
		l := &m.layers[i]
		p := fmt.Sprintf("layers.%d.", i)
		qd, kvd := o.Heads*lo.HeadDim, lo.KVHeads*lo.HeadDim
		l.inNorm, l.postAttnNorm, l.preFFNorm, l.postFFNorm = norm(H), norm(H), norm(H), norm(H)
		l.qNorm = norm(lo.HeadDim)
		l.wq = mat(p+"q_proj", qd, H)
		l.wo = mat(p+"o_proj", H, qd)
		if lo.Source == i {
			l.wk, l.wv, l.kNorm = mat(p+"k_proj", kvd, H), mat(p+"v_proj", kvd, H), norm(lo.HeadDim)
		}
		l.gate, l.up, l.down = mat(p+"gate_proj", lo.FFN, H), mat(p+"up_proj", lo.FFN, H), mat(p+"down_proj", H, lo.FFN)
		if P > 0 {
			l.pleGate, l.pleProj, l.plePostNorm = mat(p+"per_layer_input_gate", P, H), mat(p+"per_layer_projection", H, P), norm(H)
		}
		l.scalar = 1
	}
	if err != nil {
		return nil, err
	}
	if err := m.plan(pool); err != nil {
		return nil, fmt.Errorf("cpu: random gemma4: %w", err)
	}
	m.cfg.Fingerprint = fmt.Sprintf("random-gemma4:%s:%d", typ, seed)
	return m, nil
}

// randomWeights returns rows×cols values of standard deviation ~1/sqrt(cols)
// encoded as typ: uniform floats for F32/F16/BF16, random blocks for the
// quantised types.
func randomWeights(r *rand.Rand, typ gguf.Type, rows, cols int) []byte {
	scale := float32(1 / math.Sqrt(float64(cols)))
	switch typ {
	case gguf.F32, gguf.F16, gguf.BF16:
	default:
		return randomBlocks(r, typ, rows*cols, scale)
	}
	n := rows * cols
	out := make([]byte, typ.RowBytes(n))
	// Uniform in [-a, a) with a = sqrt(3)·scale has standard deviation scale.
	a := float32(math.Sqrt(3)) * scale
	for i := 0; i < n; i += 2 {
		v := r.Uint64()
		for j := 0; j < 2 && i+j < n; j++ {
			x := (float32(uint32(v>>(32*j))>>8)/(1<<24)*2 - 1) * a
			switch typ {
			case gguf.F32:
				u := math.Float32bits(x)
				o := 4 * (i + j)
				out[o], out[o+1], out[o+2], out[o+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			case gguf.F16:
				h := ToF16(x)
				out[2*(i+j)], out[2*(i+j)+1] = byte(h), byte(h>>8)
			case gguf.BF16:
				h := ToBF16(x)
				out[2*(i+j)], out[2*(i+j)+1] = byte(h), byte(h>>8)
			}
		}
	}
	return out
}
