package cpu

import (
	"fmt"
	"path/filepath"
	"slices"

	"anechat/engine/arch/gemma4"
	"anechat/engine/model"
	"anechat/engine/model/mmap"
	"anechat/engine/model/safetensors"
)

// Gemma4 executes the gemma4 text architecture (engine/arch/gemma4: Gemma
// 4 E2B and its relatives) on the CPU. It is a model.Backend: concurrent
// Forward calls on distinct caches are safe (each takes its own scratch).
type Gemma4 struct {
	decoder
	opt gemma4.Config
}

// gemma4Layer is one gemma4 decoder layer, as engine/arch/gemma4 describes
// it: the attention and MLP blocks of a decoder layer, then the
// per-layer-input block and the layer scalar.
//
//	n = RMSNorm(x)·input_layernorm
//	q = rope(RMSNorm_head(Wq·n)·q_norm), k = rope(RMSNorm_head(Wk·n)·k_norm), v = RMSNorm_head(Wv·n)
//	x = x + RMSNorm(Wo·softmax(q·kᵀ)·v)·post_attention_layernorm   (KV-shared layers read their Source's k, v)
//	x = x + RMSNorm(Wdown·(GELUTanh(Wgate·m)·Wup·m))·post_feedforward_layernorm,  m = RMSNorm(x)·pre_feedforward_layernorm
//	x = x + RMSNorm(Wple_proj·(GELUTanh(Wple_gate·x)·ple_i))·post_per_layer_input_norm   (when PLEDim > 0)
//	x = x·layer_scalar
type gemma4Layer struct {
	decoderLayer
	ple    perLayerInput // zero when the model has no per-layer inputs
	scalar float32
}

func (l *gemma4Layer) forward(p *pass, li int) {
	l.decoderLayer.forward(p, li)
	if l.ple.gate != nil {
		l.ple.forward(p, li)
	}
	if l.scalar != 1 {
		for i := range p.x {
			p.x[i] *= l.scalar
		}
	}
}

// perLayerInput is the per-layer-input block of a layer:
//
//	x = x + RMSNorm(Wproj·(GELUTanh(Wgate·x)·ple_i))·postNorm
type perLayerInput struct {
	gate, proj *Matrix // hidden -> PLEDim, PLEDim -> hidden
	postNorm   []float32
}

// forward runs the block as layer li, on its slice of the pass's
// per-layer inputs.
func (b *perLayerInput) forward(p *pass, li int) {
	P, stride := b.gate.Rows, len(p.ple)/p.n // one token's inputs: every layer's
	g := p.pleGate[:p.n*P]
	p.in.Reset(p.x, p.hidden)
	b.gate.MatMulInput(p.pool, g, &p.in)
	for t := range p.n {
		geluMulRange(g[t*P:(t+1)*P], p.ple[t*stride+li*P:t*stride+(li+1)*P])
	}
	p.in.Reset(g, P)
	b.proj.MatMulInput(p.pool, p.branch, &p.in)
	RMSNormRows(p.branch, p.branch, b.postNorm, p.hidden, p.eps)
	Add(p.x, p.branch)
}

// perLayerEmbedding computes every layer's per-layer input of every token
// from its embedding (gemma4.PLEScales), into the pass's ple rows.
type perLayerEmbedding struct {
	table  *Matrix // PLEVocab × layers·PLEDim
	proj   *Matrix // layers·PLEDim × hidden
	norm   []float32
	dim    int // PLEDim
	scales gemma4.PLEScales
}

// forward computes the inputs from the embeddings in p.x and the
// tokens' rows of the table.
func (e *perLayerEmbedding) forward(p *pass, tokens []int32) {
	LP, k := e.table.Cols, e.scales
	e.project(p.pool, &p.in, p.x, p.hidden, p.ple, p.eps)
	for t, id := range tokens {
		e.table.Row(p.pleRow, int(id))
		for i, v := range p.pleRow {
			p.pleRow[i] = float32(v * k.Emb)
		}
		e.mix(p.ple[t*LP:(t+1)*LP], p.pleRow)
	}
}

// project writes to out the projection half of the per-layer inputs of
// the rows x (hidden wide): per layer, RMSNorm(Proj·(Wproj·x))·norm.
func (e *perLayerEmbedding) project(pool *Pool, in *Input, x []float32, hidden int, out []float32, eps float32) {
	in.Reset(x, hidden)
	e.proj.MatMulInput(pool, out, in)
	out = out[:len(x)/hidden*e.proj.Rows]
	for i := range out {
		out[i] *= e.scales.Proj
	}
	RMSNormRows(out, out, e.norm, e.dim, eps)
}

// mix completes the inputs: (projection + embedding row)·Mix, with emb
// the token's table row times Emb.
func (e *perLayerEmbedding) mix(row, emb []float32) {
	for i, v := range emb {
		row[i] = (row[i] + v) * e.scales.Mix
	}
}

