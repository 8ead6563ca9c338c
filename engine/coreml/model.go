package coreml

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"anechat/engine/coreml/mlcore"
	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/mmap"
	"anechat/engine/sample"
)

// ErrInput is wrapped by Forward's errors for tokens outside the
// vocabulary or a cache of another geometry.
var ErrInput = errors.New("coreml: bad input")

// Model runs a bundle through an Executor: it is the model.Backend of the
// Core ML backend. Every call is one function on every chunk in order —
// for a generation call (drafts or not, its unused rows padded) the
// generate function when it asks for ids only (model.Argmax: a greedy
// session) and the sample function when it asks for logits (a sampled
// session), for calls that ask only for the last row (model.Last) the
// prefill function — with the inputs built on the host from the sidecars,
// the architecture's RoPE tables, the exact masks and the KV rows of the
// caller's kv.Cache, and the new K/V rows written back into that cache as
// pending rows, never committed (DESIGN.md invariant 3). The host takes
// the second level of the blockwise argmax (blockArgmax) and applies the
// softcap to the logits (cpu.Softcap, as the CPU backend does).
//
// Calls are serialised (the buffers are the backend's, and the Neural
// Engine runs one call at a time anyway): concurrent Forward calls on
// distinct caches are safe and each returns what it would alone.
type Model struct {
	b      *Bundle
	run    Executor
	cfg    model.Config
	widths []int

	mu  sync.Mutex
	fns map[string]*function // by kind
	// kv holds each owning layer's cache tensors, shared by the two
	// functions (their shapes do not depend on the call width), so rows
	// copied for one are there for the other.
	kv      map[int]*kvPair
	scratch []float32
	ropes   map[string]*ropeRows
	stats   CallStats
	closed  bool
}

// function holds the buffers of one function kind: the host-built inputs
// (shared by every chunk that takes them) and every chunk's outputs; a
// chunk's carried inputs (hidden_in of chunk j+1, per_layer, k_new_s of an
// earlier chunk) are the buffers of the chunk that wrote them.
type function struct {
	kind  string
	width int
	host  map[string]*tensor
	kv    map[int]*kvPair // owning layer -> its k_cache/v_cache inputs
	out   []map[string]*tensor
	ins   []map[string]mlcore.Buffer
	outs  []map[string]mlcore.Buffer
	infos []*FunctionInfo
	all   []*tensor
}

// NewModel returns the model of an open bundle run by r. It allocates
// every function's buffers; Close releases them, the executor and the
// bundle. fingerprint is the model's identity (engine/load's).
func NewModel(b *Bundle, r Executor, fingerprint string) (*Model, error) {
	be := &Model{b: b, run: r, cfg: b.Config(), fns: map[string]*function{}, ropes: map[string]*ropeRows{}, kv: map[int]*kvPair{}}
	be.cfg.Fingerprint = fingerprint
	g := b.Manifest.Geometry
	for w := 1; w <= g.GenerateWidth; w++ {
		be.widths = append(be.widths, w)
	}
	if g.PrefillWidth > g.GenerateWidth {
		be.widths = append(be.widths, g.PrefillWidth)
	}
	for _, kind := range []string{KindGenerate, KindSample, KindPrefill} {
		f, err := be.allocate(kind)
		if err != nil {
			be.freeBuffers()
			return nil, err
		}
		be.fns[kind] = f
	}
	maxCols := b.embed.Cols
	if b.ple != nil {
		maxCols = max(maxCols, b.ple.Cols)
	}
	be.scratch = make([]float32, maxCols)
	for _, name := range b.plan.ropeNames() {
		be.ropes[name] = newRopeRows(b.plan.ropes[name], b.plan.headDims[name], g.Context)
	}
	return be, nil
}

