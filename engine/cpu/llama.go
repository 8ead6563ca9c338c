package cpu

import (
	"context"
	"fmt"
	"runtime/debug"

	"anechat/engine/arch"
	"anechat/engine/arch/llama"
	"anechat/engine/arch/rope"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
)

// llamaLayer holds the weights of one decoder layer.
type llamaLayer struct {
	attnNorm, ffnNorm []float32
	wq, wk, wv, wo    *Matrix
	gate, up, down    *Matrix
}

// Llama executes the llama architecture (engine/arch/llama: stories260K,
// SmolLM2) on the CPU. It is a model.Backend: concurrent Forward calls on
// distinct caches are safe (each takes its own scratch).
type Llama struct {
	opt     llama.Config
	cfg     model.Config
	pool    *Pool
	ownPool bool // the pool was made by LoadLlama: Close closes it
	embd    *Matrix
	out     *Matrix
	outNorm []float32
	layers  []llamaLayer
	rope    rope.Spec
	file    *gguf.File      // owned when opened by OpenLlama
	maps    []*mmap.Mapping // what the tensors alias (nil entries: bytes in the heap)
	scratch scratchPool[llamaScratch]
}

// llamaScratch is the memory of one Forward, kept between calls: each
// buffer has one meaning (n tokens' rows of it).
type llamaScratch struct {
	x        []float32 // the residual stream
	norm     []float32 // RMSNorm of x, the input of a block's projections
	branch   []float32 // a block's output, before it is added to x
	q, k, v  []float32 // the attention projections (q, k rotated)
	att      []float32 // the attention output, per query head
	gate, up []float32 // the MLP's projections; gate then holds act(gate)·up
	logits   []float32 // the logits when they are not returned
	rope     rope.Table
	in       Input
	attn     attnTask
	act      gateTask
}

func (s *llamaScratch) reset(o llama.Config, n int) {
	H, qd, kvd := o.Hidden, o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	s.x, s.norm, s.branch = grow(s.x, n*H), grow(s.norm, n*H), grow(s.branch, n*H)
	s.q, s.k, s.v, s.att = grow(s.q, n*qd), grow(s.k, n*kvd), grow(s.v, n*kvd), grow(s.att, n*qd)
	s.gate, s.up = grow(s.gate, n*o.FFN), grow(s.up, n*o.FFN)
}

// tensorSource is where weights come from (a GGUF file).
type tensorSource interface {
	Path() string
	Tensor(name string) (gguf.TensorInfo, bool)
	TensorData(name string) ([]byte, error)
}

// loadMatrix binds tensor t as a t.Rows×t.Cols matrix (GGUF dims [cols, rows]).
func loadMatrix(src tensorSource, t arch.Tensor) (*Matrix, error) {
	name, rows, cols := t.Name, t.Rows, t.Cols
	ti, ok := src.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("cpu: %s: missing tensor %q", src.Path(), name)
	}
	if !Supported(ti.Type) {
		return nil, fmt.Errorf("cpu: %s: tensor %q: type %s is not supported by the CPU backend (want F32, F16, BF16, Q8_0, Q4_0 or Q4_1)", src.Path(), name, ti.Type)
	}
	if len(ti.Dims) != 2 || ti.Dims[0] != cols || ti.Dims[1] != rows {
		return nil, fmt.Errorf("cpu: %s: tensor %q has shape %v, want [%d %d]", src.Path(), name, ti.Dims, cols, rows)
	}
	data, err := src.TensorData(name)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	m, err := NewMatrix(name, ti.Type, rows, cols, data)
	if err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", src.Path(), err)
	}
	return m, nil
}

// loadVector reads the 1-D tensor t of t.Cols elements as float32.
func loadVector(src tensorSource, t arch.Tensor) ([]float32, error) {
	name, n := t.Name, t.Cols
	ti, ok := src.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("cpu: %s: missing tensor %q", src.Path(), name)
	}
	if len(ti.Dims) != 1 || ti.Dims[0] != n {
		return nil, fmt.Errorf("cpu: %s: tensor %q has shape %v, want [%d]", src.Path(), name, ti.Dims, n)
	}
	data, err := src.TensorData(name)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	m, err := NewMatrix(name, ti.Type, 1, n, data)
	if err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", src.Path(), err)
	}
	return m.Row(make([]float32, n), 0), nil
}

