package coreml

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"anechat/engine/coreml/mlcore"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/mmap"
)

// The functions of a published CoreML-LLM chunk (PUBLISHED.md):
// PubDecode is the default function of a chunk (one token), PubVerify the
// width-K verify function beside it.
const (
	PubDecode = "decode_q1"
	PubVerify = "verify_qK"
	// PubPrefill names the default function of prefill_chunkN (N prompt
	// tokens from position 0) under chunk N's index.
	PubPrefill = "prefill"
)

// ErrNoLogits is wrapped by PubBackend.Forward's error for a call that
// needs logits: a published bundle ends in an in-graph argmax.
var ErrNoLogits = errors.New("coreml: this bundle returns greedy token ids only (its last chunk ends in an in-graph argmax, without logits): sampling with a temperature needs logits; decode greedily or convert the checkpoint with `make bundle`")

// A PubExecutor runs the functions of a published bundle's decode chunks.
// Run's fn names a function (PubDecode or PubVerify) with the features
// Features reported; its buffers are fp16 (Float must be mlcore.Float16:
// the bundle's functions are what they are) or int32.
type PubExecutor interface {
	Executor
	// Features returns the inputs and outputs function fn of decode chunk
	// j (0-based) declares, as loaded; ok is false when the chunk has no
	// such function.
	Features(chunk int, fn string) (ins, outs []mlcore.FeatureSpec, ok bool)
}

// pubGeometry is what the loaded functions declare, checked against
// model_config.json.
type pubGeometry struct {
	hidden, perLayer, window, context int
	kvHeads, slotWidth                int // the cache tensors' head count and row width (512)
	headSliding, headFull             int // the RoPE widths: the rows of sliding and full layers
	verifyWidth                       int // 0 without a verify function
	prefillWidth                      int // 0 without usable prefill chunks
}

// pubPrefillRow is where a prefill chunk's K/V output goes: the kv.Cache
// layer of the decode slot of that model layer.
type pubPrefillRow struct {
	k, v      string
	layer, hd int
}

// pubSlot is one layer of the host kv.Cache: slot s of the sliding or full
// cache tensors of chunk j.
type pubSlot struct {
	chunk, slot int
	full        bool
}

// pubFunc holds the buffers of one function (decode or verify) on every
// chunk: host-built inputs shared by the chunks that take them, the cache
// inputs of each chunk that owns KV, and every chunk's outputs (a later
// chunk's carried inputs are those buffers).
type pubFunc struct {
	name  string
	width int
	host  map[string]*tensor
	cache []map[string]*tensor // per chunk: K_sliding_in, ... (nil when none)
	sync  []pubSync            // per chunk: what its cache tensors hold
	out   []map[string]*tensor
	ins   []map[string]mlcore.Buffer
	outs  []map[string]mlcore.Buffer
	infos []*FunctionInfo
	all   []*tensor
}

// PubBackend runs a published CoreML-LLM bundle (the 4-chunk decode layout
// of PUBLISHED.md) as a model.Backend. One token runs the decode function
// of every chunk; a call of 2..K tokens runs the verify function (its
// unused rows padded with the last token and never written back); a
// prefill (model.Last) from position 0 runs the prefill chunks when the
// bundle has usable ones (PrefillNote), any other the decode function
// token by token. The host
// keeps the KV in the caller's kv.Cache (one layer per cache slot of the
// chunks that own KV), builds every call's cache inputs from it and writes
// the call's new rows there as pending rows, never committed (DESIGN.md
// invariant 3).
//
// The decode and verify functions are different functions: speculation on
// and off may give different text with such a bundle. That is measured
// (`anechat doctor --bundle`), not built in as with the anechat converter's
// bundles.
type PubBackend struct {
	p     *Published
	run   PubExecutor
	cfg   model.Config
	geo   pubGeometry
	slots []pubSlot
	// kvLayer maps chunk -> {sliding, full} -> slot -> kv.Cache layer.
	kvLayer    map[int][2][]int
	embed, ple *Sidecar
	ropes      map[string]*npyTable // by input name: cos_s, sin_s, cos_f, sin_f
	chunkNames []string
	// prefillRows lists, per chunk, the K/V outputs of its prefill
	// function; noPrefill says why the prefill chunks are not used.
	prefillRows map[int][]pubPrefillRow
	noPrefill   string

	mu     sync.Mutex
	fns    map[string]*pubFunc
	stats  callStats
	closed bool
}

// hostInputs are the inputs the host builds (every other input of a chunk
// is an output of an earlier chunk).
var hostInputs = map[string]bool{
	"hidden_states": true, "per_layer_raw": true, "causal_mask_full": true, "causal_mask_sliding": true,
	"update_mask": true, "update_indicator": true, "cos_s": true, "sin_s": true, "cos_f": true, "sin_f": true,
}

// cacheInputs are the cache tensors of a chunk that owns KV.
var cacheInputs = []string{"K_sliding_in", "V_sliding_in", "K_full_in", "V_full_in"}

