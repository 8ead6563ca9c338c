// Package refrun is the reference executor of the Core ML backend: it
// executes a bundle's function contract (engine/coreml/convert/README.md,
// "Driving a bundle") in float32 with the CPU backend's kernels, so that
// the Core ML backend's host side — sidecar rows, RoPE rows, masks,
// placement, host KV, chunk handoff, commit — runs and is tested on any
// platform, Linux CI included.
//
// # Where the weights come from
//
// A bundle's weights live in its .mlpackage files (a protobuf MIL program
// and coremltools' blob storage), which only Core ML executes. The
// reference executor instead reads the checkpoint the bundle was converted
// from — the manifest names it and records the sha256 of each of its
// files, which Open checks — and rounds every weight to fp16 exactly as the
// converter does (numpy astype(float16): round to nearest even), so it
// holds the values the bundle's fp16 weights hold. Bundles with int8 or
// int4 weights are refused: their quantised values exist only in the
// packages.
//
// # What is the CPU backend's
//
// The layers are the CPU backend's (cpu.Layers, bound by its loaders): the
// same block functions compute each layer's norms, projections, MLP and
// per-layer input, and the per-layer inputs and the final norm and logits.
// This package brings only the bundle's layout: every layer's attention
// core (exec.Attend: RoPE by the cos/sin rows, the new K/V rows written to
// k_new/v_new and placed into the cache tensor, attention through the
// mask) and the function's ends (hidden and per-layer rows in and out, the
// last row's selection, logits and the blockwise argmax in blocks).
//
// # What it proves, and what it does not
//
// It executes each function as the contract declares it: it reads every
// input the host built (hidden rows, per-layer rows, the cos/sin rows, the
// masks, the placement matrices, the cache tensors, the one-hot `last`)
// and nothing else — attention runs over the slots the mask leaves open,
// new K/V rows enter the cache tensor through the placement matrix — and
// writes every output. A host that built a wrong mask, a wrong RoPE row, a
// KV row in the wrong slot or committed a rejected row gets wrong numbers.
// Where the contract leaves the arithmetic free (the order of a softmax
// sum), it follows the CPU backend (positions in order), so on a
// checkpoint whose values the bundle holds exactly the Core ML backend on
// this executor gives the CPU backend's logits bit for bit (gemma4; llama's
// float64 RoPE and its pre-scaled queries make it equal to rounding).
// It does not prove that the saved packages compute the contract (the
// converter's interpreter test does), nor anything about the Neural
// Engine's fp16 rounding (`anechat doctor` measures that on a Mac).
package refrun

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/cpu"
	"anechat/engine/model/mmap"
)

// Executor executes a bundle's functions in float32. It is a coreml.Executor.
type Executor struct {
	m      *coreml.Manifest
	layers *cpu.Layers
}

// Open reads the checkpoint at source (a .gguf file or a Hugging Face
// directory) that bundle b was converted from, checks each of its files
// against the sha256 the manifest recorded, and binds its weights rounded
// to fp16. pool may be nil (one worker per CPU, ended by Close).
func Open(ctx context.Context, b *coreml.Bundle, source string, pool *cpu.Pool) (*Executor, error) {
	m := b.Manifest
	if w := m.Converter.Weights; w != "fp16" {
		return nil, fmt.Errorf("refrun: %s has %s weights: the reference executor reproduces fp16 weights only (convert with --weights fp16)", b.Dir, w)
	}
	if err := checkSource(ctx, m, source); err != nil {
		return nil, err
	}
	layers, err := cpu.OpenLayers(source, half, pool)
	if err != nil {
		return nil, fmt.Errorf("refrun: %w", err)
	}
	if err := sameGeometry(m, layers); err != nil {
		layers.Close()
		return nil, fmt.Errorf("refrun: %s: %w", source, err)
	}
	return &Executor{m: m, layers: layers}, nil
}

// sameGeometry checks that the checkpoint's layers are the ones the
// manifest describes: the widths, the vocabulary and each layer's heads,
// head width, MLP width and K/V source.
func sameGeometry(m *coreml.Manifest, l *cpu.Layers) error {
	a, cfg := &m.Arch, l.Config()
	if cfg.Hidden != a.Hidden || cfg.VocabSize != a.Vocab || len(cfg.KV.Layers) != len(a.Layers) {
		return fmt.Errorf("the checkpoint (hidden %d, vocabulary %d, %d layers) does not have the bundle's geometry (%d, %d, %d)",
			cfg.Hidden, cfg.VocabSize, len(cfg.KV.Layers), a.Hidden, a.Vocab, len(a.Layers))
	}
	for i, want := range a.Layers {
		got := l.Shape(i)
		if got.Heads != a.Heads || got.KVHeads != want.KVHeads || got.HeadDim != want.HeadDim || got.FFN != want.FFN ||
			cfg.KV.Layers[i].Source != want.Source {
			return fmt.Errorf("layer %d of the checkpoint (%d heads, %d K/V heads of %d, MLP %d, K/V of layer %d) is not the bundle's (%d, %d of %d, %d, %d)",
				i, got.Heads, got.KVHeads, got.HeadDim, got.FFN, cfg.KV.Layers[i].Source, a.Heads, want.KVHeads, want.HeadDim, want.FFN, want.Source)
		}
	}
	return nil
}