// LoadLlama binds the llama weights of f (engine/arch/llama names them).
// The weights stay in f's mapping: f must stay open while the model is
// used. pool may be nil: the model then makes one (one worker per CPU),
// which its Close ends.
func LoadLlama(f *gguf.File, pool *Pool) (_ *Llama, err error) {
	defer mmap.Guard(&err, f.Mapping())()
	o, err := llama.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	m := &Llama{opt: o, pool: pool, rope: o.Rope(), maps: []*mmap.Mapping{f.Mapping()}}
	if err := m.rope.Validate(); err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", f.Path(), err)
	}
	embd, out, norm := o.Globals()
	if m.embd, err = loadMatrix(f, embd); err != nil {
		return nil, err
	}
	m.out = m.embd // tied embeddings (SmolLM2)
	if !o.Tied {
		if m.out, err = loadMatrix(f, out); err != nil {
			return nil, err
		}
	}
	if m.outNorm, err = loadVector(f, norm); err != nil {
		return nil, err
	}
	m.layers = make([]llamaLayer, o.Layers)
	for i := range m.layers {
		l, w := &m.layers[i], o.Layer(i)
		if l.attnNorm, err = loadVector(f, w.AttnNorm); err != nil {
			return nil, err
		}
		if l.ffnNorm, err = loadVector(f, w.FFNNorm); err != nil {
			return nil, err
		}
		for _, b := range []struct {
			dst **Matrix
			t   arch.Tensor
		}{
			{&l.wq, w.Q}, {&l.wk, w.K}, {&l.wv, w.V}, {&l.wo, w.O},
			{&l.gate, w.Gate}, {&l.up, w.Up}, {&l.down, w.Down},
		} {
			if *b.dst, err = loadMatrix(f, b.t); err != nil {
				return nil, err
			}
		}
	}
	var unread []string
	for _, t := range f.Unread() {
		unread = append(unread, t.Name)
	}
	if err := unboundTensors("cpu", f.Path(), unread, "blk.", "llama.block_count", o.Layers); err != nil {
		return nil, err
	}
	m.cfg = model.Config{Arch: "llama", VocabSize: o.Vocab, Hidden: o.Hidden, ContextLen: o.Context, KV: o.Geometry(),
		BOS: o.BOS, EOS: o.EOS}
	if m.pool == nil {
		m.pool, m.ownPool = NewPool(0), true
	}
	return m, nil
}

// Arch returns the model's architecture description.
func (m *Llama) Arch() llama.Config { return m.opt }

// CheckFiles implements model.FileChecker: an error wrapping
// model.ErrModelChanged when the weights file changed on disk since it was
// loaded.
func (m *Llama) CheckFiles() error { return checkFiles(m.maps) }

// Config implements model.Backend.
func (m *Llama) Config() model.Config { return m.cfg }

// Widths implements model.Backend: the CPU runs any width.
func (m *Llama) Widths() []int { return nil }

// Forward implements model.Backend: embedding, then each layer's attention
// and MLP blocks, then the logits. When the weights file was truncated on
// disk under the mapping, the call fails with an error wrapping
// model.ErrModelChanged (and rolls its rows back) instead of crashing.
func (m *Llama) Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want model.Output) (_ model.Result, err error) {
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
	s.reset(m.opt, n)
	for t, id := range tokens {
		m.embd.Row(s.x[t*m.opt.Hidden:], int(id))
	}
	s.rope.Fill(m.rope, start, n)
	for li := range m.layers {
		if err := ctx.Err(); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		m.attention(s, cache, li, start, n)
		m.mlp(s, li)
	}
	logits, n, err := outputLogits(ctx, m.pool, cache, s.x, n, m.opt.Hidden, m.outNorm, m.opt.Eps, m.out, m.opt.Vocab, want, &s.logits, &s.in)
	if err != nil {
		return model.Result{}, err
	}
	return Result(logits, n, m.opt.Vocab, want), nil
}

// check rejects tokens outside the vocabulary and a cache of another model.
func (m *Llama) check(tokens []int32, cache *kv.Cache) error {
	if len(tokens) == 0 {
		return fmt.Errorf("cpu: llama: forward of no tokens")
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= m.opt.Vocab {
			return fmt.Errorf("cpu: llama: token id %d outside the vocabulary 0..%d", id, m.opt.Vocab-1)
		}
	}
	if g := cache.Geometry(); len(g.Layers) != m.opt.Layers {
		return fmt.Errorf("cpu: llama: cache has %d layers, model %d", len(g.Layers), m.opt.Layers)
	}
	return nil
}