// NewPubBackend returns the backend of a read bundle p run by r: it maps
// the sidecars and RoPE tables, derives the geometry from the functions r
// loaded, checks it against model_config.json and the contract, and
// allocates every buffer. Close releases them and the executor.
// fingerprint is the model's identity (engine/load's).
func NewPubBackend(p *Published, r PubExecutor, fingerprint string) (_ *PubBackend, err error) {
	if r.Float() != mlcore.Float16 {
		return nil, fmt.Errorf("coreml: executor %s computes in %s; a published bundle's functions take fp16", r.Name(), r.Float())
	}
	be := &PubBackend{p: p, run: r, fns: map[string]*pubFunc{}, ropes: map[string]*npyTable{}, kvLayer: map[int][2][]int{}, prefillRows: map[int][]pubPrefillRow{}}
	defer func() {
		if err != nil {
			be.release()
		}
	}()
	for j, name := range p.Decode {
		be.chunkNames = append(be.chunkNames, filepath.Join(p.Dir, name))
		if _, _, ok := r.Features(j, PubDecode); !ok {
			return nil, fmt.Errorf("%w: %s has no %s function loaded", ErrBundle, be.chunkNames[j], PubDecode)
		}
	}
	if err := be.deriveGeometry(); err != nil {
		return nil, err
	}
	c := p.Config
	if be.embed, err = openPubSidecar(p.Dir, "embed_tokens", c.VocabSize, c.HiddenSize, c.EmbedScale); err != nil {
		return nil, err
	}
	if be.ple, err = openPubSidecar(p.Dir, "embed_tokens_per_layer", c.VocabSize, c.NumLayers*c.PerLayerDim, c.perLayerEmbedScale()); err != nil {
		return nil, err
	}
	for in, file := range map[string]string{"cos_s": "cos_sliding.npy", "sin_s": "sin_sliding.npy", "cos_f": "cos_full.npy", "sin_f": "sin_full.npy"} {
		width := be.geo.headSliding
		if strings.HasSuffix(in, "_f") {
			width = be.geo.headFull
		}
		t, err := openNPYTable(filepath.Join(p.Dir, file), width)
		if err != nil {
			return nil, err
		}
		be.ropes[in] = t
	}
	kinds := []string{PubDecode}
	if be.geo.verifyWidth > 0 {
		kinds = append(kinds, PubVerify)
	}
	if be.noPrefill = be.derivePrefill(); be.noPrefill == "" {
		kinds = append(kinds, PubPrefill)
	} else {
		be.prefillRows = nil
	}
	for _, name := range kinds {
		f, err := be.allocate(name)
		if err != nil && name == PubPrefill {
			// The decode path does not need them.
			be.noPrefill, be.prefillRows = err.Error()+": the prompt runs token by token", nil
			continue
		}
		if err != nil {
			return nil, err
		}
		be.fns[name] = f
	}
	be.cfg = model.Config{
		Arch: c.Architecture, VocabSize: c.VocabSize, Hidden: c.HiddenSize, ContextLen: be.geo.context,
		BOS: int32(c.BOS), EOS: []int32{int32(c.EOS)}, Fingerprint: fingerprint,
	}
	if be.cfg.Arch == "" {
		be.cfg.Arch = "gemma4"
	}
	be.cfg.KV.Context = be.geo.context
	for i, s := range be.slots {
		l := kv.LayerSpec{KVHeads: be.geo.kvHeads, HeadDim: be.geo.headSliding, Window: be.geo.window, Source: i}
		if s.full {
			l.HeadDim, l.Window = be.geo.headFull, 0
		}
		be.cfg.KV.Layers = append(be.cfg.KV.Layers, l)
	}
	if err := be.cfg.KV.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBundle, p.Dir, err)
	}
	return be, nil
}

// feature finds name among fs.
func feature(fs []mlcore.FeatureSpec, name string) (mlcore.FeatureSpec, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f, true
		}
	}
	return mlcore.FeatureSpec{}, false
}

