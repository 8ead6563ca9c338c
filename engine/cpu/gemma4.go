package cpu

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"anechat/engine/arch"
	"anechat/engine/arch/gemma4"
	"anechat/engine/arch/rope"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
	"anechat/engine/model/safetensors"
)

// gemma4Layer holds the weights of one decoder layer. KV-shared layers have
// no wk, wv or kNorm: they read the K/V rows of their Source layer.
type gemma4Layer struct {
	inNorm, postAttnNorm, preFFNorm, postFFNorm []float32
	wq, wk, wv, wo                              *Matrix
	qNorm, kNorm                                []float32
	gate, up, down                              *Matrix
	pleGate, pleProj                            *Matrix // hidden -> PLEDim, PLEDim -> hidden
	plePostNorm                                 []float32
	scalar                                      float32
}

// Gemma4 executes the gemma4 text architecture (engine/arch/gemma4: Gemma
// 4 E2B and its relatives) on the CPU. It is a model.Backend: concurrent
// Forward calls on distinct caches are safe (each takes its own scratch).
type Gemma4 struct {
	opt     gemma4.Config
	cfg     model.Config
	pool    *Pool
	ownPool bool             // the pool was made by the loader: Close closes it
	dir     *safetensors.Dir // nil when the weights are not ours to close
	embed   *Matrix          // vocab x hidden
	out     *Matrix          // vocab x hidden (the embedding when tied)
	norm    []float32
	pleEmb  *Matrix // PLEVocab x layers*PLEDim
	pleIn   *Matrix // layers*PLEDim x hidden
	pleNrm  []float32
	layers  []gemma4Layer
	ropes   []rope.Spec     // the distinct RoPE specs of the layers
	ropeOf  []int           // layer -> index in ropes
	maps    []*mmap.Mapping // what the tensors alias
	scratch scratchPool[gemma4Scratch]
}

// gemma4Scratch is the memory of one Forward, kept between calls: each
// buffer has one meaning (n tokens' rows of it).
type gemma4Scratch struct {
	x        []float32 // the residual stream
	norm     []float32 // RMSNorm of x, the input of a block's projections
	branch   []float32 // a block's output, before it is added to x
	ple      []float32 // the per-layer inputs: token t's layer l at (t*L+l)*PLEDim
	pleRow   []float32 // one token's row of the per-layer embedding table
	q        []float32 // the query heads (normed, rotated)
	k, v     []float32 // the key and value projections, before their norms
	att      []float32 // the attention output, per query head
	gate, up []float32 // the MLP's projections; gate then holds act(gate)·up
	pleGate  []float32 // the per-layer input gate; then act(gate)·ple_l
	logits   []float32 // the logits when they are not returned
	ropes    []rope.Table
	in       Input
	attn     attnTask
	act      gateTask
}

func (s *gemma4Scratch) reset(o gemma4.Config, nropes, n int) {
	H, L, P := o.Hidden, len(o.Layers), o.PLEDim
	maxQ, maxFFN := o.MaxWidths()
	maxKV := 0
	for _, lo := range o.Layers {
		maxKV = max(maxKV, lo.KVHeads*lo.HeadDim)
	}
	s.x, s.norm, s.branch = grow(s.x, n*H), grow(s.norm, n*H), grow(s.branch, n*H)
	s.ple, s.pleRow, s.pleGate = grow(s.ple, n*L*P), grow(s.pleRow, L*P), grow(s.pleGate, n*P)
	s.q, s.att = grow(s.q, n*maxQ), grow(s.att, n*maxQ)
	s.k, s.v = grow(s.k, n*maxKV), grow(s.v, n*maxKV)
	s.gate, s.up = grow(s.gate, n*maxFFN), grow(s.up, n*maxFFN)
	s.ropes = grow(s.ropes, nropes)
}

// LoadGemma4 opens the Hugging Face model directory dir (config.json,
// *.safetensors; F32, F16 or BF16 weights) and binds a gemma4 text model to
// it. The weights stay memory-mapped until Close. pool may be nil: the
// model then makes one (one worker per CPU), which its Close ends.
func LoadGemma4(dir string, pool *Pool) (*Gemma4, error) {
	d, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %w", err)
	}
	m, err := bindGemma4(d, pool)
	if err != nil {
		d.Close()
		return nil, err
	}
	m.dir = d
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