// allocate makes the buffers of the functions a call of kind runs on every
// chunk (Manifest.Function: a sample call runs the generate function of
// the chunks before the last, on buffers of its own).
func (be *Model) allocate(kind string) (*function, error) {
	m := be.b.Manifest
	f := &function{kind: kind, host: map[string]*tensor{}}
	// alloc makes one buffer; shared asks the executor for memory its compute
	// units share with the host (IOSurfaces on a Mac), for float16 buffers
	// only: there is no int32 pixel buffer (research-ane.md §5).
	alloc := func(t TensorInfo, shared bool) (*tensor, error) {
		dt, err := dtypeOf(be.run, t.DType)
		if err != nil {
			return nil, err
		}
		var x *tensor
		if sa, ok := be.run.(SharedAllocator); ok && shared && dt == mlcore.Float16 {
			buf, free, aerr := sa.AllocShared(t.Shape)
			if err = aerr; err == nil {
				x, err = tensorOf(buf, free)
			}
		} else {
			x, err = newTensor(dt, t.Shape)
		}
		if err != nil {
			return nil, fmt.Errorf("coreml: %s buffer %s%v: %w", kind, t.Name, t.Shape, err)
		}
		f.all = append(f.all, x)
		return x, nil
	}
	for j := range m.Chunks {
		info := m.Function(j, kind)
		f.width = info.Width
		f.infos = append(f.infos, info)
		outs := map[string]*tensor{}
		ob := map[string]mlcore.Buffer{}
		for _, t := range info.Outputs {
			// Shared when only the host reads it back (logits, the K/V rows
			// of the chunk's own layers); a carried output is a later
			// chunk's input and stays plain.
			x, err := alloc(t, !carried(m, kind, j, t.Name))
			if err != nil {
				return nil, err
			}
			outs[t.Name], ob[t.Name] = x, x.buf
		}
		ib := map[string]mlcore.Buffer{}
		for _, t := range info.Inputs {
			if src := f.carrier(j, t.Name); src != nil {
				ib[t.Name] = src.buf
				continue
			}
			x, ok := f.host[t.Name]
			if !ok {
				if s, isKV := cacheInput(t.Name); isKV && be.kv[s] != nil {
					// The other function's tensors: the same shape.
					x = be.kv[s].k
					if strings.HasPrefix(t.Name, "v_") {
						x = be.kv[s].v
					}
					if !slices.Equal(x.buf.Shape(), t.Shape) {
						return nil, fmt.Errorf("%w: %s is %v in one function, %v in the other", ErrBundle, t.Name, x.buf.Shape(), t.Shape)
					}
				} else {
					// The KV caches are shared: the largest inputs, copied
					// into on every call otherwise (about 23 MiB per E2B call
					// at context 2048, issue 26). Every other input is
					// small or has a short last axis (place_* [1,1,C,T] and
					// last [1,1,T] with T=8 would pad 8 to 32 per row) and
					// stays plain.
					var err error
					if x, err = alloc(t, isKV); err != nil {
						return nil, err
					}
				}
				f.host[t.Name] = x
			}
			ib[t.Name] = x.buf
		}
		f.out, f.ins, f.outs = append(f.out, outs), append(f.ins, ib), append(f.outs, ob)
	}
	for _, s := range m.owners() {
		k, v := f.host[fmt.Sprint("k_cache_", s)], f.host[fmt.Sprint("v_cache_", s)]
		if k == nil || v == nil {
			return nil, fmt.Errorf("%w: no chunk takes the cache of layer %d", ErrBundle, s)
		}
		if be.kv[s] == nil {
			be.kv[s] = &kvPair{k: k, v: v}
		}
	}
	return f, nil
}

// carried reports whether output name of chunk j of function kind is an
// input of a later chunk: hidden_out of every chunk but the last (the next
// chunk's hidden_in), and per_layer, k_new_N, v_new_N when a later chunk
// takes them (function.carrier).
func carried(m *Manifest, kind string, j int, name string) bool {
	if name == "hidden_out" {
		return j+1 < len(m.Chunks)
	}
	for i := j + 1; i < len(m.Chunks); i++ {
		for _, t := range m.Function(i, kind).Inputs {
			if t.Name == name {
				return true
			}
		}
	}
	return false
}

// cacheInput reports the layer of a k_cache_N or v_cache_N input.
func cacheInput(name string) (int, bool) {
	for _, p := range []string{"k_cache_", "v_cache_"} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			n, err := strconv.Atoi(rest)
			return n, err == nil
		}
	}
	return 0, false
}

// carrier returns the output of an earlier chunk that chunk j's input name
// is (hidden_in: the previous chunk's hidden_out; per_layer and k_new_s /
// v_new_s: the chunk that computed them), or nil for a host-built input.
func (f *function) carrier(j int, name string) *tensor {
	switch {
	case name == "hidden_in" && j > 0:
		return f.out[j-1]["hidden_out"]
	case name == "per_layer" || strings.HasPrefix(name, "k_new_") || strings.HasPrefix(name, "v_new_"):
		for i := j - 1; i >= 0; i-- {
			if t, ok := f.out[i][name]; ok {
				return t
			}
		}
	}
	return nil
}

// Config implements model.Backend.
func (be *Model) Config() model.Config { return be.cfg }

// Widths implements model.Backend: every generation width 1..K (the
// generate and sample functions, their unused rows padded) and the prefill
// width N.
func (be *Model) Widths() []int { return slices.Clone(be.widths) }

// Executor is what executes the functions.
func (be *Model) Executor() Executor { return be.run }

// Bundle is the open bundle.
func (be *Model) Bundle() *Bundle { return be.b }

// CheckFiles implements model.FileChecker for the mapped sidecars.
func (be *Model) CheckFiles() error { return be.b.checkFiles() }