// deriveGeometry reads the geometry from the decode and verify functions'
// features and checks it against model_config.json: the hidden size, the
// per-layer width, the window, the context, the cache tensors of every
// chunk that owns KV, the RoPE widths and the last chunk's argmax.
func (be *PubBackend) deriveGeometry() error {
	c := be.p.Config
	g := &be.geo
	g.hidden, g.perLayer = c.HiddenSize, c.NumLayers*c.PerLayerDim
	last := len(be.p.Decode) - 1
	bad := func(j int, fn, format string, args ...any) error {
		return fmt.Errorf("%w: %s: function %s: %s", ErrBundle, be.chunkNames[j], fn, fmt.Sprintf(format, args...))
	}
	ins, _, _ := be.run.Features(0, PubDecode)
	for _, name := range []string{"causal_mask_full", "causal_mask_sliding", "cos_s", "cos_f"} {
		f, ok := feature(ins, name)
		if !ok || !f.MultiArray || len(f.Shape) != 4 {
			return bad(0, PubDecode, "input %q is missing or not a 4-dimensional array (the 4-chunk layout of PUBLISHED.md)", name)
		}
		v := f.Shape[3]
		switch name {
		case "causal_mask_full":
			g.context = v
		case "causal_mask_sliding":
			g.window = v
		case "cos_s":
			g.headSliding = v
		case "cos_f":
			g.headFull = v
		}
	}
	if g.context != c.ContextLength {
		return bad(0, PubDecode, "causal_mask_full is %d wide, model_config.json says context_length %d", g.context, c.ContextLength)
	}
	if c.SlidingWindow != 0 && g.window != c.SlidingWindow {
		return bad(0, PubDecode, "causal_mask_sliding is %d wide, model_config.json says sliding_window %d", g.window, c.SlidingWindow)
	}
	if g.window < 1 || g.headSliding < 1 || g.headFull < 1 {
		return bad(0, PubDecode, "window %d, RoPE widths %d and %d must be positive", g.window, g.headSliding, g.headFull)
	}
	for j := range be.p.Decode {
		ins, outs, _ := be.run.Features(j, PubDecode)
		ks, hasKV := feature(ins, "K_sliding_in")
		if j == last {
			id, ok := feature(outs, "token_id")
			if !ok || !id.MultiArray || id.DType != mlcore.Int32 || product(id.Shape) != 1 {
				return bad(j, PubDecode, "the last chunk has no int32 output \"token_id\" of one element (the in-graph argmax)")
			}
		}
		if !hasKV {
			continue
		}
		kf, ok := feature(ins, "K_full_in")
		if !ok || len(ks.Shape) != 4 || len(kf.Shape) != 4 {
			return bad(j, PubDecode, "K_sliding_in and K_full_in must both be 4-dimensional (slots, kv heads, rows, 512)")
		}
		if g.kvHeads == 0 {
			g.kvHeads, g.slotWidth = ks.Shape[1], ks.Shape[3]
		}
		if ks.Shape[1] != g.kvHeads || kf.Shape[1] != g.kvHeads || ks.Shape[3] != g.slotWidth || kf.Shape[3] != g.slotWidth {
			return bad(j, PubDecode, "cache tensors %v and %v disagree on kv heads and row width with the other chunks (%d, %d)", ks.Shape, kf.Shape, g.kvHeads, g.slotWidth)
		}
		if ks.Shape[2] != g.window || kf.Shape[2] != g.context {
			return bad(j, PubDecode, "K_sliding_in %v and K_full_in %v: want %d rows (sliding_window) and %d (context_length)", ks.Shape, kf.Shape, g.window, g.context)
		}
		if g.headSliding > g.slotWidth || g.headFull > g.slotWidth {
			return bad(j, PubDecode, "RoPE widths %d and %d exceed the cache rows' %d", g.headSliding, g.headFull, g.slotWidth)
		}
		sl := [2][]int{}
		for s := range ks.Shape[0] {
			sl[0] = append(sl[0], len(be.slots))
			be.slots = append(be.slots, pubSlot{chunk: j, slot: s})
		}
		for s := range kf.Shape[0] {
			sl[1] = append(sl[1], len(be.slots))
			be.slots = append(be.slots, pubSlot{chunk: j, slot: s, full: true})
		}
		be.kvLayer[j] = sl
	}
	if len(be.slots) == 0 {
		return fmt.Errorf("%w: %s: no chunk takes K_sliding_in (the host-side KV of PUBLISHED.md); stateful bundles that keep KV inside the model are not supported", ErrBundle, be.p.Dir)
	}
	// Verify: every chunk must have it for speculation; its width is
	// hidden_states' second dimension.
	for j := range be.p.Decode {
		ins, outs, ok := be.run.Features(j, PubVerify)
		if !ok {
			g.verifyWidth = 0
			return nil
		}
		h, ok := feature(ins, "hidden_states")
		if !ok || len(h.Shape) != 3 || h.Shape[1] < 2 {
			return bad(j, PubVerify, "hidden_states must be (1, K, hidden) with K >= 2")
		}
		if j == 0 {
			g.verifyWidth = h.Shape[1]
		} else if h.Shape[1] != g.verifyWidth {
			return bad(j, PubVerify, "width %d, chunk 1's is %d", h.Shape[1], g.verifyWidth)
		}
		if j == last {
			id, ok := feature(outs, "token_ids")
			if !ok || id.DType != mlcore.Int32 || product(id.Shape) != g.verifyWidth {
				return bad(j, PubVerify, "the last chunk has no int32 output \"token_ids\" of %d elements", g.verifyWidth)
			}
		}
	}
	return nil
}

