package cpu

import (
	"fmt"

	"anechat/engine/arch"
	"anechat/engine/arch/rope"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
)

// ggufBase is what every model executed from one GGUF file (Qwen, Gemma3)
// keeps besides its weights: the Config it reports, the pool, the file and
// its mapping. Its methods are the models' model.Backend and lifecycle
// methods.
type ggufBase struct {
	cfg     model.Config
	pool    *Pool
	ownPool bool       // the pool was made by the loader: Close closes it
	file    *gguf.File // owned when opened by the Open function
	maps    []*mmap.Mapping
}

// Config implements model.Backend.
func (b *ggufBase) Config() model.Config { return b.cfg }

// Widths implements model.Backend: the CPU runs any width.
func (b *ggufBase) Widths() []int { return nil }

// CheckFiles implements model.FileChecker: an error wrapping
// model.ErrModelChanged when the weights file changed on disk since it was
// loaded.
func (b *ggufBase) CheckFiles() error { return checkFiles(b.maps) }

// SetFingerprint sets the model's identity in Config: engine/load computes
// it (load.Fingerprint), so every backend reports the same one.
func (b *ggufBase) SetFingerprint(fp string) { b.cfg.Fingerprint = fp }

// File is the GGUF file the weights come from (nil when loaded from a file
// the caller owns).
func (b *ggufBase) File() *gguf.File { return b.file }

// Close ends the worker pool the loader made and unmaps the file the Open
// function opened; the model must not be used afterwards.
func (b *ggufBase) Close() error {
	if b.ownPool {
		b.pool.Close()
		b.ownPool = false
	}
	if b.file == nil {
		return nil
	}
	f := b.file
	b.file = nil
	return f.Close()
}

// finish completes a model whose weights f holds: every tensor of f must
// be bound, the pool is made when nil, Config is filled from d and geo.
func (b *ggufBase) finish(f *gguf.File, d arch.Decoder, geo kv.Geometry, pool *Pool) error {
	var unread []string
	for _, t := range f.Unread() {
		unread = append(unread, t.Name)
	}
	if err := unboundTensors("cpu", f.Path(), unread, "blk.", d.Key("block_count"), d.Layers); err != nil {
		return err
	}
	if err := geo.Validate(); err != nil {
		return fmt.Errorf("cpu: %s: %w", f.Path(), err)
	}
	b.cfg = model.Config{Arch: d.Arch, VocabSize: d.Vocab, Hidden: d.Hidden, ContextLen: d.Context, KV: geo,
		BOS: d.BOS, EOS: append([]int32(nil), d.EOS...)}
	b.maps = []*mmap.Mapping{f.Mapping()}
	b.pool = pool
	if b.pool == nil {
		b.pool, b.ownPool = NewPool(0), true
	}
	return nil
}

// checkInput rejects tokens outside a vocab-token vocabulary and a cache
// of another geometry.
func (b *ggufBase) checkInput(tokens []int32, cache *kv.Cache) error {
	if len(tokens) == 0 {
		return fmt.Errorf("cpu: %s: forward of no tokens", b.cfg.Arch)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= b.cfg.VocabSize {
			return fmt.Errorf("cpu: %s: token id %d outside the vocabulary 0..%d", b.cfg.Arch, id, b.cfg.VocabSize-1)
		}
	}
	g := cache.Geometry()
	if len(g.Layers) != len(b.cfg.KV.Layers) || g.Context > b.cfg.KV.Context {
		return fmt.Errorf("cpu: %s: the cache's geometry is not this model's", b.cfg.Arch)
	}
	for i, l := range g.Layers {
		if l != b.cfg.KV.Layers[i] {
			return fmt.Errorf("cpu: %s: the cache's geometry is not this model's (layer %d)", b.cfg.Arch, i)
		}
	}
	return nil
}

// binder binds the tensors an architecture names, keeping the first error
// so that a loader lists its weights without checking each.
type binder struct {
	src tensorSource
	err error
}

// mat binds t as a matrix; nil for a zero Tensor or after an error.
func (b *binder) mat(t arch.Tensor) *Matrix {
	if b.err != nil || t.Name == "" {
		return nil
	}
	m, err := loadMatrix(b.src, t)
	b.err = err
	return m
}

// vec reads the vector t; nil for a zero Tensor or after an error.
func (b *binder) vec(t arch.Tensor) []float32 {
	if b.err != nil || t.Name == "" {
		return nil
	}
	v, err := loadVector(b.src, t)
	b.err = err
	return v
}

// decoderScratch is the memory of one Forward of a GGUF decoder (Qwen,
// Gemma3), kept between calls: each buffer has one meaning (n tokens'
// rows of it).
type decoderScratch struct {
	x        []float32 // the residual stream
	norm     []float32 // RMSNorm of x, the input of a block's projections
	branch   []float32 // a block's output, before it is added to x
	q, k, v  []float32 // the attention projections (q, k normed and rotated)
	att      []float32 // the attention output, per query head
	gate, up []float32 // the MLP's projections; gate then holds act(gate)·up
	logits   []float32 // the logits when they are not returned
	ropes    [2]rope.Table
	in       Input
	attn     attnTask
	act      gateTask
}

func (s *decoderScratch) reset(d arch.Decoder, n int) {
	H, qd, kvd := d.Hidden, d.Heads*d.HeadDim, d.KVHeads*d.HeadDim
	s.x, s.norm, s.branch = grow(s.x, n*H), grow(s.norm, n*H), grow(s.branch, n*H)
	s.q, s.k, s.v, s.att = grow(s.q, n*qd), grow(s.k, n*kvd), grow(s.v, n*kvd), grow(s.att, n*qd)
	s.gate, s.up = grow(s.gate, n*d.FFN), grow(s.up, n*d.FFN)
}

// headsNormRope applies, to each of the heads hd-wide heads of the n
// tokens' rows x (stride heads·hd), the RMSNorm by w (none when nil) and
// then the rotation of table rt.
func headsNormRope(x []float32, n, heads, hd int, w []float32, eps float32, rt *rope.Table) {
	for t := range n {
		for h := range heads {
			head := x[(t*heads+h)*hd : (t*heads+h+1)*hd]
			if w != nil {
				RMSNorm(head, head, w, eps)
			}
			rt.Apply(head, t)
		}
	}
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
