// Package refrun is the reference runner of the Core ML backend: it
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
// reference runner instead reads the checkpoint the bundle was converted
// from — the manifest names it and records the sha256 of each of its
// files, which Open checks — and rounds every weight to fp16 exactly as the
// converter does (numpy astype(float16): round to nearest even), so it
// holds the values the bundle's fp16 weights hold. Bundles with int8 or
// int4 weights are refused: their quantised values exist only in the
// packages.
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
// this runner gives the CPU backend's logits bit for bit (gemma4; llama's
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

	"anechat/engine/arch"
	"anechat/engine/arch/gemma4"
	"anechat/engine/arch/llama"
	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/cpu"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
	"anechat/engine/model/safetensors"
)

// layer holds one decoder layer's weights (fp16 values, as float32).
type layer struct {
	inNorm, postAttnNorm, preFFNorm, postFFNorm, ffnNorm []float32
	wq, wk, wv, wo                                       *cpu.Matrix
	qNorm, kNorm                                         []float32
	gate, up, down                                       *cpu.Matrix
	pleGate, pleProj                                     *cpu.Matrix
	plePostNorm                                          []float32
	scalar                                               float32
}

// Runner executes a bundle's functions in float32. It is a coreml.Runner.
type Runner struct {
	m       *coreml.Manifest
	g       *gemma4.Config
	l       *llama.Config
	pool    *cpu.Pool
	ownPool bool
	layers  []layer
	out     *cpu.Matrix // vocab x hidden
	norm    []float32
	pleIn   *cpu.Matrix // layers*PLEDim x hidden
	pleNorm []float32
}

