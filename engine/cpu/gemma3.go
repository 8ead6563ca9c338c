package cpu

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"

	"anechat/engine/arch/gemma3"
	"anechat/engine/arch/rope"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
)

// gemma3Layer holds the weights of one decoder layer.
type gemma3Layer struct {
	attnNorm, postAttnNorm, ffnNorm, postFFNorm []float32
	wq, wk, wv, wo                              *Matrix
	qNorm, kNorm                                []float32
	gate, up, down                              *Matrix
}

// Gemma3 executes the gemma3 text architecture (engine/arch/gemma3: Gemma
// 3 270M and its relatives, from GGUF) on the CPU. It is a model.Backend:
// concurrent Forward calls on distinct caches are safe (each takes its own
// scratch).
type Gemma3 struct {
	ggufBase
	opt     gemma3.Config
	embd    *Matrix
	out     *Matrix
	outNorm []float32
	layers  []gemma3Layer
	// ropes are the global layers' spec (0) and the sliding layers' (1):
	// a Forward fills one table of each.
	ropes   [2]rope.Spec
	scratch scratchPool[decoderScratch]
}

// kind is the index in ropes (and the scratch's tables) of layer li.
func (m *Gemma3) kind(li int) int {
	if m.opt.Sliding[li] {
		return 1
	}
	return 0
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
	m.ropes[0], m.ropes[1] = o.Ropes()
	for _, r := range m.ropes {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("cpu: %s: %w", f.Path(), err)
		}
	}
	b := binder{src: f}
	embd, out, norm := o.Globals()
	m.embd, m.outNorm = b.mat(embd), b.vec(norm)
	m.out = m.embd
	if !o.Tied {
		m.out = b.mat(out)
	}
	m.layers = make([]gemma3Layer, o.Layers)
	for i := range m.layers {
		l, w := &m.layers[i], o.Layer(i)
		l.attnNorm, l.postAttnNorm, l.ffnNorm, l.postFFNorm = b.vec(w.AttnNorm), b.vec(w.PostAttnNorm), b.vec(w.FFNNorm), b.vec(w.PostFFNorm)
		l.wq, l.wk, l.wv, l.wo = b.mat(w.Q), b.mat(w.K), b.mat(w.V), b.mat(w.O)
		l.qNorm, l.kNorm = b.vec(w.QNorm), b.vec(w.KNorm)
		l.gate, l.up, l.down = b.mat(w.Gate), b.mat(w.Up), b.mat(w.Down)
	}
	if b.err != nil {
		return nil, b.err
	}
	if err := m.finish(f, o.Decoder, o.Geometry(), pool); err != nil {
		return nil, err
	}
	return m, nil
}

// OpenGemma3 opens the GGUF file at path and binds its gemma3 weights. The
// returned model keeps the file mapped until Close.
func OpenGemma3(path string, pool *Pool) (*Gemma3, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := LoadGemma3(f, pool)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.file = f
	return m, nil
}

// Arch returns the model's architecture description.
func (m *Gemma3) Arch() gemma3.Config { return m.opt }

// Forward implements model.Backend: the scaled embeddings, then each
// layer's attention and MLP blocks, then the (softcapped) logits. When the
// weights file was truncated on disk under the mapping, the call fails
// with an error wrapping model.ErrModelChanged (and rolls its rows back)
// instead of crashing.
func (m *Gemma3) Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want model.Output) (_ model.Result, err error) {
	defer func(old bool) { err = endGuard(recover(), old, err, m.maps, cache) }(debug.SetPanicOnFault(true))
	if err := m.checkInput(tokens, cache); err != nil {
		return model.Result{}, err
	}
	n := len(tokens)
	if err := cache.Reserve(start, n); err != nil {
		return model.Result{}, err
	}
	o := m.opt
	s := m.scratch.get()
	defer m.scratch.put(s)
	s.reset(o.Decoder, n)
	scale := o.EmbedScale()
	for t, id := range tokens {
		row := m.embd.Row(s.x[t*o.Hidden:], int(id))
		for i := range row {
			row[i] *= scale
		}
	}
	for k, spec := range m.ropes {
		s.ropes[k].Fill(spec, start, n)
	}
	for li := range m.layers {
		if err := ctx.Err(); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		m.attention(s, cache, li, start, n)
		m.mlp(s, li)
	}
	logits, n, err := outputLogits(ctx, m.pool, cache, s.x, n, o.Hidden, m.outNorm, o.Eps, m.out, o.Vocab, want, &s.logits, &s.in)
	if err != nil {
		return model.Result{}, err
	}
	if c := o.Softcap; c > 0 {
		for i, z := range logits {
			logits[i] = float32(math.Tanh(float64(z/c))) * c
		}
	}
	return Result(logits, n, o.Vocab, want), nil
}

// attention is the attention block of layer li: q, k (normed per head and
// rotated) and v from the normed x, k and v into the cache at start.., then
// x += RMSNorm(Wo·attend(q, K, V))·post_attention_norm.
func (m *Gemma3) attention(s *decoderScratch, cache *kv.Cache, li, start, n int) {
	o, l := m.opt, &m.layers[li]
	hd, qd, kvd := o.HeadDim, o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	rt := &s.ropes[m.kind(li)]
	RMSNormRows(s.norm, s.x, l.attnNorm, o.Hidden, o.Eps)
	s.in.Reset(s.norm, o.Hidden)
	l.wq.MatMulInput(m.pool, s.q, &s.in)
	l.wk.MatMulInput(m.pool, s.k, &s.in)
	l.wv.MatMulInput(m.pool, s.v, &s.in)
	headsNormRope(s.q, n, o.Heads, hd, l.qNorm, o.Eps, rt)
	headsNormRope(s.k, n, o.KVHeads, hd, l.kNorm, o.Eps, rt)
	for t := range n {
		copy(cache.K(li, start+t), s.k[t*kvd:(t+1)*kvd])
		copy(cache.V(li, start+t), s.v[t*kvd:(t+1)*kvd])
	}
	s.attn.attend(m.pool, cache, li, start, n, s.q, o.Heads, o.Heads/o.KVHeads, hd, o.QueryScale, s.att)
	s.in.Reset(s.att, qd)
	l.wo.MatMulInput(m.pool, s.branch, &s.in)
	RMSNormRows(s.branch, s.branch, l.postAttnNorm, o.Hidden, o.Eps)
	Add(s.x, s.branch)
}

// mlp is the feed-forward block of layer li:
// x += RMSNorm(Wdown·(GELUTanh(Wgate·m)·Wup·m))·post_ffw_norm.
func (m *Gemma3) mlp(s *decoderScratch, li int) {
	o, l := m.opt, &m.layers[li]
	RMSNormRows(s.norm, s.x, l.ffnNorm, o.Hidden, o.Eps)
	s.in.Reset(s.norm, o.Hidden)
	l.gate.MatMulInput(m.pool, s.gate, &s.in)
	l.up.MatMulInput(m.pool, s.up, &s.in)
	s.act.mul(m.pool, s.gate, s.up, geluMulRange)
	s.in.Reset(s.gate, o.FFN)
	l.down.MatMulInput(m.pool, s.branch, &s.in)
	RMSNormRows(s.branch, s.branch, l.postFFNorm, o.Hidden, o.Eps)
	Add(s.x, s.branch)
}