func product(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// hostShape is the shape the host builds input name in at width T, or nil
// for a name it does not build.
func (g *pubGeometry) hostShape(name string, T int) []int {
	switch name {
	case "hidden_states":
		return []int{1, T, g.hidden}
	case "per_layer_raw":
		return []int{1, T, g.perLayer}
	case "causal_mask_full":
		return []int{1, 1, T, g.context}
	case "causal_mask_sliding":
		return []int{1, 1, T, g.window}
	case "update_mask":
		return []int{1, 1, g.context, 1}
	case "update_indicator":
		return []int{1, 1, g.context, T}
	case "cos_s", "sin_s":
		return []int{1, 1, T, g.headSliding}
	case "cos_f", "sin_f":
		return []int{1, 1, T, g.headFull}
	case "causal_mask":
		return []int{1, 1, T, T}
	case "last_position_mask":
		return []int{1, T, 1}
	}
	return nil
}

// allocate makes the buffers of function name on every chunk, checking
// each declared input is built by the host (with the shape the host
// builds), a cache tensor, or an output of an earlier chunk of the same
// shape.
func (be *PubBackend) allocate(name string) (_ *pubFunc, err error) {
	f := &pubFunc{name: name, width: 1, host: map[string]*tensor{}}
	defer func() {
		if err != nil {
			for _, t := range f.all {
				t.close()
			}
		}
	}()
	switch name {
	case PubVerify:
		f.width = be.geo.verifyWidth
	case PubPrefill:
		f.width = be.geo.prefillWidth
	}
	alloc := func(fs mlcore.FeatureSpec) (*tensor, error) {
		x, err := newTensor(fs.DType, fs.Shape)
		if err != nil {
			return nil, fmt.Errorf("coreml: %s buffer %s: %w", name, fs, err)
		}
		f.all = append(f.all, x)
		return x, nil
	}
	toInfo := func(fs []mlcore.FeatureSpec) []TensorInfo {
		var out []TensorInfo
		for _, x := range fs {
			dt := "fp16"
			if x.DType == mlcore.Int32 {
				dt = "int32"
			}
			out = append(out, TensorInfo{Name: x.Name, Shape: slices.Clone(x.Shape), DType: dt})
		}
		return out
	}
	for j := range be.p.Decode {
		ins, outs, _ := be.run.Features(j, name)
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s: function %s: %s", ErrBundle, be.file(j, name), name, fmt.Sprintf(format, args...))
		}
		info := &FunctionInfo{Name: name, Kind: name, Width: f.width, Inputs: toInfo(ins), Outputs: toInfo(outs)}
		f.infos = append(f.infos, info)
		out := map[string]*tensor{}
		ob := map[string]mlcore.Buffer{}
		for _, o := range outs {
			if !o.MultiArray || (o.DType != mlcore.Float16 && o.DType != mlcore.Int32) {
				return nil, bad("output %s is not an fp16 or int32 array", o)
			}
			x, err := alloc(o)
			if err != nil {
				return nil, err
			}
			out[o.Name], ob[o.Name] = x, x.buf
		}
		ib := map[string]mlcore.Buffer{}
		var cache map[string]*tensor
		for _, in := range ins {
			if !in.MultiArray || in.DType != mlcore.Float16 {
				return nil, bad("input %s is not an fp16 array", in)
			}
			if src := f.carrier(j, in.Name); src != nil {
				if !slices.Equal(src.buf.Shape(), in.Shape) {
					return nil, bad("input %s: the earlier chunk's output is %v", in, src.buf.Shape())
				}
				ib[in.Name] = src.buf
				continue
			}
			if slices.Contains(cacheInputs, in.Name) && name != PubPrefill {
				if _, ok := be.kvLayer[j]; !ok {
					return nil, bad("input %s: the decode function of this chunk takes no cache", in)
				}
				if cache == nil {
					cache = map[string]*tensor{}
				}
				x, err := alloc(in)
				if err != nil {
					return nil, err
				}
				cache[in.Name], ib[in.Name] = x, x.buf
				continue
			}
			want := be.geo.hostShape(in.Name, f.width)
			if want == nil {
				return nil, bad("input %s is neither built by the host (PUBLISHED.md) nor an output of an earlier chunk", in)
			}
			if !slices.Equal(want, in.Shape) {
				return nil, bad("input %s: the host builds %v (from model_config.json and chunk 1's features)", in, want)
			}
			x, ok := f.host[in.Name]
			if !ok {
				var err error
				if x, err = alloc(in); err != nil {
					return nil, err
				}
				f.host[in.Name] = x
			}
			ib[in.Name] = x.buf
		}
		if sl, ok := be.kvLayer[j]; ok && name != PubPrefill {
			for _, n := range cacheInputs {
				if cache[n] == nil {
					return nil, bad("no input %s: a chunk that owns KV takes all of %s", n, strings.Join(cacheInputs, ", "))
				}
			}
			ns, nf := len(sl[0]), len(sl[1])
			want := map[string][]int{}
			if name == PubDecode {
				for _, n := range []string{"K_sliding_out", "V_sliding_out"} {
					want[n] = []int{ns, be.geo.kvHeads, be.geo.window, be.geo.slotWidth}
				}
				for _, n := range []string{"K_full_out", "V_full_out"} {
					want[n] = []int{nf, be.geo.kvHeads, be.geo.context, be.geo.slotWidth}
				}
			} else {
				for _, n := range []string{"new_K_sliding", "new_V_sliding"} {
					want[n] = []int{ns, be.geo.kvHeads, f.width, be.geo.headSliding}
				}
				for _, n := range []string{"new_K_full", "new_V_full"} {
					want[n] = []int{nf, be.geo.kvHeads, f.width, be.geo.headFull}
				}
			}
			for n, shape := range want {
				x, ok := out[n]
				if !ok || x.f16 == nil || !slices.Equal(x.buf.Shape(), shape) {
					return nil, bad("output %q must be fp16 %v (the new K/V rows of the chunk's own layers)", n, shape)
				}
			}
			for _, n := range []string{"K_sliding_in", "K_full_in"} {
				if !slices.Equal(cache[n].buf.Shape(), cache["V"+n[1:]].buf.Shape()) {
					return nil, bad("%s and V%s differ in shape", n, n[1:])
				}
			}
		}
		f.cache, f.out, f.sync = append(f.cache, cache), append(f.out, out), append(f.sync, pubSync{})
		f.ins, f.outs = append(f.ins, ib), append(f.outs, ob)
	}
	return f, nil
}

// carrier returns the output of an earlier chunk that chunk j's input
// name is: the latest earlier chunk's output of that name, or of that
// name with "_out" (hidden_states_out, per_layer_combined_out).
func (f *pubFunc) carrier(j int, name string) *tensor {
	for i := j - 1; i >= 0; i-- {
		if t, ok := f.out[i][name+"_out"]; ok {
			return t
		}
		if t, ok := f.out[i][name]; ok {
			return t
		}
	}
	return nil
}

// Config implements model.Backend.
func (be *PubBackend) Config() model.Config { return be.cfg }

// Widths implements model.Backend: 1 (the decode function) and 2..K (the
// verify function, its unused rows padded) when the bundle has one.
func (be *PubBackend) Widths() []int {
	ws := []int{1}
	for w := 2; w <= be.geo.verifyWidth; w++ {
		ws = append(ws, w)
	}
	if be.geo.prefillWidth > ws[len(ws)-1] {
		ws = append(ws, be.geo.prefillWidth)
	}
	return ws
}

// PrefillNote says why the prefill chunks are not used ("" when they are:
// a prefill from position 0 runs them).
func (be *PubBackend) PrefillNote() string { return be.noPrefill }