// Kernels implements model.KernelNamer: measured call costs depend on what
// runs the functions.
func (be *Model) Kernels() string { return "coreml/" + be.run.Name() }

// Forward implements model.Backend. A call asking for model.Last runs the
// prefill function (its last row only), one asking for model.Logits the
// sample function, any other (model.Argmax) the generate function; a call
// wider than its function runs in pieces, each piece's rows seeing the
// earlier pieces' pending rows through the cache inputs. The engine asks
// for ids on every generation call of a greedy session and for logits on
// every one of a sampled session, so each session runs one function for
// all its generation calls, and speculation on and off compute every row
// alike.
func (be *Model) Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want model.Output) (_ model.Result, err error) {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.closed {
		return model.Result{}, errors.New("coreml: forward on a closed backend")
	}
	defer mmap.Guard(&err, be.b.mappings()...)()
	if len(tokens) == 0 {
		return model.Result{}, fmt.Errorf("%w: forward of no tokens", ErrInput)
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= be.cfg.VocabSize {
			return model.Result{}, fmt.Errorf("%w: token id %d outside the vocabulary 0..%d", ErrInput, id, be.cfg.VocabSize-1)
		}
	}
	if g := cache.Geometry(); !slices.Equal(g.Layers, be.cfg.KV.Layers) || g.Context > be.cfg.KV.Context {
		return model.Result{}, fmt.Errorf("%w: the cache's geometry is not this model's", ErrInput)
	}
	kind := KindGenerate
	switch {
	case want&model.Last != 0:
		kind = KindPrefill
	case want&model.Logits != 0:
		kind = KindSample
	}
	f := be.fns[kind]
	if err := cache.Reserve(start, len(tokens)); err != nil {
		return model.Result{}, err
	}
	var res model.Result
	for off := 0; off < len(tokens); off += f.width {
		if err := ctx.Err(); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		c := newCall(kind, f.width, tokens[off:min(off+f.width, len(tokens))], start+off)
		t0 := time.Now()
		if err := be.call(ctx, f, c, cache); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		be.stats.Add(kind, c.n, time.Since(t0))
		if kind == KindPrefill && off+f.width < len(tokens) {
			continue // only the last piece's row is asked for
		}
		if err := be.result(&res, f, c, want); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
	}
	return res, nil
}

// call builds the inputs of c, runs every chunk and writes the new rows
// into the cache's pending rows.
func (be *Model) call(ctx context.Context, f *function, c call, cache *kv.Cache) error {
	m := be.b.Manifest
	a := &m.Arch
	if x := f.host["hidden_in"]; x != nil {
		buildRows(x, c, be.b.embed, be.scratch)
	}
	if x := f.host["ple_rows"]; x != nil {
		buildRows(x, c, be.b.ple, be.scratch)
	}
	for name, r := range be.ropes {
		cos, sin := f.host["rope_cos_"+name], f.host["rope_sin_"+name]
		if cos != nil && sin != nil {
			buildRope(cos, sin, c, r)
		}
	}
	for _, kind := range []string{"full", "sliding"} {
		mk, pl := f.host["mask_"+kind], f.host["place_"+kind]
		if mk == nil {
			continue
		}
		window := 0
		if kind == "sliding" {
			window = a.Window
		}
		if err := buildMask(mk, c, m.slots(kind), window); err != nil {
			return err
		}
		buildPlace(pl, c, m.slots(kind))
	}
	for s, p := range be.kv {
		l := a.Layers[s]
		window := 0
		if l.Kind == "sliding" {
			window = a.Window
		}
		buildKV(p, c, cache, s, m.slots(l.Kind), window, l.KVHeads, l.HeadDim)
	}
	if x := f.host["last"]; x != nil {
		buildLast(x, c)
	}
	for j := range m.Chunks {
		if err := be.run.Run(ctx, j, f.infos[j], f.ins[j], f.outs[j]); err != nil {
			return fmt.Errorf("coreml: %s (%s): %w", be.b.PackagePath(j), f.infos[j].Name, err)
		}
	}
	for j := range m.Chunks {
		for i := m.Chunks[j].Layers[0]; i < m.Chunks[j].Layers[1]; i++ {
			if l := a.Layers[i]; l.Source == i {
				placeRows(f.out[j][fmt.Sprint("k_new_", i)], f.out[j][fmt.Sprint("v_new_", i)], c, cache, i, l.KVHeads, l.HeadDim)
			}
		}
	}
	return nil
}

