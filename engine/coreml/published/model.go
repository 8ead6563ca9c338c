// Package published runs a bundle in the layout the CoreML-LLM project
// publishes for Gemma 4 E2B (coreml.Published reads and checks it;
// engine/coreml/PUBLISHED.md has its function contract) as a
// model.Backend, on the Core ML backend's host pieces (sidecars, masks,
// the Core ML executor). model.go is the Model and its Executor;
// geometry.go what the loaded functions declare, checked against
// model_config.json; buffers.go every function's buffers and the cache
// tensors kept in step with the caller's kv.Cache; forward.go a call: the
// host-built inputs, the chunks in order, the new K/V rows written back.
package published

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"

	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/kv"
	"anechat/engine/model"
)

// The functions of a published CoreML-LLM chunk (PUBLISHED.md):
// FuncDecode is the default function of a chunk (one token), FuncVerify the
// width-K verify function beside it.
const (
	FuncDecode = "decode_q1"
	FuncVerify = "verify_qK"
	// FuncPrefill names the default function of prefill_chunkN (N prompt
	// tokens from position 0) under chunk N's index.
	FuncPrefill = "prefill"
)

// ErrNoLogits is wrapped by Model.Forward's error for a call that
// needs logits: a published bundle ends in an in-graph argmax.
var ErrNoLogits = errors.New("coreml: this bundle returns greedy token ids only (its last chunk ends in an in-graph argmax, without logits): sampling with a temperature needs logits; decode greedily or convert the checkpoint with `make bundle`")

// A Executor runs the functions of a published bundle's decode chunks.
// Run's fn names a function (FuncDecode or FuncVerify) with the features
// Features reported; its buffers are fp16 (Float must be mlcore.Float16:
// the bundle's functions are what they are) or int32.
type Executor interface {
	coreml.Executor
	// Features returns the inputs and outputs function fn of decode chunk
	// j (0-based) declares, as loaded; ok is false when the chunk has no
	// such function.
	Features(chunk int, fn string) (ins, outs []mlcore.FeatureSpec, ok bool)
}

// Model runs a published CoreML-LLM bundle (the 4-chunk decode layout
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
type Model struct {
	p     *coreml.Published
	run   Executor
	cfg   model.Config
	geo   geometry
	slots []cacheSlot
	// kvLayer maps chunk -> {sliding, full} -> slot -> kv.Cache layer.
	kvLayer    map[int][2][]int
	embed, ple *coreml.Sidecar
	ropes      map[string]*npyTable // by input name: cos_s, sin_s, cos_f, sin_f
	chunkNames []string
	// prefillRows lists, per chunk, the K/V outputs of its prefill
	// function; noPrefill says why the prefill chunks are not used.
	prefillRows map[int][]prefillRow
	noPrefill   string

	mu     sync.Mutex
	fns    map[string]*function
	stats  coreml.CallStats
	closed bool
}