// VerifyWidth is the verify function's width K, 0 without one.
func (be *PubBackend) VerifyWidth() int { return be.geo.verifyWidth }

// ArgmaxOnly implements model.ArgmaxOnlyer: the bundle returns no logits.
func (be *PubBackend) ArgmaxOnly() bool { return true }

// Executor is what executes the functions.
func (be *PubBackend) Executor() PubExecutor { return be.run }

// Published is the bundle.
func (be *PubBackend) Published() *Published { return be.p }

// Kernels implements model.KernelNamer.
func (be *PubBackend) Kernels() string { return "coreml-llm/" + be.run.Name() }

// CheckFiles implements model.FileChecker for the mapped sidecars.
func (be *PubBackend) CheckFiles() error {
	for _, s := range []*Sidecar{be.embed, be.ple} {
		if err := s.check(); err != nil {
			return err
		}
	}
	return nil
}

// Forward implements model.Backend. A call asking for model.Last runs the
// prefill chunks for its first N tokens when it starts at position 0, and
// the decode function token by token for the rest, and returns the last
// row's argmax (and no logits row: the
// Session then computes the last token again with its first decode call);
// any other call runs the decode function for one
// token and the verify function, in pieces of K, for more. A call asking
// for logits without model.Last fails with ErrNoLogits.
func (be *PubBackend) Forward(ctx context.Context, tokens []int32, start int, cache *kv.Cache, want model.Output) (_ model.Result, err error) {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.closed {
		return model.Result{}, errors.New("coreml: forward on a closed backend")
	}
	defer mmap.Guard(&err, be.mappings()...)()
	if len(tokens) == 0 {
		return model.Result{}, fmt.Errorf("%w: forward of no tokens", ErrInput)
	}
	if want&model.Logits != 0 && want&model.Last == 0 {
		return model.Result{}, ErrNoLogits
	}
	for _, id := range tokens {
		if id < 0 || int(id) >= be.cfg.VocabSize {
			return model.Result{}, fmt.Errorf("%w: token id %d outside the vocabulary 0..%d", ErrInput, id, be.cfg.VocabSize-1)
		}
	}
	if g := cache.Geometry(); !slices.EqualFunc(g.Layers, be.cfg.KV.Layers, func(a, b kv.LayerSpec) bool { return a == b }) || g.Context > be.cfg.KV.Context {
		return model.Result{}, fmt.Errorf("%w: the cache's geometry is not this model's", ErrInput)
	}
	if err := cache.Reserve(start, len(tokens)); err != nil {
		return model.Result{}, err
	}
	var ids []int32
	verify := be.fns[PubVerify]
	for off := 0; off < len(tokens); {
		if err := ctx.Err(); err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		f := be.fns[PubDecode]
		n := 1
		switch pre := be.fns[PubPrefill]; {
		case want&model.Last != 0 && pre != nil && start+off == 0 && len(tokens)-off > 1:
			// The prefill chunks start at position 0 only.
			f, n = pre, min(pre.width, len(tokens)-off)
		case want&model.Last == 0 && verify != nil && len(tokens)-off > 1 && start+off <= be.geo.window-verify.width:
			// Past W-K the verify graph's shift drops positions that
			// its early rows need (PUBLISHED.md, "The sliding window"):
			// there decode_q1 runs token by token, so speculation stays
			// lossless.
			f, n = verify, min(verify.width, len(tokens)-off)
		}
		t0 := time.Now()
		got, err := be.call(ctx, f, tokens[off:off+n], start+off, cache)
		if err != nil {
			cache.Rollback()
			return model.Result{}, err
		}
		be.stats.add(f.name, n, time.Since(t0))
		ids = append(ids, got...)
		off += n
	}
	var res model.Result
	if want&model.Argmax != 0 {
		if want&model.Last != 0 {
			ids = ids[len(ids)-1:]
		}
		res.Argmax = ids
	}
	return res, nil
}