// Close ends the worker pool the loader made and releases the weights'
// mappings.
func (m *Gemma4) Close() error {
	if m.ownPool {
		m.pool.Close()
		m.ownPool = false
	}
	if m.dir == nil {
		return nil
	}
	err := m.dir.Close()
	m.dir = nil
	return err
}

// SetFingerprint sets the model's identity in Config: engine/load computes
// it (load.Fingerprint), so every backend reports the same one.
func (m *Gemma4) SetFingerprint(fp string) { m.cfg.Fingerprint = fp }

// Arch returns the model's architecture description.
func (m *Gemma4) Arch() gemma4.Config { return m.opt }

// CheckFiles implements model.FileChecker: an error wrapping
// model.ErrModelChanged when a weights file changed on disk since it was
// loaded.
func (m *Gemma4) CheckFiles() error { return checkFiles(m.maps) }

// Config implements model.Backend.
func (m *Gemma4) Config() model.Config { return m.cfg }

// Widths implements model.Backend: the CPU runs any width.
func (m *Gemma4) Widths() []int { return nil }

// gemma4Weights binds tensors of a safetensors directory by name, checking
// shapes; every error names the directory and the tensor.
type gemma4Weights struct{ d *safetensors.Dir }

func (w gemma4Weights) info(name string) (safetensors.TensorInfo, error) {
	t, ok := w.d.Tensor(name)
	if !ok {
		return t, fmt.Errorf("cpu: gemma4: %s: missing tensor %q", w.d.Path(), name)
	}
	return t, nil
}

func (w gemma4Weights) matrix(want arch.Tensor) (*Matrix, error) {
	t, err := w.info(want.Name)
	if err != nil {
		return nil, err
	}
	rows, cols := want.Rows, want.Cols
	if len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != cols {
		return nil, fmt.Errorf("cpu: gemma4: %s: tensor %q has shape %v, want [%d %d]", t.File, t.Name, t.Shape, rows, cols)
	}
	var typ gguf.Type
	switch t.DType {
	case safetensors.F32:
		typ = gguf.F32
	case safetensors.F16:
		typ = gguf.F16
	case safetensors.BF16:
		typ = gguf.BF16
	default:
		return nil, fmt.Errorf("cpu: gemma4: %s: tensor %q has dtype %s (want F32, F16 or BF16)", t.File, t.Name, t.DType)
	}
	data, err := w.d.TensorData(t.Name)
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %w", err)
	}
	mat, err := NewMatrix(t.Name, typ, rows, cols, data)
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %s: %w", t.File, err)
	}
	return mat, nil
}

func (w gemma4Weights) vector(want arch.Tensor) ([]float32, error) {
	t, err := w.info(want.Name)
	if err != nil {
		return nil, err
	}
	if len(t.Shape) != 1 || t.Shape[0] != want.Cols {
		return nil, fmt.Errorf("cpu: gemma4: %s: tensor %q has shape %v, want [%d]", t.File, t.Name, t.Shape, want.Cols)
	}
	v, _, err := w.d.Float32s(t.Name)
	if err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %w", err)
	}
	return v, nil
}

