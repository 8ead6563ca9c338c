package cpu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	"anechat/engine/arch/rope"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
)

// decoder is every model the CPU runs (Llama, Qwen, Gemma3 and Gemma4
// embed it): the weights outside the layers, the layers, and what a
// Forward needs besides; its methods are the models' model.Backend and
// lifecycle methods. An architecture's loader binds its weights (binder)
// and says what differs: the embedding scale, the per-layer inputs, the
// layers' blocks, the RoPE specs, the logit softcap.
type decoder struct {
	cfg model.Config
	// hidden is the residual width, eps the RMSNorm epsilon of every norm.
	hidden int
	eps    float32
	// ids bounds the token ids a Forward accepts (0..ids-1): the
	// vocabulary, or the per-layer embedding's rows when fewer.
	ids int
	// embd is the embedding table; embedScale multiplies its rows (0:
	// none).
	embd       *Matrix
	embedScale float32
	// ple computes gemma4's per-layer inputs (nil: the model has none).
	ple    *perLayerEmbedding
	layers []layer
	// norm is the final norm, out the output projection (embd when tied),
	// softcap the logits' cap Softcap·tanh(z/Softcap) (0: none).
	norm    []float32
	out     *Matrix
	softcap float32
	// ropes are the distinct RoPE specs of the layers: a Forward fills
	// one table of each (attention.rope indexes them).
	ropes   []rope.Spec
	widths  widths
	pool    *Pool
	ownPool bool      // the pool was made by the loader: Close closes it
	owned   io.Closer // the file or directory the model opened (nil: the caller's)
	maps    []*mmap.Mapping
	scratch scratchPool[pass]
}

// A layer is one decoder layer's weights and its forward pass: forward
// reads and updates the residual rows of p (as layer li of the model).
type layer interface {
	forward(p *pass, li int)
	// blocks returns the layer's attention and MLP, whose widths size
	// the pass.
	blocks() (*attention, *mlp)
}

// Every model of the package runs on the decoder: a model.Backend that
// names its kernels and checks its files.
var _ = []interface {
	backend
	model.KernelNamer
	model.FileChecker
}{(*Llama)(nil), (*Qwen)(nil), (*Gemma3)(nil), (*Gemma4)(nil)}

// finish completes a model whose weights are bound: cfg, the per-call
// widths, the pool (made when nil) and what the weights alias.
func (m *decoder) finish(cfg model.Config, src weightSource, pool *Pool) error {
	if err := cfg.KV.Validate(); err != nil {
		return fmt.Errorf("cpu: %s: %w", src.Path(), err)
	}
	for _, s := range m.ropes {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("cpu: %s: %w", src.Path(), err)
		}
	}
	m.cfg = cfg
	m.ids = cfg.VocabSize
	if m.ple != nil {
		m.ids = min(m.ids, m.ple.table.Rows)
	}
	m.widths = m.measure()
	m.maps = src.mappings()
	m.pool = pool
	if m.pool == nil {
		m.pool, m.ownPool = NewPool(0), true
	}
	return nil
}

// Config implements model.Backend.
func (m *decoder) Config() model.Config { return m.cfg }

// Widths implements model.Backend: the CPU runs any width.
func (m *decoder) Widths() []int { return nil }

// Kernels implements model.KernelNamer: the kernel set this process runs.
func (m *decoder) Kernels() string { return Kernels() }

// CheckFiles implements model.FileChecker: an error wrapping
// model.ErrModelChanged when a weights file changed on disk since it was
// loaded.
func (m *decoder) CheckFiles() error { return checkFiles(m.maps) }

// SetFingerprint sets the model's identity in Config: engine/load computes
// it (load.Fingerprint), so every backend reports the same one.
func (m *decoder) SetFingerprint(fp string) { m.cfg.Fingerprint = fp }

// File is the GGUF file the weights come from when the model opened it
// (nil when the caller owns the file, or the weights are not a GGUF file).
func (m *decoder) File() *gguf.File {
	f, _ := m.owned.(*gguf.File)
	return f
}

// own makes the model close c (the file or directory its weights alias)
// when it is closed.
func (m *decoder) own(c io.Closer) { m.owned = c }

// Close ends the worker pool the loader made and releases the file or
// directory the model opened; the model must not be used afterwards.
func (m *decoder) Close() error {
	if m.ownPool {
		m.pool.Close()
		m.ownPool = false
	}
	if m.owned == nil {
		return nil
	}
	c := m.owned
	m.owned = nil
	return c.Close()
}