// call runs function f on tokens at start (n <= f.width real rows, the
// rest padded with the last token) and writes their new K/V rows into the
// cache's pending rows; it returns the argmax of the real rows.
func (be *PubBackend) call(ctx context.Context, f *pubFunc, tokens []int32, start int, cache *kv.Cache) ([]int32, error) {
	g := &be.geo
	T, n := f.width, len(tokens)
	tok := func(t int) int { return int(tokens[min(t, n-1)]) }
	if x := f.host["hidden_states"]; x != nil {
		for t := range T {
			be.embed.rowHalf(x.f16[t*g.hidden:(t+1)*g.hidden], tok(t))
		}
	}
	if x := f.host["per_layer_raw"]; x != nil {
		for t := range T {
			be.ple.rowHalf(x.f16[t*g.perLayer:(t+1)*g.perLayer], tok(t))
		}
	}
	for name, tab := range be.ropes {
		if x := f.host[name]; x != nil {
			for t := range T {
				tab.row(x.f16[t*tab.width:(t+1)*tab.width], start+t)
			}
		}
	}
	zero, ninf := toHalf(0), toHalf(negInf)
	one := toHalf(1)
	if x := f.host["causal_mask_full"]; x != nil {
		for t := range T {
			row := x.f16[t*g.context : (t+1)*g.context]
			for i := range row {
				row[i] = ninf
				if i <= start+t {
					row[i] = zero
				}
			}
		}
	}
	if x := f.host["causal_mask_sliding"]; x != nil {
		// Both functions shift the W-slot buffer left by T inside the
		// graph and append the call's T rows (PUBLISHED.md, "The sliding
		// window"), so slot i holds position start+T-W+i; row t sees the
		// slots holding positions 0..start+t. For decode_q1 (T = 1) these
		// are the last min(start+1, W) slots.
		W := g.window
		for t := range T {
			row := x.f16[t*W : (t+1)*W]
			for i := range row {
				row[i] = ninf
				if p := start + T - W + i; p >= 0 && p <= start+t {
					row[i] = zero
				}
			}
		}
	}
	if x := f.host["causal_mask"]; x != nil {
		// A prefill from position 0: row t sees rows 0..t.
		for t := range T {
			row := x.f16[t*T : (t+1)*T]
			for i := range row {
				row[i] = ninf
				if i <= t {
					row[i] = zero
				}
			}
		}
	}
	if x := f.host["last_position_mask"]; x != nil {
		clear(x.f16)
		x.f16[n-1] = one
	}
	if x := f.host["update_mask"]; x != nil {
		clear(x.f16)
		x.f16[min(start, g.context-1)] = one
	}
	if x := f.host["update_indicator"]; x != nil {
		clear(x.f16)
		for t := range T {
			if p := start + t; p < g.context {
				x.f16[p*T+t] = one
			}
		}
	}
	for j, tens := range f.cache {
		if tens != nil {
			be.syncCache(tens, &f.sync[j], j, start, cache)
		}
	}
	for j := range be.p.Decode {
		if err := be.run.Run(ctx, j, f.infos[j], f.ins[j], f.outs[j]); err != nil {
			return nil, fmt.Errorf("coreml: %s (%s): %w", be.chunkNames[j], f.name, err)
		}
	}
	be.writeBack(f, start, n, cache)
	outs := f.out[len(f.out)-1]
	am := outs["token_id"]
	if f.name == PubVerify {
		am = outs["token_ids"]
	}
	rows := n
	if f.name == PubPrefill {
		rows = 1 // the last real row's id (last_position_mask)
	}
	ids := make([]int32, rows)
	for t := range rows {
		id := am.i32[t]
		if id < 0 || int(id) >= be.cfg.VocabSize {
			id = -1 // reported by the decode loops as model.ErrDamaged
		}
		ids[t] = id
	}
	return ids, nil
}

// pubSync is what a chunk's cache tensors hold: the rows of cache (at
// epoch) for the committed positions below valid, laid out for a call at
// start (the sliding tensors are a shift buffer relative to start); full
// rows from start on are zero. Rows of pending positions are copied for
// each call but never trusted by the next: the Session may drop them.
type pubSync struct {
	cache        weak.Pointer[kv.Cache]
	epoch        uint64
	start, valid int
	ok           bool
}

// syncCache makes chunk j's cache tensors what buildCache writes for a call
// at start, copying only what changed since the last call on the same
// cache: the sliding tensors shift by the positions advanced and take the
// rows from valid on; the full tensors take rows valid..start-1 and are
// zeroed from start on. Anything else (another cache, a truncated,
// restored or reset one, a call further back or a window or more ahead)
// rebuilds them.
func (be *PubBackend) syncCache(tens map[string]*tensor, st *pubSync, j, start int, cache *kv.Cache) {
	g := &be.geo
	delta := start - st.start
	if !st.ok || st.cache != weak.Make(cache) || st.epoch != cache.Epoch() || delta < 0 || delta >= g.window {
		be.buildCache(tens, j, start, cache)
	} else {
		valid := min(st.valid, start)
		sl := be.kvLayer[j]
		row := g.slotWidth
		for _, n := range []string{"K_sliding_in", "V_sliding_in"} {
			b := tens[n].f16
			for s := range sl[0] {
				for h := range g.kvHeads {
					o := (s*g.kvHeads + h) * g.window * row
					copy(b[o:o+(g.window-delta)*row], b[o+delta*row:o+g.window*row])
				}
			}
		}
		for s, layer := range sl[0] {
			lo, _ := cache.Live(layer)
			for p := max(valid, start-g.window, 0); p < start; p++ {
				if p < cache.Len() && p < lo {
					continue
				}
				r := p - (start - g.window)
				be.putRow(tens["K_sliding_in"], g.window, s, r, cache.K(layer, p), g.headSliding)
				be.putRow(tens["V_sliding_in"], g.window, s, r, cache.V(layer, p), g.headSliding)
			}
		}
		for s, layer := range sl[1] {
			for _, n := range []string{"K_full_in", "V_full_in"} {
				b := tens[n].f16
				for h := range g.kvHeads {
					o := (s*g.kvHeads + h) * g.context * row
					// Rows from start on: zero (they held a later call's
					// pending rows at most up to the last start).
					clear(b[o+start*row : o+min(max(st.start, start), g.context)*row])
				}
			}
			for p := valid; p < start; p++ {
				be.putRow(tens["K_full_in"], g.context, s, p, cache.K(layer, p), g.headFull)
				be.putRow(tens["V_full_in"], g.context, s, p, cache.V(layer, p), g.headFull)
			}
		}
	}
	*st = pubSync{cache: weak.Make(cache), epoch: cache.Epoch(), start: start, valid: min(start, cache.Len()), ok: true}
}

// putRow writes src's heads (hd wide) into row r of slot s of dst
// (slots, heads, rows, slot width).
func (be *PubBackend) putRow(dst *tensor, rows, s, r int, src []float32, hd int) {
	g := &be.geo
	for h := range g.kvHeads {
		dst.setRow(((s*g.kvHeads+h)*rows+r)*g.slotWidth, src[h*hd:(h+1)*hd])
	}
}