// Open reads the checkpoint at source (a .gguf file or a Hugging Face
// directory) that bundle b was converted from, checks each of its files
// against the sha256 the manifest recorded, and binds its weights rounded
// to fp16. pool may be nil (one worker per CPU, ended by Close).
func Open(ctx context.Context, b *coreml.Bundle, source string, pool *cpu.Pool) (_ *Runner, err error) {
	m := b.Manifest
	if w := m.Converter.Weights; w != "fp16" {
		return nil, fmt.Errorf("refrun: %s has %s weights: the reference runner reproduces fp16 weights only (convert with --weights fp16)", b.Dir, w)
	}
	if err := checkSource(ctx, m, source); err != nil {
		return nil, err
	}
	r := &Runner{m: m, pool: pool}
	r.g, r.l = b.Arch()
	if r.pool == nil {
		r.pool, r.ownPool = cpu.NewPool(0), true
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.l != nil {
		err = r.bindLlama(source)
	} else {
		err = r.bindGemma4(source)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
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

// half returns vals rounded to fp16 (in place), failing on an overflow as
// the converter does.
func half(name string, vals []float32) ([]float32, error) {
	for i, v := range vals {
		h := coreml.RoundHalf(v)
		if math.IsInf(float64(h), 0) && !math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("refrun: weight %s overflows fp16 (|w| %g)", name, v)
		}
		vals[i] = h
	}
	return vals, nil
}

func (r *Runner) bindLlama(path string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("refrun: %w", err)
	}
	defer f.Close() // every weight is copied out (rounded to fp16)
	o, err := llama.Parse(f)
	if err != nil {
		return fmt.Errorf("refrun: %w", err)
	}
	if o.Hidden != r.l.Hidden || o.Layers != r.l.Layers || o.Vocab != r.l.Vocab || o.FFN != r.l.FFN || o.KVHeads != r.l.KVHeads || o.Heads != r.l.Heads {
		return fmt.Errorf("refrun: %s does not have the bundle's llama geometry", path)
	}
	read := func(t arch.Tensor) ([]float32, error) {
		ti, ok := f.Tensor(t.Name)
		if !ok {
			return nil, fmt.Errorf("refrun: %s: missing tensor %q", path, t.Name)
		}
		rows := max(t.Rows, 1)
		if ti.Elements() != rows*t.Cols {
			return nil, fmt.Errorf("refrun: %s: tensor %q has %d elements, want %d", path, t.Name, ti.Elements(), rows*t.Cols)
		}
		data, err := f.TensorData(t.Name)
		if err != nil {
			return nil, fmt.Errorf("refrun: %w", err)
		}
		mat, err := cpu.NewMatrix(t.Name, ti.Type, rows, t.Cols, data)
		if err != nil {
			return nil, fmt.Errorf("refrun: %s: %w", path, err)
		}
		vals := make([]float32, rows*t.Cols)
		for i := range rows {
			mat.Row(vals[i*t.Cols:], i)
		}
		return half(t.Name, vals)
	}
	matrix := func(t arch.Tensor) (*cpu.Matrix, error) {
		v, err := read(t)
		if err != nil {
			return nil, err
		}
		return cpu.FromF32(t.Name, t.Rows, t.Cols, v), nil
	}
	embd, out, norm := o.Globals()
	if !o.Tied {
		embd = out
	}
	if r.out, err = matrix(embd); err != nil {
		return err
	}
	if r.norm, err = read(norm); err != nil {
		return err
	}
	r.layers = make([]layer, o.Layers)
	for i := range r.layers {
		l, w := &r.layers[i], o.Layer(i)
		l.scalar = 1
		if l.inNorm, err = read(w.AttnNorm); err != nil {
			return err
		}
		if l.ffnNorm, err = read(w.FFNNorm); err != nil {
			return err
		}
		for _, b := range []struct {
			dst **cpu.Matrix
			t   arch.Tensor
		}{{&l.wq, w.Q}, {&l.wk, w.K}, {&l.wv, w.V}, {&l.wo, w.O}, {&l.gate, w.Gate}, {&l.up, w.Up}, {&l.down, w.Down}} {
			if *b.dst, err = matrix(b.t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Runner) bindGemma4(path string) error {
	d, err := safetensors.OpenDir(path)
	if err != nil {
		return fmt.Errorf("refrun: %w", err)
	}
	defer d.Close() // every weight is copied out (rounded to fp16)
	o := r.g
	prefix := gemma4.Prefix(func(name string) bool { _, ok := d.Tensor(name); return ok })
	read := func(t arch.Tensor) ([]float32, error) {
		v, ti, err := d.Float32s(t.Name)
		if err != nil {
			return nil, fmt.Errorf("refrun: %w", err)
		}
		if len(v) != max(t.Rows, 1)*t.Cols {
			return nil, fmt.Errorf("refrun: %s: tensor %q has shape %v, want %d x %d", path, t.Name, ti.Shape, t.Rows, t.Cols)
		}
		return half(t.Name, v)
	}
	matrix := func(t arch.Tensor) (*cpu.Matrix, error) {
		v, err := read(t)
		if err != nil {
			return nil, err
		}
		return cpu.FromF32(t.Name, t.Rows, t.Cols, v), nil
	}
	g := o.Globals(prefix)
	// The bundle's output projection is the fp16 embedding when tied.
	if r.out, err = matrix(g.Out); err != nil {
		return err
	}
	if r.norm, err = read(g.Norm); err != nil {
		return err
	}
	if o.PLEDim > 0 {
		if r.pleIn, err = matrix(g.PLEProj); err != nil {
			return err
		}
		if r.pleNorm, err = read(g.PLENorm); err != nil {
			return err
		}
	}
	r.layers = make([]layer, len(o.Layers))
	for i := range r.layers {
		l, w := &r.layers[i], o.Layer(i, prefix)
		for _, v := range []struct {
			dst *[]float32
			t   arch.Tensor
		}{{&l.inNorm, w.InNorm}, {&l.postAttnNorm, w.PostAttnNorm}, {&l.preFFNorm, w.PreFFNorm}, {&l.postFFNorm, w.PostFFNorm},
			{&l.qNorm, w.QNorm}, {&l.kNorm, w.KNorm}, {&l.plePostNorm, w.PLEPostNorm}} {
			if v.t.Name != "" {
				if *v.dst, err = read(v.t); err != nil {
					return err
				}
			}
		}
		for _, x := range []struct {
			dst **cpu.Matrix
			t   arch.Tensor
		}{{&l.wq, w.Q}, {&l.wo, w.O}, {&l.gate, w.Gate}, {&l.up, w.Up}, {&l.down, w.Down}, {&l.wk, w.K}, {&l.wv, w.V},
			{&l.pleGate, w.PLEGate}, {&l.pleProj, w.PLEProj}} {
			if x.t.Name != "" {
				if *x.dst, err = matrix(x.t); err != nil {
					return err
				}
			}
		}
		l.scalar = 1
		if _, ok := d.Tensor(w.Scalar.Name); ok {
			s, err := read(w.Scalar)
			if err != nil {
				return err
			}
			l.scalar = s[0]
		}
	}
	return nil
}

// Name implements coreml.Runner.
func (r *Runner) Name() string { return "reference (CPU kernels, float32)" }

// Float implements coreml.Runner: the contract is computed in float32.
func (r *Runner) Float() mlcore.DType { return mlcore.Float32 }

// Close ends the pool the runner made.
func (r *Runner) Close() error {
	if r.ownPool {
		r.pool.Close()
		r.ownPool = false
	}
	return nil
}

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

// Run implements coreml.Runner: function fn of chunk, on float32 buffers.
func (r *Runner) Run(ctx context.Context, chunk int, fn *coreml.FunctionInfo, inputs, outputs map[string]mlcore.Buffer) error {
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
