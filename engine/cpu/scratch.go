package cpu

import (
	"sync"

	"anechat/engine/arch/rope"
	"anechat/engine/kv"
)

// scratchPool keeps the scratch of finished Forward calls for the next
// ones. A Forward takes one (a new one when every kept one is in use by a
// concurrent call on another cache) and gives it back when it returns, so
// a steady decode loop allocates no buffers; each scratch only ever grows.
type scratchPool[T any] struct {
	mu   sync.Mutex
	free []*T
}

func (s *scratchPool[T]) get() *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.free); n > 0 {
		x := s.free[n-1]
		s.free = s.free[:n-1]
		return x
	}
	return new(T)
}

func (s *scratchPool[T]) put(x *T) {
	s.mu.Lock()
	s.free = append(s.free, x)
	s.mu.Unlock()
}

// pass is one Forward in progress: its n tokens at positions start.. of
// cache, the pool, and the memory the blocks work in, kept between calls
// (scratchPool). Each buffer has one meaning (n tokens' rows of it, of
// the widest layer's width).
type pass struct {
	pool     *Pool
	cache    *kv.Cache
	start, n int
	hidden   int
	eps      float32

	x        []float32 // the residual stream
	norm     []float32 // RMSNorm of x, the input of a block's projections
	branch   []float32 // a block's output, before it is added to x
	q, k, v  []float32 // the attention projections (q, k normed and rotated)
	att      []float32 // the attention output, per query head
	gate, up []float32 // the MLP's projections; gate then holds act(gate)·up
	ple      []float32 // gemma4's per-layer inputs: token t's layer l at (t*L+l)*PLEDim
	pleRow   []float32 // one token's row of the per-layer embedding table
	pleGate  []float32 // the per-layer input gate; then act(gate)·ple_l
	logits   []float32 // the logits when they are not returned
	ropes    []rope.Table
	core     attentionCore // cacheCore, or an executor's (Layers.Run)
	in       Input
	attn     attnTask
	act      gateTask
}

// widths are the widest rows a model's layers write per token: what a
// pass's buffers are sized by.
type widths struct {
	q, kv, ffn  int // query heads (and attention output), key or value heads, MLP
	ple, pleDim int // gemma4's per-layer inputs of all layers, of one
}

// measure returns the widths of m's layers.
func (m *decoder) measure() widths {
	var w widths
	for _, l := range m.layers {
		a, f := l.blocks()
		w.q = max(w.q, a.heads*a.headDim)
		w.kv = max(w.kv, a.kvHeads*a.headDim)
		w.ffn = max(w.ffn, f.gate.Rows)
	}
	if m.ple != nil {
		w.ple, w.pleDim = m.ple.table.Cols, m.ple.dim
	}
	return w
}

// begin readies p for a Forward of m: n tokens at positions start.. of
// cache, the RoPE tables of their positions.
func (p *pass) begin(m *decoder, cache *kv.Cache, start, n int) {
	p.size(m, n)
	p.cache, p.start, p.core = cache, start, cacheCore{p}
	p.ropes = grow(p.ropes, len(m.ropes))
	for i, s := range m.ropes {
		p.ropes[i].Fill(s, start, n)
	}
}

// size sizes p's buffers for n tokens of m's layers.
func (p *pass) size(m *decoder, n int) {
	H, w := m.hidden, m.widths
	p.pool, p.n, p.hidden, p.eps = m.pool, n, H, m.eps
	p.x, p.norm, p.branch = grow(p.x, n*H), grow(p.norm, n*H), grow(p.branch, n*H)
	p.q, p.att = grow(p.q, n*w.q), grow(p.att, n*w.q)
	p.k, p.v = grow(p.k, n*w.kv), grow(p.v, n*w.kv)
	p.gate, p.up = grow(p.gate, n*w.ffn), grow(p.up, n*w.ffn)
	p.ple, p.pleRow, p.pleGate = grow(p.ple, n*w.ple), grow(p.pleRow, w.ple), grow(p.pleGate, n*w.pleDim)
}

// release gives p back to m's scratch when its Forward returns, holding
// on to nothing of the call.
func (m *decoder) release(p *pass) {
	p.cache, p.core = nil, nil
	m.scratch.put(p)
}

// logitsBuf returns the buffer for n rows of vocab logits: buf (grown) when
// the caller asked only for argmax, since nothing of it is returned; a new
// slice when the rows go back in the Result (the caller may keep them).
func logitsBuf(buf *[]float32, n, vocab int, fresh bool) []float32 {
	if fresh {
		return make([]float32, n*vocab)
	}
	*buf = grow(*buf, n*vocab)
	return *buf
}