// buildCache fills chunk j's cache inputs from cache for a call at start:
// the sliding tensors as the published host keeps them (a shift buffer
// whose row W-1 holds position start-1, row r position start-W+r), the
// full tensors with row i holding position i < start; every other row and
// the columns past a sliding row's width are zero.
func (be *PubBackend) buildCache(tens map[string]*tensor, j, start int, cache *kv.Cache) {
	g := &be.geo
	sl := be.kvLayer[j]
	for _, n := range cacheInputs {
		clear(tens[n].f16)
	}
	put := be.putRow
	for s, layer := range sl[0] {
		lo, _ := cache.Live(layer)
		for r := range g.window {
			p := start - g.window + r
			if p < 0 || (p < cache.Len() && p < lo) {
				continue
			}
			put(tens["K_sliding_in"], g.window, s, r, cache.K(layer, p), g.headSliding)
			put(tens["V_sliding_in"], g.window, s, r, cache.V(layer, p), g.headSliding)
		}
	}
	for s, layer := range sl[1] {
		for p := range start {
			put(tens["K_full_in"], g.context, s, p, cache.K(layer, p), g.headFull)
			put(tens["V_full_in"], g.context, s, p, cache.V(layer, p), g.headFull)
		}
	}
}

// writeBack writes the call's n real new K/V rows into the cache's pending
// rows at start..: after a decode, row W-1 of the shifted sliding outputs
// and row start of the full ones; after a verify, rows t < n of new_*.
func (be *PubBackend) writeBack(f *pubFunc, start, n int, cache *kv.Cache) {
	g := &be.geo
	if f.name == PubPrefill {
		// Each owned layer's K/V rows (1, heads, N, hd) from position 0.
		for j, rows := range be.prefillRows {
			for _, r := range rows {
				kt, vt := f.out[j][r.k], f.out[j][r.v]
				for t := range n {
					k, v := cache.K(r.layer, start+t), cache.V(r.layer, start+t)
					for h := range g.kvHeads {
						kt.getRow(k[h*r.hd:(h+1)*r.hd], (h*f.width+t)*r.hd)
						vt.getRow(v[h*r.hd:(h+1)*r.hd], (h*f.width+t)*r.hd)
					}
				}
			}
		}
		return
	}
	// get reads row r of slot s, head h of src (slots, heads, rows, width)
	// into dst's head h.
	get := func(src *tensor, rows, s, r int, dst []float32, hd int) {
		sh := src.buf.Shape()
		width := sh[len(sh)-1]
		for h := range g.kvHeads {
			src.getRow(dst[h*hd:(h+1)*hd], ((s*g.kvHeads+h)*rows+r)*width)
		}
	}
	for j, sl := range be.kvLayer {
		out := f.out[j]
		for kind, layers := range sl {
			hd := g.headSliding
			if kind == 1 {
				hd = g.headFull
			}
			for s, layer := range layers {
				for t := range n {
					p := start + t
					k, v := cache.K(layer, p), cache.V(layer, p)
					switch {
					case f.name == PubVerify && kind == 0:
						get(out["new_K_sliding"], f.width, s, t, k, hd)
						get(out["new_V_sliding"], f.width, s, t, v, hd)
					case f.name == PubVerify:
						get(out["new_K_full"], f.width, s, t, k, hd)
						get(out["new_V_full"], f.width, s, t, v, hd)
					case kind == 0:
						get(out["K_sliding_out"], g.window, s, g.window-1, k, hd)
						get(out["V_sliding_out"], g.window, s, g.window-1, v, hd)
					default:
						get(out["K_full_out"], g.context, s, p, k, hd)
						get(out["V_full_out"], g.context, s, p, v, hd)
					}
				}
			}
		}
	}
}

// CallStats returns the calls made so far per function and real-row count.
func (be *PubBackend) CallStats() []CallStat {
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.stats.list()
}

func (be *PubBackend) mappings() []*mmap.Mapping {
	var ms []*mmap.Mapping
	for _, s := range []*Sidecar{be.embed, be.ple} {
		if s != nil {
			ms = append(ms, s.mappings()...)
		}
	}
	for _, t := range be.ropes {
		if t.m != nil {
			ms = append(ms, t.m)
		}
	}
	return ms
}

// Close releases the buffers, the mapped files and the executor.
func (be *PubBackend) Close() error {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.closed {
		return nil
	}
	be.closed = true
	be.release()
	return be.run.Close()
}

func (be *PubBackend) release() {
	for _, f := range be.fns {
		for _, t := range f.all {
			t.close()
		}
		f.all = nil
	}
	for _, s := range []*Sidecar{be.embed, be.ple} {
		if s != nil {
			s.Close()
		}
	}
	for _, t := range be.ropes {
		t.close()
	}
}

// perLayerEmbedScale is per_layer_embed_scale, or sqrt(per_layer_dim)
// (what conversion/build_gemma4_bundle.py writes) when absent.
func (c PublishedConfig) perLayerEmbedScale() float64 {
	if c.PerLayerEmbedScale > 0 {
		return c.PerLayerEmbedScale
	}
	return math.Sqrt(float64(c.PerLayerDim))
}

