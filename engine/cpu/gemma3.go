package cpu

import (
	"fmt"

	"anechat/engine/arch/gemma3"
	"anechat/engine/arch/rope"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
)

// Gemma3 executes the gemma3 text architecture (engine/arch/gemma3: Gemma
// 3 270M and its relatives, from GGUF) on the CPU: decoder layers with
// per-head query and key norms, norms of both blocks' outputs and a
// GELU-tanh MLP, sliding and global layers rotating by their own bases, on
// scaled embeddings. It is a model.Backend: concurrent Forward calls on
// distinct caches are safe (each takes its own scratch).
type Gemma3 struct {
	decoder
	opt gemma3.Config
}

// LoadGemma3 binds the gemma3 weights of f. The weights stay in f's
// mapping: f must stay open while the model is used. pool may be nil: the
// model then makes one, which its Close ends.
func LoadGemma3(f *gguf.File, pool *Pool) (_ *Gemma3, err error) {
	defer mmap.Guard(&err, f.Mapping())()
	o, err := gemma3.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	m := &Gemma3{opt: o}
	m.embedScale, m.softcap = o.EmbedScale(), o.Softcap
	global, local := o.Ropes()
	m.ropes = []rope.Spec{global, local}
	err = m.bindGGUF(&binder{src: ggufWeights{f}}, o.Decoder, o.Geometry(), pool, func(b *binder, i int) layer {
		w := o.Layer(i)
		l := bindDecoderLayer(b, o.Decoder, w.Block, geluMulRange)
		a := &l.attn
		a.scale = o.QueryScale
		if o.Sliding[i] {
			a.rope = 1
		}
		a.qNorm, a.kNorm, a.postNorm = b.vec(w.QNorm), b.vec(w.KNorm), b.vec(w.PostAttnNorm)
		l.mlp.postNorm = b.vec(w.PostFFNorm)
		return l
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// OpenGemma3 opens the GGUF file at path and binds its gemma3 weights. The
// returned model keeps the file mapped until Close.
func OpenGemma3(path string, pool *Pool) (*Gemma3, error) { return openGGUF(path, pool, LoadGemma3) }

// Arch returns the model's architecture description.
func (m *Gemma3) Arch() gemma3.Config { return m.opt }