// ErrInput is wrapped by Forward's errors for tokens outside the
// vocabulary and a cache of another geometry.
var ErrInput = errors.New("cpu: bad input")

// Forward implements model.Backend: the embedding (and per-layer inputs),
// each layer's blocks, then the logits. Every per-token step reads only
// that token's row and the kernels compute each row in a fixed order, so
// the logits of a token do not depend on how many tokens share the call
// (row independence). When a weights file was truncated on disk under its
// mapping, the call fails with an error wrapping model.ErrModelChanged
// (and rolls its rows back) instead of crashing.
func (m *decoder) Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want model.Output) (_ model.Result, err error) {
	defer func(old bool) { err = endGuard(recover(), old, err, m.maps, cache) }(debug.SetPanicOnFault(true))
	if err := m.check(tokens, cache); err != nil {
		return model.Result{}, err
	}
	n := len(tokens)
	if err := cache.Reserve(start, n); err != nil {
		return model.Result{}, err
	}
	p := m.scratch.get()
	defer m.release(p)
	p.begin(m, cache, start, n)
	m.embed(p, tokens)
	for li, l := range m.layers {
		if err := ctx.Err(); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		l.forward(p, li)
	}
	logits, rows, err := m.logits(ctx, p, want)
	if err != nil {
		return model.Result{}, err
	}
	return result(logits, rows, m.cfg.VocabSize, want), nil
}

// check rejects tokens outside the vocabulary and a cache whose rows are
// not this model's (layers, heads, head dims, sharing; a context no
// longer than the model's). The windows are the cache's to choose: the
// attention honours kv.Cache.Visible.
func (m *decoder) check(tokens []int32, cache *kv.Cache) error {
	if len(tokens) == 0 {
		return fmt.Errorf("%w: %s: forward of no tokens", ErrInput, m.cfg.Arch)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= m.ids {
			return fmt.Errorf("%w: %s: token id %d outside the vocabulary 0..%d", ErrInput, m.cfg.Arch, id, m.ids-1)
		}
	}
	g, want := cache.Geometry(), m.cfg.KV
	if len(g.Layers) != len(want.Layers) || g.Context > want.Context {
		return fmt.Errorf("%w: %s: the cache's geometry is not this model's", ErrInput, m.cfg.Arch)
	}
	for i, l := range g.Layers {
		if w := want.Layers[i]; l.KVHeads != w.KVHeads || l.HeadDim != w.HeadDim || l.Source != w.Source {
			return fmt.Errorf("%w: %s: the cache's geometry is not this model's (layer %d)", ErrInput, m.cfg.Arch, i)
		}
	}
	return nil
}

// embed writes the tokens' embedding rows (times embedScale) to p.x, then
// the per-layer inputs when the model has them.
func (m *decoder) embed(p *pass, tokens []int32) {
	H := m.hidden
	for t, id := range tokens {
		row := m.embd.Row(p.x[t*H:], int(id))
		if m.embedScale != 0 {
			for i := range row {
				row[i] *= m.embedScale
			}
		}
	}
	if m.ple != nil {
		m.ple.forward(p, tokens)
	}
}

// logits is the end of a Forward: the final RMSNorm of the hidden rows
// (of the last only when want has model.Last) and the output projection,
// softcapped when the model says so; it returns the flat logits and their
// row count. The logits are the pass's buffer unless want has
// model.Logits, when they are returned and so freshly allocated. A
// cancelled ctx rolls the cache's pending rows back.
func (m *decoder) logits(ctx context.Context, p *pass, want model.Output) ([]float32, int, error) {
	H, x, n := m.hidden, p.x, p.n
	if want&model.Last != 0 {
		x, n = x[(n-1)*H:n*H], 1
	}
	RMSNormRows(x, x, m.norm, H, m.eps)
	if err := ctx.Err(); err != nil {
		p.cache.Rollback()
		return nil, 0, err
	}
	logits := logitsBuf(&p.logits, n, m.cfg.VocabSize, want&model.Logits != 0)
	p.in.Reset(x, H)
	m.out.MatMulInput(m.pool, logits, &p.in)
	if c := m.softcap; c > 0 {
		Softcap(logits, c)
	}
	return logits, n, nil
}

// result packages the flat logits of n positions as what want asks for
// (model.Logits rows and/or model.Argmax ids).
func result(logits []float32, n, vocab int, want model.Output) model.Result {
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