// openPubSidecar maps a published INT8 table (name_q8.bin, name_scales.bin):
// row r is fp16(float32(q) * (float32(scale[r]) / 127 * mul)), the value
// CoreML-LLM's EmbeddingLookup computes.
func openPubSidecar(dir, name string, rows, cols int, mul float64) (*Sidecar, error) {
	if mul <= 0 || math.IsInf(mul, 0) || math.IsNaN(mul) {
		return nil, fmt.Errorf("%w: %s: the scale of %s is %v (embed_scale / per_layer_embed_scale must be positive)", ErrBundle, filepath.Join(dir, "model_config.json"), name, mul)
	}
	s, err := openSidecar(dir, name, SidecarInfo{Rows: rows, Cols: cols,
		Data: FileInfo{File: name + "_q8.bin", DType: "int8"}, Scales: &FileInfo{File: name + "_scales.bin"}})
	if err != nil {
		return nil, err
	}
	s.pubMul = float32(mul)
	return s, nil
}

// file is the chunk file function fn of chunk j is in.
func (be *PubBackend) file(j int, fn string) string {
	if fn == PubPrefill {
		return filepath.Join(be.p.Dir, be.p.Prefill[j])
	}
	return be.chunkNames[j]
}

// derivePrefill works out where each prefill chunk's K/V outputs go and
// checks them against the features, returning why the prefill chunks
// cannot be used ("" when they can). Prefill chunk j returns a K{i}/V{i}
// pair per layer it owns in layer order, numbered without the KV
// producers (the last sliding and full layers before the KV-shared ones),
// which return kv13_* and kv14_* instead; a layer's decode slot is its
// rank among the chunk's sliding (or full) layers (PUBLISHED.md; the
// project's gemma4_prefill_chunks.py and ChunkedEngine.buildKVSlotMap).
func (be *PubBackend) derivePrefill() string {
	c, g := be.p.Config, &be.geo
	if len(be.p.Prefill) == 0 {
		return "the bundle has no prefill chunks: the prompt runs token by token"
	}
	ins, _, ok := be.run.Features(0, PubPrefill)
	if !ok {
		if cr, isCR := be.run.(*CoreMLExecutor); isCR && cr.NoPrefill != "" {
			return cr.NoPrefill
		}
		return "no prefill function loaded: the prompt runs token by token"
	}
	name0 := be.file(0, PubPrefill)
	h, ok := feature(ins, "hidden_states")
	if !ok || len(h.Shape) != 3 || h.Shape[1] < 2 {
		return name0 + ": hidden_states is not (1, N, hidden): the prompt runs token by token"
	}
	N := h.Shape[1]
	if len(c.LayerTypes) != c.NumLayers || c.NumKVShared < 0 || c.NumKVShared >= c.NumLayers {
		return fmt.Sprintf("model_config.json has %d layer_types for %d layers (num_kv_shared_layers %d): which layer a prefill chunk's K/V rows are is unknown, so the prompt runs token by token", len(c.LayerTypes), c.NumLayers, c.NumKVShared)
	}
	owned := c.NumLayers - c.NumKVShared
	producer := map[string]int{"sliding_attention": -1, "full_attention": -1}
	for i := range owned {
		if _, ok := producer[c.LayerTypes[i]]; !ok {
			return fmt.Sprintf("model_config.json: layer_types[%d] is %q: the prompt runs token by token", i, c.LayerTypes[i])
		}
		producer[c.LayerTypes[i]] = i
	}
	layer := 0
	for j := range be.p.Decode {
		sl, ok := be.kvLayer[j]
		if !ok {
			continue
		}
		var rows []pubPrefillRow
		ns, nf, local := 0, 0, 0
		for ns < len(sl[0]) || nf < len(sl[1]) {
			if layer >= owned {
				return "the decode chunks' cache slots outnumber the layers that own KV in layer_types: the prompt runs token by token"
			}
			k, v := fmt.Sprint("K", local), fmt.Sprint("V", local)
			switch layer {
			case producer["sliding_attention"]:
				k, v = "kv13_k", "kv13_v"
			case producer["full_attention"]:
				k, v = "kv14_k", "kv14_v"
			default:
				local++
			}
			if c.LayerTypes[layer] == "full_attention" {
				if nf == len(sl[1]) {
					return fmt.Sprintf("layer %d (full) falls in %s, which has %d full slots: the prompt runs token by token", layer, be.chunkNames[j], len(sl[1]))
				}
				rows = append(rows, pubPrefillRow{k: k, v: v, layer: sl[1][nf], hd: g.headFull})
				nf++
			} else {
				if ns == len(sl[0]) {
					return fmt.Sprintf("layer %d (sliding) falls in %s, which has %d sliding slots: the prompt runs token by token", layer, be.chunkNames[j], len(sl[0]))
				}
				rows = append(rows, pubPrefillRow{k: k, v: v, layer: sl[0][ns], hd: g.headSliding})
				ns++
			}
			layer++
		}
		be.prefillRows[j] = rows
	}
	for j := range be.p.Decode {
		_, outs, ok := be.run.Features(j, PubPrefill)
		if !ok {
			return be.file(j, PubPrefill) + ": no prefill function loaded: the prompt runs token by token"
		}
		for _, r := range be.prefillRows[j] {
			for _, n := range []string{r.k, r.v} {
				want := []int{1, g.kvHeads, N, r.hd}
				if f, ok := feature(outs, n); !ok || f.DType != mlcore.Float16 || !slices.Equal(f.Shape, want) {
					return fmt.Sprintf("%s: output %q is not fp16 %v (the rows of the layer layer_types places there): the prompt runs token by token", be.file(j, PubPrefill), n, want)
				}
			}
		}
		if j == len(be.p.Decode)-1 {
			if id, ok := feature(outs, "token_id"); !ok || id.DType != mlcore.Int32 || product(id.Shape) != 1 {
				return be.file(j, PubPrefill) + ": no int32 output \"token_id\" of one element: the prompt runs token by token"
			}
		}
	}
	g.prefillWidth = N
	return ""
}