// LoadGemma4 opens the Hugging Face model directory dir (config.json,
// *.safetensors; F32, F16 or BF16 weights) and binds a gemma4 text model to
// it. The weights stay memory-mapped until Close. pool may be nil: the
// model then makes one (one worker per CPU), which its Close ends.
func LoadGemma4(dir string, pool *Pool) (*Gemma4, error) { return loadGemma4(dir, pool, nil) }

// loadGemma4 is LoadGemma4 with a binder's round (nil: weights as stored).
func loadGemma4(dir string, pool *Pool, round func(string, []float32) error) (*Gemma4, error) {
	d, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %w", err)
	}
	o, err := gemma4.ParseConfig(filepath.Join(d.Path(), "config.json"), d.Config())
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("cpu: %w", err)
	}
	prefix := gemma4.Prefix(func(name string) bool { _, ok := d.Tensor(name); return ok })
	m, err := bindGemma4(o, prefix, &binder{src: dirWeights{d: d, prefix: prefix}, round: round}, pool)
	if err != nil {
		d.Close()
		return nil, err
	}
	m.own(d)
	more, err := gemma4.GenerationEOS(dir)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("cpu: %w", err)
	}
	for _, id := range more {
		if id < 0 || int(id) >= m.opt.Vocab {
			m.Close()
			return nil, fmt.Errorf("cpu: gemma4: %s: eos_token_id %d is not a token id of the %d-token vocabulary",
				filepath.Join(dir, "generation_config.json"), id, m.opt.Vocab)
		}
		if !m.cfg.IsEOS(id) {
			m.cfg.EOS = append(m.cfg.EOS, id)
		}
	}
	m.opt.EOS = slices.Clone(m.cfg.EOS)
	return m, nil
}

// bindGemma4 binds every weight of the gemma4 model o through b by the
// names engine/arch/gemma4 gives (prefix: gemma4.Prefix). Every weight of
// the text model must be bound: one left over (a layer past
// num_hidden_layers, PLE tables with per-layer inputs off) would be
// ignored and the model would compute garbage.
func bindGemma4(o gemma4.Config, prefix string, b *binder, pool *Pool) (_ *Gemma4, err error) {
	src := b.src
	defer mmap.Guard(&err, src.mappings()...)()
	m := &Gemma4{opt: o}
	m.hidden, m.eps, m.embedScale, m.softcap = o.Hidden, o.Eps, o.EmbedScale(), o.Softcap
	var ropeOf []int
	m.ropes, ropeOf = o.Ropes()
	// The weights are bound in the order RandomGemma4 draws them.
	g := o.Globals(prefix)
	m.embd = b.embedding(g.Embed, o.Tied)
	m.out = m.embd
	if !o.Tied {
		m.out = b.mat(g.Out)
	}
	m.norm = b.vec(g.Norm)
	if o.PLEDim > 0 {
		m.ple = &perLayerEmbedding{table: b.embedding(g.PLEEmbed, false), proj: b.mat(g.PLEProj), norm: b.vec(g.PLENorm),
			dim: o.PLEDim, scales: o.PLEScales()}
	}
	for i, lo := range o.Layers {
		w := o.Layer(i, prefix)
		l := &gemma4Layer{}
		a, f := &l.attn, &l.mlp
		a.heads, a.kvHeads, a.headDim = o.Heads, lo.KVHeads, lo.HeadDim
		a.scale, a.rope, a.vNorm = o.AttentionScale(), ropeOf[i], true
		a.norm, a.postNorm, f.norm, f.postNorm = b.vec(w.InNorm), b.vec(w.PostAttnNorm), b.vec(w.PreFFNorm), b.vec(w.PostFFNorm)
		a.qNorm = b.vec(w.QNorm)
		a.wq, a.wo = b.mat(w.Q), b.mat(w.O)
		a.wk, a.wv, a.kNorm = b.mat(w.K), b.mat(w.V), b.vec(w.KNorm) // none on KV-shared layers
		f.act, f.gate, f.up, f.down = geluMulRange, b.mat(w.Gate), b.mat(w.Up), b.mat(w.Down)
		if o.PLEDim > 0 {
			l.ple = perLayerInput{gate: b.mat(w.PLEGate), proj: b.mat(w.PLEProj), postNorm: b.vec(w.PLEPostNorm)}
		}
		// The per-layer scalar is a buffer the library initialises to 1
		// when a checkpoint lacks it.
		l.scalar = b.scalar(w.Scalar, 1)
		m.layers = append(m.layers, l)
	}
	if err := b.finish(prefix+"layers.", "config.json num_hidden_layers", len(o.Layers)); err != nil {
		return nil, err
	}
	geo, err := o.Geometry()
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %s: %w", src.Path(), err)
	}
	cfg := model.Config{Arch: "gemma4", VocabSize: o.Vocab, Hidden: o.Hidden, ContextLen: o.Context, KV: geo,
		BOS: o.BOS, EOS: slices.Clone(o.EOS)}
	if err := m.finish(cfg, src, pool); err != nil {
		return nil, err
	}
	return m, nil
}

// Arch returns the model's architecture description.
func (m *Gemma4) Arch() gemma4.Config { return m.opt }