// bindGemma4 reads the config and binds every weight of d by the names
// engine/arch/gemma4 gives.
func bindGemma4(d *safetensors.Dir, pool *Pool) (_ *Gemma4, err error) {
	defer mmap.Guard(&err, d.Mappings()...)()
	o, err := gemma4.ParseConfig(d.Path()+"/config.json", d.Config())
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	prefix := gemma4.Prefix(func(name string) bool { _, ok := d.Tensor(name); return ok })
	w := gemma4Weights{d: d}
	m := &Gemma4{opt: o, maps: d.Mappings()}
	g := o.Globals(prefix)
	if m.embed, err = w.matrix(g.Embed); err != nil {
		return nil, err
	}
	m.out = m.embed
	if !o.Tied {
		if m.out, err = w.matrix(g.Out); err != nil {
			return nil, err
		}
	}
	if m.norm, err = w.vector(g.Norm); err != nil {
		return nil, err
	}
	if o.PLEDim > 0 {
		if m.pleEmb, err = w.matrix(g.PLEEmbed); err != nil {
			return nil, err
		}
		if m.pleIn, err = w.matrix(g.PLEProj); err != nil {
			return nil, err
		}
		if m.pleNrm, err = w.vector(g.PLENorm); err != nil {
			return nil, err
		}
	}
	m.layers = make([]gemma4Layer, len(o.Layers))
	for i := range m.layers {
		l, lw := &m.layers[i], o.Layer(i, prefix)
		vecs := []struct {
			dst *[]float32
			t   arch.Tensor
		}{
			{&l.inNorm, lw.InNorm}, {&l.postAttnNorm, lw.PostAttnNorm}, {&l.preFFNorm, lw.PreFFNorm},
			{&l.postFFNorm, lw.PostFFNorm}, {&l.qNorm, lw.QNorm}, {&l.kNorm, lw.KNorm}, {&l.plePostNorm, lw.PLEPostNorm},
		}
		mats := []struct {
			dst **Matrix
			t   arch.Tensor
		}{
			{&l.wq, lw.Q}, {&l.wo, lw.O}, {&l.gate, lw.Gate}, {&l.up, lw.Up}, {&l.down, lw.Down},
			{&l.wk, lw.K}, {&l.wv, lw.V}, {&l.pleGate, lw.PLEGate}, {&l.pleProj, lw.PLEProj},
		}
		for _, v := range vecs {
			if v.t.Name != "" {
				if *v.dst, err = w.vector(v.t); err != nil {
					return nil, err
				}
			}
		}
		for _, x := range mats {
			if x.t.Name != "" {
				if *x.dst, err = w.matrix(x.t); err != nil {
					return nil, err
				}
			}
		}
		// The per-layer scalar is a buffer the library initialises to 1
		// when a checkpoint lacks it.
		l.scalar = 1
		if _, ok := d.Tensor(lw.Scalar.Name); ok {
			s, err := w.vector(lw.Scalar)
			if err != nil {
				return nil, err
			}
			l.scalar = s[0]
		}
	}
	// Every weight of the text model must be bound: one left over (a layer
	// past num_hidden_layers, PLE tables with per-layer inputs off) would
	// be ignored and the model would compute garbage. Tensors outside the
	// text model (a multimodal checkpoint's vision and audio towers, a
	// tied lm_head the library ignores too) are not ours to judge.
	var unread []string
	file := d.Path()
	for _, t := range d.Unread() {
		if strings.HasPrefix(t.Name, prefix) {
			if unread = append(unread, t.Name); len(unread) == 1 {
				file = t.File
			}
		}
	}
	if err := unboundTensors("cpu: gemma4", file, unread, prefix+"layers.", "config.json num_hidden_layers", len(o.Layers)); err != nil {
		return nil, err
	}
	if err := m.plan(pool); err != nil {
		return nil, fmt.Errorf("cpu: gemma4: %s: %w", d.Path(), err)
	}
	return m, nil
}

// plan completes a model whose weights are bound: its Config, RoPE specs
// and pool.
func (m *Gemma4) plan(pool *Pool) error {
	o := m.opt
	geo, err := o.Geometry()
	if err != nil {
		return err
	}
	m.ropes, m.ropeOf = o.Ropes()
	for _, s := range m.ropes {
		if err := s.Validate(); err != nil {
			return err
		}
	}
	m.cfg = model.Config{Arch: "gemma4", VocabSize: o.Vocab, Hidden: o.Hidden, ContextLen: o.Context, KV: geo,
		BOS: o.BOS, EOS: slices.Clone(o.EOS)}
	m.pool = pool
	if m.pool == nil {
		m.pool, m.ownPool = NewPool(0), true
	}
	return nil
}

// ErrGemma4Input is wrapped by Forward's errors for tokens outside the
// vocabulary or a cache of another geometry.
var ErrGemma4Input = errors.New("cpu: gemma4: bad input")

