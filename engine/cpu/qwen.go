package cpu

import (
	"context"
	"fmt"
	"runtime/debug"

	"anechat/engine/arch"
	"anechat/engine/arch/qwen2"
	"anechat/engine/arch/qwen3"
	"anechat/engine/arch/rope"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
)

// qwenLayer holds the weights of one qwen2 or qwen3 decoder layer.
type qwenLayer struct {
	attnNorm, ffnNorm []float32
	wq, wk, wv, wo    *Matrix
	bq, bk, bv        []float32 // projection biases (nil: none)
	qNorm, kNorm      []float32 // per-head norms (nil: none, qwen2)
	gate, up, down    *Matrix
}

// Qwen executes the qwen2 and qwen3 architectures (engine/arch/qwen2,
// engine/arch/qwen3) on the CPU: the llama layer with biases on the query,
// key and value projections (qwen2) or per-head query and key norms
// (qwen3), rotating split halves. It is a model.Backend: concurrent Forward
// calls on distinct caches are safe (each takes its own scratch).
type Qwen struct {
	ggufBase
	d       arch.Decoder
	embd    *Matrix
	out     *Matrix
	outNorm []float32
	layers  []qwenLayer
	rope    rope.Spec
	scale   float32
	scratch scratchPool[decoderScratch]
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
	m := &Qwen{}
	var names func(i int) (arch.Block, [3]arch.Tensor, [2]arch.Tensor)
	var geo kv.Geometry
	switch name {
	case qwen2.Name:
		o, err := qwen2.Parse(f)
		if err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
		m.d, m.rope, m.scale, geo = o.Decoder, o.Rope(), o.AttentionScale(), o.Geometry()
		names = func(i int) (arch.Block, [3]arch.Tensor, [2]arch.Tensor) {
			l := o.Layer(i)
			return l.Block, [3]arch.Tensor{l.QBias, l.KBias, l.VBias}, [2]arch.Tensor{}
		}
	case qwen3.Name:
		o, err := qwen3.Parse(f)
		if err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
		m.d, m.rope, m.scale, geo = o.Decoder, o.Rope(), o.AttentionScale(), o.Geometry()
		names = func(i int) (arch.Block, [3]arch.Tensor, [2]arch.Tensor) {
			l := o.Layer(i)
			return l.Block, [3]arch.Tensor{l.QBias, l.KBias, l.VBias}, [2]arch.Tensor{l.QNorm, l.KNorm}
		}
	default:
		return nil, fmt.Errorf("cpu: %s: architecture %q is not qwen2 or qwen3", f.Path(), name)
	}
	if err := m.rope.Validate(); err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", f.Path(), err)
	}
	b := binder{src: f}
	embd, out, norm := m.d.Globals()
	m.embd, m.outNorm = b.mat(embd), b.vec(norm)
	m.out = m.embd
	if !m.d.Tied {
		m.out = b.mat(out)
	}
	m.layers = make([]qwenLayer, m.d.Layers)
	for i := range m.layers {
		l := &m.layers[i]
		w, bias, norms := names(i)
		l.attnNorm, l.ffnNorm = b.vec(w.AttnNorm), b.vec(w.FFNNorm)
		l.wq, l.wk, l.wv, l.wo = b.mat(w.Q), b.mat(w.K), b.mat(w.V), b.mat(w.O)
		l.bq, l.bk, l.bv = b.vec(bias[0]), b.vec(bias[1]), b.vec(bias[2])
		l.qNorm, l.kNorm = b.vec(norms[0]), b.vec(norms[1])
		l.gate, l.up, l.down = b.mat(w.Gate), b.mat(w.Up), b.mat(w.Down)
	}
	if b.err != nil {
		return nil, b.err
	}
	if err := m.finish(f, m.d, geo, pool); err != nil {
		return nil, err
	}
	return m, nil
}

// OpenQwen opens the GGUF file at path and binds its qwen2 or qwen3
// weights. The returned model keeps the file mapped until Close.
func OpenQwen(path string, pool *Pool) (*Qwen, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := LoadQwen(f, pool)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.file = f
	return m, nil
}

