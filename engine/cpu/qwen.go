package cpu

import (
	"fmt"

	"anechat/engine/arch"
	"anechat/engine/arch/qwen2"
	"anechat/engine/arch/qwen3"
	"anechat/engine/arch/rope"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
)

// Qwen executes the qwen2 and qwen3 architectures (engine/arch/qwen2,
// engine/arch/qwen3) on the CPU: the llama layer with biases on the query,
// key and value projections (qwen2) or per-head query and key norms
// (qwen3), rotating split halves. It is a model.Backend: concurrent Forward
// calls on distinct caches are safe (each takes its own scratch).
type Qwen struct {
	decoder
	d arch.Decoder
}

// LoadQwen binds the qwen2 or qwen3 weights of f (as its
// general.architecture says). The weights stay in f's mapping: f must stay
// open while the model is used. pool may be nil: the model then makes one,
// which its Close ends.
func LoadQwen(f *gguf.File, pool *Pool) (_ *Qwen, err error) {
	defer mmap.Guard(&err, f.Mapping())()
	name, err := f.String("general.architecture")
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	// The layers' weights: qwen2's are qwen3's without the head norms.
	var names func(i int) qwen3.Layer
	var spec rope.Spec
	var scale float32
	m := &Qwen{}
	switch name {
	case qwen2.Name:
		o, err := qwen2.Parse(f)
		if err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
		m.d, spec, scale = o.Decoder, o.Rope(), o.AttentionScale()
		names = func(i int) qwen3.Layer {
			l := o.Layer(i)
			return qwen3.Layer{Block: l.Block, QBias: l.QBias, KBias: l.KBias, VBias: l.VBias}
		}
	case qwen3.Name:
		o, err := qwen3.Parse(f)
		if err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
		m.d, spec, scale, names = o.Decoder, o.Rope(), o.AttentionScale(), o.Layer
	default:
		return nil, fmt.Errorf("cpu: %s: architecture %q is not qwen2 or qwen3", f.Path(), name)
	}
	m.ropes = []rope.Spec{spec}
	err = m.bindGGUF(&binder{src: ggufWeights{f}}, m.d, m.d.Geometry(), pool, func(b *binder, i int) layer {
		w := names(i)
		l := bindDecoderLayer(b, m.d, w.Block, siluMulRange)
		a := &l.attn
		a.scale = scale
		a.bq, a.bk, a.bv = b.vec(w.QBias), b.vec(w.KBias), b.vec(w.VBias)
		a.qNorm, a.kNorm = b.vec(w.QNorm), b.vec(w.KNorm)
		return l
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// OpenQwen opens the GGUF file at path and binds its qwen2 or qwen3
// weights. The returned model keeps the file mapped until Close.
func OpenQwen(path string, pool *Pool) (*Qwen, error) { return openGGUF(path, pool, LoadQwen) }

// Arch returns the hyper-parameters of the model.
func (m *Qwen) Arch() arch.Decoder { return m.d }