// Forward implements model.Backend: embeddings and per-layer inputs, then
// each layer's attention, MLP and per-layer-input blocks, then the
// softcapped logits. Every per-token step (embedding, norms, RoPE,
// attention, activations) reads only that token's row, and the matrix
// kernels compute each row in a fixed order, so the logits of a token do
// not depend on how many tokens share the call.
//
// When a weights file was truncated on disk under its mapping, the call
// fails with an error wrapping model.ErrModelChanged (and rolls its rows
// back) instead of crashing.
func (m *Gemma4) Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want model.Output) (_ model.Result, err error) {
	defer func(old bool) { err = endGuard(recover(), old, err, m.maps, cache) }(debug.SetPanicOnFault(true))
	if err := m.check(tokens, cache); err != nil {
		return model.Result{}, err
	}
	n := len(tokens)
	if err := cache.Reserve(start, n); err != nil {
		return model.Result{}, err
	}
	s := m.scratch.get()
	defer m.scratch.put(s)
	s.reset(m.opt, len(m.ropes), n)
	m.embedTokens(s, tokens)
	if m.opt.PLEDim > 0 {
		m.perLayerInputs(s, tokens)
	}
	for i, spec := range m.ropes {
		s.ropes[i].Fill(spec, start, n)
	}
	for li := range m.layers {
		if err := ctx.Err(); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		m.attention(s, cache, li, start, n)
		m.mlp(s, li)
		if m.opt.PLEDim > 0 {
			m.perLayerInput(s, li, n)
		}
		if c := m.layers[li].scalar; c != 1 {
			for i := range s.x {
				s.x[i] *= c
			}
		}
	}
	o := m.opt
	logits, n, err := outputLogits(ctx, m.pool, cache, s.x, n, o.Hidden, m.norm, o.Eps, m.out, o.Vocab, want, &s.logits, &s.in)
	if err != nil {
		return model.Result{}, err
	}
	if c := o.Softcap; c > 0 {
		for i, z := range logits {
			logits[i] = float32(tanh64(float64(z/c))) * c
		}
	}
	return Result(logits, n, o.Vocab, want), nil
}

// check rejects tokens outside the vocabularies and a cache of another
// geometry.
func (m *Gemma4) check(tokens []int32, cache *kv.Cache) error {
	o := m.opt
	if len(tokens) == 0 {
		return fmt.Errorf("%w: forward of no tokens", ErrGemma4Input)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= o.Vocab || (m.pleEmb != nil && int(id) >= o.PLEVocab) {
			return fmt.Errorf("%w: token id %d outside the vocabulary 0..%d", ErrGemma4Input, id, o.Vocab-1)
		}
	}
	if g := cache.Geometry(); !slices.Equal(g.Layers, m.cfg.KV.Layers) || g.Context > m.cfg.KV.Context {
		return fmt.Errorf("%w: the cache's geometry is not this model's", ErrGemma4Input)
	}
	return nil
}

// embedTokens writes the tokens' embedding rows times EmbedScale to x.
func (m *Gemma4) embedTokens(s *gemma4Scratch, tokens []int32) {
	H, scale := m.opt.Hidden, m.opt.EmbedScale()
	for t, id := range tokens {
		row := m.embed.Row(s.x[t*H:], int(id))
		for i := range row {
			row[i] *= scale
		}
	}
}

// perLayerInputs computes every layer's per-layer input of every token
// from the embeddings in x (gemma4.PLEScales).
func (m *Gemma4) perLayerInputs(s *gemma4Scratch, tokens []int32) {
	o := m.opt
	L, P, k := len(o.Layers), o.PLEDim, o.PLEScales()
	s.in.Reset(s.x, o.Hidden)
	m.pleIn.MatMulInput(m.pool, s.ple, &s.in)
	for t, id := range tokens {
		m.pleEmb.Row(s.pleRow, int(id))
		row := s.ple[t*L*P : (t+1)*L*P]
		for i := range row {
			row[i] *= k.Proj
		}
		RMSNormRows(row, row, m.pleNrm, P, o.Eps)
		for i, e := range s.pleRow {
			row[i] = (row[i] + float32(e*k.Emb)) * k.Mix
		}
	}
}