// Arch returns the hyper-parameters of the model.
func (m *Qwen) Arch() arch.Decoder { return m.d }

// Forward implements model.Backend: embedding, then each layer's attention
// and MLP blocks, then the logits. When the weights file was truncated on
// disk under the mapping, the call fails with an error wrapping
// model.ErrModelChanged (and rolls its rows back) instead of crashing.
func (m *Qwen) Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want model.Output) (_ model.Result, err error) {
	defer func(old bool) { err = endGuard(recover(), old, err, m.maps, cache) }(debug.SetPanicOnFault(true))
	if err := m.checkInput(tokens, cache); err != nil {
		return model.Result{}, err
	}
	n := len(tokens)
	if err := cache.Reserve(start, n); err != nil {
		return model.Result{}, err
	}
	s := m.scratch.get()
	defer m.scratch.put(s)
	s.reset(m.d, n)
	for t, id := range tokens {
		m.embd.Row(s.x[t*m.d.Hidden:], int(id))
	}
	s.ropes[0].Fill(m.rope, start, n)
	for li := range m.layers {
		if err := ctx.Err(); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		m.attention(s, cache, li, start, n)
		m.mlp(s, li)
	}
	d := m.d
	logits, n, err := outputLogits(ctx, m.pool, cache, s.x, n, d.Hidden, m.outNorm, d.Eps, m.out, d.Vocab, want, &s.logits, &s.in)
	if err != nil {
		return model.Result{}, err
	}
	return Result(logits, n, d.Vocab, want), nil
}

// attention is the attention block of layer li: x += Wo·attend(q, K, V),
// the n tokens' K and V rows (biased, k normed and rotated) written to the
// cache at start...
func (m *Qwen) attention(s *decoderScratch, cache *kv.Cache, li, start, n int) {
	d, l := m.d, &m.layers[li]
	hd, qd, kvd := d.HeadDim, d.Heads*d.HeadDim, d.KVHeads*d.HeadDim
	RMSNormRows(s.norm, s.x, l.attnNorm, d.Hidden, d.Eps)
	s.in.Reset(s.norm, d.Hidden)
	l.wq.MatMulInput(m.pool, s.q, &s.in)
	l.wk.MatMulInput(m.pool, s.k, &s.in)
	l.wv.MatMulInput(m.pool, s.v, &s.in)
	addBias(s.q, l.bq)
	addBias(s.k, l.bk)
	addBias(s.v, l.bv)
	headsNormRope(s.q, n, d.Heads, hd, l.qNorm, d.Eps, &s.ropes[0])
	headsNormRope(s.k, n, d.KVHeads, hd, l.kNorm, d.Eps, &s.ropes[0])
	for t := range n {
		copy(cache.K(li, start+t), s.k[t*kvd:(t+1)*kvd])
		copy(cache.V(li, start+t), s.v[t*kvd:(t+1)*kvd])
	}
	s.attn.attend(m.pool, cache, li, start, n, s.q, d.Heads, d.Heads/d.KVHeads, hd, m.scale, s.att)
	s.in.Reset(s.att, qd)
	l.wo.MatMulInput(m.pool, s.branch, &s.in)
	Add(s.x, s.branch)
}

// mlp is the feed-forward block of layer li: x += Wdown·(SiLU(Wgate·n)·Wup·n).
func (m *Qwen) mlp(s *decoderScratch, li int) {
	d, l := m.d, &m.layers[li]
	RMSNormRows(s.norm, s.x, l.ffnNorm, d.Hidden, d.Eps)
	s.in.Reset(s.norm, d.Hidden)
	l.gate.MatMulInput(m.pool, s.gate, &s.in)
	l.up.MatMulInput(m.pool, s.up, &s.in)
	s.act.mul(m.pool, s.gate, s.up, siluMulRange)
	s.in.Reset(s.gate, d.FFN)
	l.down.MatMulInput(m.pool, s.branch, &s.in)
	Add(s.x, s.branch)
}
