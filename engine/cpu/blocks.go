package cpu

import (
	"anechat/engine/arch"
	"anechat/engine/arch/rope"
)

// The blocks every architecture's layers are made of. Each holds its
// weights, bound once by the loader (binder), and has one forward method
// that reads and updates a pass's residual rows; the parts an architecture
// lacks are nil and skipped.

// attention is an attention block: its shape and weights.
//
//	n = RMSNorm(x)·norm
//	q = rope(RMSNorm_head(Wq·n + bq)·qNorm)
//	k = rope(RMSNorm_head(Wk·n + bk)·kNorm),  v = Wv·n + bv  (RMSNorm_head(v) when vNorm)
//	x = x + RMSNorm(Wo·softmax(scale·q·kᵀ)·v)·postNorm
//
// Biases, head norms and postNorm are nil where the architecture has none
// (no norm then). k and v go to the cache; a layer without Wk and Wv
// (KV sharing) attends over the rows of the layer the cache's geometry
// names as its source.
type attention struct {
	heads, kvHeads, headDim int
	scale                   float32
	rope                    int  // the index of the layer's RoPE table in the pass
	vNorm                   bool // a weightless RMSNorm of each value head (gemma4)

	norm         []float32
	wq, wk, wv   *Matrix
	wo           *Matrix
	bq, bk, bv   []float32
	qNorm, kNorm []float32
	postNorm     []float32
}

// forward runs the block as layer li: the projections and norms here,
// the rotation, the keeping of K and V and the attention itself in the
// pass's core (the KV cache's: cacheCore).
func (a *attention) forward(p *pass, li int) {
	n, hd := p.n, a.headDim
	qd, kvd := a.heads*hd, a.kvHeads*hd
	q, att := p.q[:n*qd], p.att[:n*qd]
	RMSNormRows(p.norm, p.x, a.norm, p.hidden, p.eps)
	p.in.Reset(p.norm, p.hidden)
	a.wq.MatMulInput(p.pool, q, &p.in)
	addBias(q, a.bq)
	headsNorm(q, a.qNorm, hd, p.eps)
	var k, v []float32 // nil on a KV-shared layer
	if a.wk != nil {
		k, v = p.k[:n*kvd], p.v[:n*kvd]
		a.wk.MatMulInput(p.pool, k, &p.in)
		a.wv.MatMulInput(p.pool, v, &p.in)
		addBias(k, a.bk)
		addBias(v, a.bv)
		headsNorm(k, a.kNorm, hd, p.eps)
		if a.vNorm {
			RMSNormRows(v, v, nil, hd, p.eps)
		}
	}
	p.core.attend(li, a, q, k, v, att)
	p.in.Reset(att, qd)
	a.wo.MatMulInput(p.pool, p.branch, &p.in)
	if a.postNorm != nil {
		RMSNormRows(p.branch, p.branch, a.postNorm, p.hidden, p.eps)
	}
	Add(p.x, p.branch)
}

// mlp is a gated feed-forward block:
//
//	x = x + RMSNorm(Wdown·(act(Wgate·m)·Wup·m))·postNorm,  m = RMSNorm(x)·norm
//
// act is SiLU (siluMulRange) or GELU-tanh (geluMulRange); postNorm is nil
// where the architecture has no norm of the output.
type mlp struct {
	act            func(g, u []float32)
	norm           []float32
	gate, up, down *Matrix
	postNorm       []float32
}

// forward runs the block on the pass's rows.
func (f *mlp) forward(p *pass) {
	ffn := f.gate.Rows
	gate, up := p.gate[:p.n*ffn], p.up[:p.n*ffn]
	RMSNormRows(p.norm, p.x, f.norm, p.hidden, p.eps)
	p.in.Reset(p.norm, p.hidden)
	f.gate.MatMulInput(p.pool, gate, &p.in)
	f.up.MatMulInput(p.pool, up, &p.in)
	p.act.mul(p.pool, gate, up, f.act)
	p.in.Reset(gate, ffn)
	f.down.MatMulInput(p.pool, p.branch, &p.in)
	if f.postNorm != nil {
		RMSNormRows(p.branch, p.branch, f.postNorm, p.hidden, p.eps)
	}
	Add(p.x, p.branch)
}