// attention is the attention block of layer li: q (and, on a layer that
// owns its KV, k and v into the cache at start..) from the normed x, then
// x += RMSNorm(Wo·attend(q, K, V)).
func (m *Gemma4) attention(s *gemma4Scratch, cache *kv.Cache, li, start, n int) {
	o, l, lo := m.opt, &m.layers[li], m.opt.Layers[li]
	hd, qd, kvd := lo.HeadDim, o.Heads*lo.HeadDim, lo.KVHeads*lo.HeadDim
	rt := &s.ropes[m.ropeOf[li]]
	q, att := s.q[:n*qd], s.att[:n*qd]
	RMSNormRows(s.norm, s.x, l.inNorm, o.Hidden, o.Eps)
	s.in.Reset(s.norm, o.Hidden)
	l.wq.MatMulInput(m.pool, q, &s.in)
	for t := range n {
		for h := range o.Heads {
			head := q[t*qd+h*hd : t*qd+(h+1)*hd]
			RMSNorm(head, head, l.qNorm, o.Eps)
			rt.Apply(head, t)
		}
	}
	if lo.Source == li {
		k, v := s.k[:n*kvd], s.v[:n*kvd]
		l.wk.MatMulInput(m.pool, k, &s.in)
		l.wv.MatMulInput(m.pool, v, &s.in)
		for t := range n {
			dk, dv := cache.K(li, start+t), cache.V(li, start+t)
			for h := range lo.KVHeads {
				RMSNorm(dk[h*hd:(h+1)*hd], k[t*kvd+h*hd:t*kvd+(h+1)*hd], l.kNorm, o.Eps)
				rt.Apply(dk[h*hd:(h+1)*hd], t)
				RMSNorm(dv[h*hd:(h+1)*hd], v[t*kvd+h*hd:t*kvd+(h+1)*hd], nil, o.Eps)
			}
		}
	}
	s.attn.attend(m.pool, cache, li, start, n, q, o.Heads, o.Heads/lo.KVHeads, hd, o.AttentionScale(), att)
	s.in.Reset(att, qd)
	l.wo.MatMulInput(m.pool, s.branch, &s.in)
	RMSNormRows(s.branch, s.branch, l.postAttnNorm, o.Hidden, o.Eps)
	Add(s.x, s.branch)
}

// mlp is the feed-forward block of layer li:
// x += RMSNorm(Wdown·(GELUTanh(Wgate·n)·Wup·n)).
func (m *Gemma4) mlp(s *gemma4Scratch, li int) {
	o, l, ffn := m.opt, &m.layers[li], m.opt.Layers[li].FFN
	n := len(s.x) / o.Hidden
	gate, up := s.gate[:n*ffn], s.up[:n*ffn]
	RMSNormRows(s.norm, s.x, l.preFFNorm, o.Hidden, o.Eps)
	s.in.Reset(s.norm, o.Hidden)
	l.gate.MatMulInput(m.pool, gate, &s.in)
	l.up.MatMulInput(m.pool, up, &s.in)
	s.act.mul(m.pool, gate, up, geluMulRange)
	s.in.Reset(gate, ffn)
	l.down.MatMulInput(m.pool, s.branch, &s.in)
	RMSNormRows(s.branch, s.branch, l.postFFNorm, o.Hidden, o.Eps)
	Add(s.x, s.branch)
}

// perLayerInput is the per-layer-input block of layer li:
// x += RMSNorm(Wproj·(GELUTanh(Wgate·x)·ple_li)).
func (m *Gemma4) perLayerInput(s *gemma4Scratch, li, n int) {
	o, l := m.opt, &m.layers[li]
	L, P := len(o.Layers), o.PLEDim
	s.in.Reset(s.x, o.Hidden)
	l.pleGate.MatMulInput(m.pool, s.pleGate, &s.in)
	for t := range n {
		geluMulRange(s.pleGate[t*P:(t+1)*P], s.ple[(t*L+li)*P:(t*L+li+1)*P])
	}
	s.in.Reset(s.pleGate, P)
	l.pleProj.MatMulInput(m.pool, s.branch, &s.in)
	RMSNormRows(s.branch, s.branch, l.plePostNorm, o.Hidden, o.Eps)
	Add(s.x, s.branch)
}