// NewModel returns the backend of a read bundle p run by r: it maps
// the sidecars and RoPE tables, derives the geometry from the functions r
// loaded, checks it against model_config.json and the contract, and
// allocates every buffer. Close releases them and the executor.
// fingerprint is the model's identity (engine/load's).
func NewModel(p *coreml.Published, r Executor, fingerprint string) (_ *Model, err error) {
	if r.Float() != mlcore.Float16 {
		return nil, fmt.Errorf("coreml: executor %s computes in %s; a published bundle's functions take fp16", r.Name(), r.Float())
	}
	be := &Model{p: p, run: r, fns: map[string]*function{}, ropes: map[string]*npyTable{}, kvLayer: map[int][2][]int{}, prefillRows: map[int][]prefillRow{}}
	defer func() {
		if err != nil {
			be.release()
		}
	}()
	for j, name := range p.Decode {
		be.chunkNames = append(be.chunkNames, filepath.Join(p.Dir, name))
		if _, _, ok := r.Features(j, FuncDecode); !ok {
			return nil, fmt.Errorf("%w: %s has no %s function loaded", coreml.ErrBundle, be.chunkNames[j], FuncDecode)
		}
	}
	if err := be.deriveGeometry(); err != nil {
		return nil, err
	}
	c := p.Config
	if be.embed, err = openSidecar(p.Dir, "embed_tokens", c.VocabSize, c.HiddenSize, c.EmbedScale); err != nil {
		return nil, err
	}
	if be.ple, err = openSidecar(p.Dir, "embed_tokens_per_layer", c.VocabSize, c.NumLayers*c.PerLayerDim, perLayerEmbedScale(c)); err != nil {
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
	kinds := []string{FuncDecode}
	if be.geo.verifyWidth > 0 {
		kinds = append(kinds, FuncVerify)
	}
	if be.noPrefill = be.derivePrefill(); be.noPrefill == "" {
		kinds = append(kinds, FuncPrefill)
	} else {
		be.prefillRows = nil
	}
	for _, name := range kinds {
		f, err := be.allocate(name)
		if err != nil && name == FuncPrefill {
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
		return nil, fmt.Errorf("%w: %s: %w", coreml.ErrBundle, p.Dir, err)
	}
	return be, nil
}

// Opener returns the coreml.Loader's OpenPublished that runs a published
// bundle as a Model with the executor open makes (NewCoreMLExecutor's
// on darwin/arm64), which the Model closes.
func Opener(open func(ctx context.Context, p *coreml.Published, progress func(done, total int)) (Executor, error)) coreml.OpenPublished {
	return func(ctx context.Context, p *coreml.Published, fingerprint string, progress func(done, total int)) (model.Backend, error) {
		r, err := open(ctx, p, progress)
		if err != nil {
			return nil, err
		}
		m, err := NewModel(p, r, fingerprint)
		if err != nil {
			r.Close()
			return nil, err
		}
		return m, nil
	}
}

// Config implements model.Backend.
func (be *Model) Config() model.Config { return be.cfg }

// Widths implements model.Backend: 1 (the decode function) and 2..K (the
// verify function, its unused rows padded) when the bundle has one.
func (be *Model) Widths() []int {
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
func (be *Model) PrefillNote() string { return be.noPrefill }

// VerifyWidth is the verify function's width K, 0 without one.
func (be *Model) VerifyWidth() int { return be.geo.verifyWidth }

// ArgmaxOnly implements model.ArgmaxOnlyer: the bundle returns no logits.
func (be *Model) ArgmaxOnly() bool { return true }

// Executor is what executes the functions.
func (be *Model) Executor() Executor { return be.run }

// Published is the bundle.
func (be *Model) Published() *coreml.Published { return be.p }

// Kernels implements model.KernelNamer.
func (be *Model) Kernels() string { return "coreml-llm/" + be.run.Name() }

// CheckFiles implements model.FileChecker for the mapped sidecars.
func (be *Model) CheckFiles() error {
	for _, s := range []*coreml.Sidecar{be.embed, be.ple} {
		if err := s.Check(); err != nil {
			return err
		}
	}
	return nil
}

// CallStats returns the calls made so far per function and real-row count.
func (be *Model) CallStats() []coreml.CallStat {
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.stats.List()
}

// Close releases the buffers, the mapped files and the executor.
func (be *Model) Close() error {
	be.mu.Lock()
	defer be.mu.Unlock()
	if be.closed {
		return nil
	}
	be.closed = true
	be.release()
	return be.run.Close()
}

// perLayerEmbedScale is per_layer_embed_scale, or sqrt(per_layer_dim)
// (what conversion/build_gemma4_bundle.py writes) when absent.
func perLayerEmbedScale(c coreml.PublishedConfig) float64 {
	if c.PerLayerEmbedScale > 0 {
		return c.PerLayerEmbedScale
	}
	return math.Sqrt(float64(c.PerLayerDim))
}

// openSidecar maps a published INT8 table (name_q8.bin, name_scales.bin):
// row r is fp16(float32(q) * (float32(scale[r]) / 127 * mul)), the value
// CoreML-LLM's EmbeddingLookup computes.
func openSidecar(dir, name string, rows, cols int, mul float64) (*coreml.Sidecar, error) {
	if mul <= 0 || math.IsInf(mul, 0) || math.IsNaN(mul) {
		return nil, fmt.Errorf("%w: %s: the scale of %s is %v (embed_scale / per_layer_embed_scale must be positive)", coreml.ErrBundle, filepath.Join(dir, "model_config.json"), name, mul)
	}
	return coreml.OpenPublishedSidecar(dir, name, name+"_q8.bin", name+"_scales.bin", rows, cols, float32(mul))
}