// attention is the attention block of layer li: x += Wo·attend(q, K, V),
// the n tokens' rotated K and V rows written to the cache at start...
func (m *Llama) attention(s *llamaScratch, cache *kv.Cache, li, start, n int) {
	o, l := m.opt, &m.layers[li]
	hd, qd, kvd := o.HeadDim, o.Heads*o.HeadDim, o.KVHeads*o.HeadDim
	RMSNormRows(s.norm, s.x, l.attnNorm, o.Hidden, o.Eps)
	s.in.Reset(s.norm, o.Hidden)
	l.wq.MatMulInput(m.pool, s.q, &s.in)
	l.wk.MatMulInput(m.pool, s.k, &s.in)
	l.wv.MatMulInput(m.pool, s.v, &s.in)
	for t := range n {
		for h := range o.Heads {
			s.rope.Apply(s.q[t*qd+h*hd:], t)
		}
		for h := range o.KVHeads {
			s.rope.Apply(s.k[t*kvd+h*hd:], t)
		}
		copy(cache.K(li, start+t), s.k[t*kvd:(t+1)*kvd])
		copy(cache.V(li, start+t), s.v[t*kvd:(t+1)*kvd])
	}
	s.attn.attend(m.pool, cache, li, start, n, s.q, o.Heads, o.Heads/o.KVHeads, hd, o.AttentionScale(), s.att)
	s.in.Reset(s.att, qd)
	l.wo.MatMulInput(m.pool, s.branch, &s.in)
	Add(s.x, s.branch)
}

// mlp is the feed-forward block of layer li: x += Wdown·(SiLU(Wgate·n)·Wup·n).
func (m *Llama) mlp(s *llamaScratch, li int) {
	o, l := m.opt, &m.layers[li]
	RMSNormRows(s.norm, s.x, l.ffnNorm, o.Hidden, o.Eps)
	s.in.Reset(s.norm, o.Hidden)
	l.gate.MatMulInput(m.pool, s.gate, &s.in)
	l.up.MatMulInput(m.pool, s.up, &s.in)
	s.act.mul(m.pool, s.gate, s.up, siluMulRange)
	s.in.Reset(s.gate, o.FFN)
	l.down.MatMulInput(m.pool, s.branch, &s.in)
	Add(s.x, s.branch)
}

// outputLogits is the end of a Forward: the final RMSNorm of the n hidden
// rows x (H floats each, normed in place) and the output projection, of the
// last row only when want has model.Last; it returns the flat logits and
// their row count. The logits go to *buf (grown) unless want has model.Logits, when they are
// returned and so freshly allocated; in is the scratch Input of the
// projection. A cancelled ctx rolls the cache's pending rows back.
func outputLogits(ctx context.Context, p *Pool, cache *kv.Cache, x []float32, n, H int, norm []float32, eps float32, out *Matrix, vocab int, want model.Output, buf *[]float32, in *Input) ([]float32, int, error) {
	RMSNormRows(x, x, norm, H, eps)
	if err := ctx.Err(); err != nil {
		cache.Rollback()
		return nil, 0, err
	}
	if want&model.Last != 0 {
		x, n = x[(n-1)*H:n*H], 1
	}
	logits := logitsBuf(buf, n, vocab, want&model.Logits != 0)
	in.Reset(x, H)
	out.MatMulInput(p, logits, in)
	return logits, n, nil
}

// Result packages the flat logits of n positions as what want asks for
// (model.Logits rows and/or model.Argmax ids).
func Result(logits []float32, n, vocab int, want model.Output) model.Result {
	var r model.Result
	if want&model.Logits != 0 {
		r.Logits = make([][]float32, n)
		for t := range n {
			r.Logits[t] = logits[t*vocab : (t+1)*vocab : (t+1)*vocab]
		}
	}
	if want&model.Argmax != 0 {
		r.Argmax = make([]int32, n)
		for t := range n {
			r.Argmax[t] = Argmax(logits[t*vocab : (t+1)*vocab])
		}
	}
	return r
}

// OpenLlama opens the GGUF file at path and binds its llama weights. The
// returned model keeps the file mapped until Close.
func OpenLlama(path string, pool *Pool) (*Llama, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := LoadLlama(f, pool)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.file = f
	return m, nil
}

// File is the GGUF file the weights come from (nil when loaded from a file
// the caller owns).
func (m *Llama) File() *gguf.File { return m.file }

// SetFingerprint sets the model's identity in Config: engine/load computes
// it (load.Fingerprint), so every backend reports the same one.
func (m *Llama) SetFingerprint(fp string) { m.cfg.Fingerprint = fp }

// Close ends the worker pool LoadLlama made and unmaps the file opened by
// OpenLlama; the model must not be used afterwards.
func (m *Llama) Close() error {
	if m.ownPool {
		m.pool.Close()
		m.ownPool = false
	}
	if m.file == nil {
		return nil
	}
	f := m.file
	m.file = nil
	return f.Close()
}