// decoderLayer is the layer of the GGUF decoders (llama, qwen2, qwen3,
// gemma3): attention, then the MLP. What differs between them is which of
// the blocks' optional weights are bound, the activation, the RoPE and the
// attention scale.
type decoderLayer struct {
	attn attention
	mlp  mlp
}

func (l *decoderLayer) forward(p *pass, li int) {
	l.attn.forward(p, li)
	l.mlp.forward(p)
}

func (l *decoderLayer) blocks() (*attention, *mlp) { return &l.attn, &l.mlp }

// bindDecoderLayer binds the tensors w every GGUF decoder layer has, for a
// model of hyper-parameters d whose MLP activation is act; the
// architecture binds its own on top.
func bindDecoderLayer(b *binder, d arch.Decoder, w arch.Block, act func(g, u []float32)) *decoderLayer {
	return &decoderLayer{
		attn: attention{heads: d.Heads, kvHeads: d.KVHeads, headDim: d.HeadDim,
			norm: b.vec(w.AttnNorm), wq: b.mat(w.Q), wk: b.mat(w.K), wv: b.mat(w.V), wo: b.mat(w.O)},
		mlp: mlp{act: act, norm: b.vec(w.FFNNorm), gate: b.mat(w.Gate), up: b.mat(w.Up), down: b.mat(w.Down)},
	}
}

// headsNorm applies to each hd-wide head of the rows x the RMSNorm by w
// (nothing when w is nil).
func headsNorm(x, w []float32, hd int, eps float32) {
	if w != nil {
		RMSNormRows(x, x, w, hd, eps)
	}
}

// headsRope rotates each of the heads hd-wide heads of the n tokens' rows
// x (stride heads·hd) by table rt.
func headsRope(x []float32, n, heads, hd int, rt *rope.Table) {
	for t := range n {
		for h := range heads {
			rt.Apply(x[(t*heads+h)*hd:(t*heads+h+1)*hd], t)
		}
	}
}

// An attentionCore is the middle of an attention block: given the layer's
// query rows and, unless it reads another layer's, its key and value rows
// (k and v nil then), projected and normed but not rotated, it rotates
// them, keeps K and V where the layers that read them find them, and
// writes to out each query head's attention over the rows visible to it.
// The CPU backend's is the KV cache's (cacheCore); an executor that drives
// the layers itself brings its own (AttentionCore).
type attentionCore interface {
	attend(li int, a *attention, q, k, v, out []float32)
}

// cacheCore is the CPU backend's attention core: the pass's RoPE tables,
// its KV cache (the n tokens' rows written at start), the attention over
// the rows kv.Cache.Visible leaves.
type cacheCore struct{ p *pass }

func (c cacheCore) attend(li int, a *attention, q, k, v, out []float32) {
	p := c.p
	n, hd := p.n, a.headDim
	rt := &p.ropes[a.rope]
	headsRope(q, n, a.heads, hd, rt)
	if k != nil {
		kvd := a.kvHeads * hd
		headsRope(k, n, a.kvHeads, hd, rt)
		for t := range n {
			copy(p.cache.K(li, p.start+t), k[t*kvd:(t+1)*kvd])
			copy(p.cache.V(li, p.start+t), v[t*kvd:(t+1)*kvd])
		}
	}
	p.attn.attend(p.pool, p.cache, li, p.start, n, q, a.heads, a.heads/a.kvHeads, hd, a.scale, out)
}

// addBias adds b to each len(b)-wide row of x (nothing when b is nil).
func addBias(x, b []float32) {
	if b == nil {
		return
	}
	for t := range len(x) / len(b) {
		Add(x[t*len(b):(t+1)*len(b)], b)
	}
}