// checkSource compares the checkpoint's files with the manifest's
// source.files: the same names and the same sha256. The names are local
// (ReadManifest refuses one that is absolute or climbs out with ".."), and
// each file is opened only if it is regular: a manifest cannot make it
// hash a file outside the checkpoint, nor /dev/zero forever.
func checkSource(ctx context.Context, m *coreml.Manifest, source string) error {
	st, err := os.Stat(source)
	if err != nil {
		return fmt.Errorf("refrun: source checkpoint: %w", err)
	}
	if len(m.Source.Files) == 0 {
		return fmt.Errorf("refrun: the manifest records no source files")
	}
	for _, f := range m.Source.Files {
		path := filepath.Join(source, filepath.FromSlash(f.File))
		if !st.IsDir() {
			if f.File != filepath.Base(source) {
				return fmt.Errorf("refrun: the bundle was converted from %q, not %s", f.File, source)
			}
			path = source
		}
		sum, err := mmap.SHA256(ctx, path, nil)
		if err != nil {
			return fmt.Errorf("refrun: source checkpoint: %w", err)
		}
		if sum != f.SHA256 {
			return fmt.Errorf("refrun: %s: sha256 %s differs from the manifest's source.files %s: not the checkpoint this bundle was converted from", path, sum, f.SHA256)
		}
	}
	return nil
}

// half rounds w to fp16 in place, as the converter rounds the bundle's
// weights (numpy astype(float16): round to nearest even), failing on an
// overflow as the converter does.
func half(name string, w []float32) error {
	for i, v := range w {
		h := coreml.RoundHalf(v)
		if math.IsInf(float64(h), 0) && !math.IsInf(float64(v), 0) {
			return fmt.Errorf("weight %s overflows fp16 (|w| %g)", name, v)
		}
		w[i] = h
	}
	return nil
}

// Name implements coreml.Executor.
func (r *Executor) Name() string { return "reference (CPU kernels, float32)" }

// Float implements coreml.Executor: the contract is computed in float32.
func (r *Executor) Float() mlcore.DType { return mlcore.Float32 }

// Close releases the checkpoint and ends the pool the executor made.
func (r *Executor) Close() error { return r.layers.Close() }

// ErrContract is wrapped by Run's errors for buffers that are not the
// function's declared inputs and outputs.
var ErrContract = errors.New("refrun: the buffers are not the function's")

// view returns a declared tensor's buffer as float32 (fp16 features) or
// int32 values, checking its type and shape.
func view(bufs map[string]mlcore.Buffer, t coreml.TensorInfo, side string) ([]float32, []int32, error) {
	b, ok := bufs[t.Name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: no %s buffer %q", ErrContract, side, t.Name)
	}
	if !slices.Equal(b.Shape(), t.Shape) {
		return nil, nil, fmt.Errorf("%w: %s %q has shape %v, want %v", ErrContract, side, t.Name, b.Shape(), t.Shape)
	}
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	if t.DType == "int32" {
		if b.DType() != mlcore.Int32 || b.Len() != n {
			return nil, nil, fmt.Errorf("%w: %s %q is not %d int32s", ErrContract, side, t.Name, n)
		}
		return nil, b.Int32s(), nil
	}
	if b.DType() != mlcore.Float32 || b.Len() != n {
		return nil, nil, fmt.Errorf("%w: %s %q is not %d float32s", ErrContract, side, t.Name, n)
	}
	return b.Float32s(), nil, nil
}

// Run implements coreml.Executor: function fn of chunk, on float32 buffers.
func (r *Executor) Run(ctx context.Context, chunk int, fn *coreml.FunctionInfo, inputs, outputs map[string]mlcore.Buffer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if chunk < 0 || chunk >= len(r.m.Chunks) {
		return fmt.Errorf("%w: no chunk %d", ErrContract, chunk)
	}
	in := map[string][]float32{}
	out := map[string][]float32{}
	ints := map[string][]int32{}
	if len(inputs) != len(fn.Inputs) || len(outputs) != len(fn.Outputs) {
		return fmt.Errorf("%w: %d inputs and %d outputs for a function of %d and %d", ErrContract, len(inputs), len(outputs), len(fn.Inputs), len(fn.Outputs))
	}
	for _, t := range fn.Inputs {
		f, _, err := view(inputs, t, "input")
		if err != nil {
			return err
		}
		in[t.Name] = f
	}
	for _, t := range fn.Outputs {
		f, i, err := view(outputs, t, "output")
		if err != nil {
			return err
		}
		if i != nil {
			ints[t.Name] = i
		} else {
			out[t.Name] = f
		}
	}
	c := &r.m.Chunks[chunk]
	e := exec{r: r, c: c, j: chunk, T: fn.Width, in: in, out: out, ints: ints, last: chunk == len(r.m.Chunks)-1}
	e.prefill = fn.Kind == coreml.KindPrefill
	return e.run()
}

// name returns "k_new_3" and the like.
func name(prefix string, i int) string { return prefix + fmt.Sprint(i) }