// result appends the rows want asks for of the last chunk's outputs: ids
// from the blockwise argmax (generate, prefill) or, for the sample
// function, the flat argmax of its logits (both before the softcap), and
// the logits after the softcap. The outputs are in blocks of B ids:
// block_argmax and block_max [1,nb,R] (block b of row t at b*R+t), logits
// [1,nb,R,B] (id b*B+j of row t at (b*R+t)*B+j), R the function's rows.
func (be *Model) result(res *model.Result, f *function, c call, want model.Output) error {
	outs := f.out[len(f.out)-1]
	logits, local, top := outs["logits"], outs["block_argmax"], outs["block_max"]
	V := be.cfg.VocabSize
	B := be.b.Manifest.Geometry.ArgmaxBlock
	nb := V / B
	softcap := float32(be.b.Manifest.Arch.Softcap)
	rows, R := c.n, c.lastRows
	if c.prefill {
		rows = 1
	}
	if logits == nil && want&model.Logits != 0 {
		return fmt.Errorf("coreml: the %s function returns no logits", f.kind)
	}
	tops, locs := make([]float32, nb), make([]int32, nb)
	for t := range rows {
		var row []float32
		if logits != nil && (want&model.Logits != 0 || local == nil) {
			row = make([]float32, V)
			for b := range nb {
				logits.getRow(row[b*B:(b+1)*B], (b*R+t)*B)
			}
		}
		if want&model.Argmax != 0 {
			var id int32
			if local != nil {
				for b := range nb {
					locs[b], tops[b] = local.getInt32(b*R+t), top.get(b*R+t)
				}
				id, _ = blockArgmax(locs, tops, B)
			} else {
				id = sample.Greedy(row)
			}
			res.Argmax = append(res.Argmax, id)
		}
		if want&model.Logits != 0 {
			if softcap > 0 {
				cpu.Softcap(row, softcap)
			}
			res.Logits = append(res.Logits, row)
		}
	}
	return nil
}

// blockArgmax is the host's second level of the blockwise argmax (the
// converter's README, "Outputs"): local[b] is the index of the first
// maximum of block b (ids b*B .. b*B+B-1) and top[b] that maximum. It
// returns b*B + local[b] for the lowest block b holding the row's maximum
// — the lowest id holding it, the flat argmax's choice (sample.Greedy),
// ties included — and the maximum (the row's top logit). As in
// sample.Greedy, NaN never wins; a row whose maxima are all NaN, or whose
// winning index is outside the block, has no id: -1, which the decode
// loops report as model.ErrDamaged. (ANEMLL's in-model argmax works the
// same way: local winners per 16384-wide piece, the host picks the global
// one.)
func blockArgmax(local []int32, top []float32, B int) (int32, float32) {
	best := -1
	var bv float32
	for b, v := range top {
		if v != v { // NaN
			continue
		}
		if best < 0 || v > bv {
			best, bv = b, v
		}
	}
	if best < 0 || local[best] < 0 || int(local[best]) >= B {
		return -1, float32(math.NaN())
	}
	return int32(best*B) + local[best], bv
}

// CallStats returns the calls made so far per kind and real-row count.
func (be *Model) CallStats() []CallStat {
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.stats.List()
}

// Close releases the buffers, the executor and the bundle.
func (be *Model) Close() error {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.closed {
		return nil
	}
	be.closed = true
	be.freeBuffers()
	err := be.run.Close()
	if berr := be.b.Close(); err == nil {
		err = berr
	}
	return err
}

func (be *Model) freeBuffers() {
	for _, f := range be.fns {
		for _, t := range f.all {
			t.close()
		}
		f.all = nil
	}
}

// CallStat is the calls of one kind with n real rows.
type CallStat struct {
	Kind  string
	Rows  int
	Calls int
	// Total and Min are wall times of whole calls (inputs built, every
	// chunk run, rows written back).
	Total, Min time.Duration
}

// CallStats counts a model's calls by kind and real-row count (the zero
// value is empty); the published-bundle model (engine/coreml/published)
// keeps its own.
type CallStats struct {
	m map[callKey]*CallStat
}

type callKey struct {
	kind string
	rows int
}

// Add counts one call of kind with rows real rows that took d.
func (s *CallStats) Add(kind string, rows int, d time.Duration) {
	if s.m == nil {
		s.m = map[callKey]*CallStat{}
	}
	k := callKey{kind, rows}
	c := s.m[k]
	if c == nil {
		c = &CallStat{Kind: kind, Rows: rows, Min: d}
		s.m[k] = c
	}
	c.Calls++
	c.Total += d
	c.Min = min(c.Min, d)
}

// List returns the counts by kind, then rows.
func (s *CallStats) List() []CallStat {
	var out []CallStat
	for _, c := range s.m {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b CallStat) int {
		if a.Kind != b.Kind {
			return strings.Compare(a.Kind, b.Kind)
		}
		return a.Rows - b.Rows
	})
	return out
}
