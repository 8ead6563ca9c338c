package refrun_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"anechat/engine/coreml"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/coreml/refrun"
	"anechat/engine/cpu"
	"anechat/engine/model"
)

// fakeCoreML is an mlcore.Runtime whose "compiled models" compute the
// function contract with the reference executor on fp16 buffers (inputs read
// as fp16, outputs rounded to fp16): the Core ML executor's compile cache,
// function selection, description checks, progress and cancellation, and
// the whole fp16 host path, run on Linux.
type fakeCoreML struct {
	b        *coreml.Bundle
	ref      *refrun.Executor
	compiles int
	closed   int
	// reshape, when set, changes the declared shape of this input of
	// every function (a package that disagrees with its manifest).
	reshape string
	// roles, when set, records what each buffer in surfaces (by its
	// memory) has been to a call: Predict fails when one is an input and
	// an output backing, the rule mlcore enforces on a Mac.
	surfaces map[*uint16]bool
	roles    map[*uint16]string
}

func (f *fakeCoreML) Compile(_ context.Context, pkg string) (string, error) {
	f.compiles++
	dir, err := os.MkdirTemp("", "fake-mlmodelc-")
	if err != nil {
		return "", err
	}
	for j := range f.b.Manifest.Chunks {
		if f.b.PackagePath(j) == pkg {
			return dir, os.WriteFile(filepath.Join(dir, "chunk"), []byte(strconv.Itoa(j)), 0o644)
		}
	}
	return "", errors.New("unknown package " + pkg)
}

func (f *fakeCoreML) Load(_ context.Context, compiled string, opts mlcore.LoadOptions) (mlcore.Function, error) {
	raw, err := os.ReadFile(filepath.Join(compiled, "chunk"))
	if err != nil {
		return nil, err
	}
	j, _ := strconv.Atoi(string(raw))
	for i := range f.b.Manifest.Chunks[j].Functions {
		info := &f.b.Manifest.Chunks[j].Functions[i]
		if info.Name == opts.FunctionName {
			return &fakeFn{rt: f, chunk: j, info: info}, nil
		}
	}
	return nil, &mlcore.NSError{Op: "load", Description: "no function " + opts.FunctionName}
}

type fakeFn struct {
	rt    *fakeCoreML
	chunk int
	info  *coreml.FunctionInfo
	calls int64
}

func specs(ts []coreml.TensorInfo, reshape string) []mlcore.FeatureSpec {
	var out []mlcore.FeatureSpec
	for _, t := range ts {
		dt := mlcore.Float16
		if t.DType == "int32" {
			dt = mlcore.Int32
		}
		shape := slices.Clone(t.Shape)
		if t.Name == reshape {
			shape[len(shape)-1]++
		}
		out = append(out, mlcore.FeatureSpec{Name: t.Name, MultiArray: true, DType: dt, Shape: shape})
	}
	return out
}

func (f *fakeFn) Inputs() []mlcore.FeatureSpec  { return specs(f.info.Inputs, f.rt.reshape) }
func (f *fakeFn) Outputs() []mlcore.FeatureSpec { return specs(f.info.Outputs, "") }
func (f *fakeFn) Stats() mlcore.Stats           { return mlcore.Stats{Calls: f.calls} }
func (f *fakeFn) Close() error                  { f.rt.closed++; return nil }

// rowIndex maps a row-major element index of b to its memory index, for
// contiguous buffers and buffers in padded rows alike.
func rowIndex(b mlcore.Buffer) func(int) int {
	width, pitch, ok := b.Rows()
	if !ok {
		panic("fake: a buffer not in rows")
	}
	return func(i int) int { return i/width*pitch + i%width }
}

func (f *fakeFn) Predict(ctx context.Context, inputs, outputs map[string]mlcore.Buffer) error {
	for side, bufs := range map[string]map[string]mlcore.Buffer{"input": inputs, "output": outputs} {
		for name, b := range bufs {
			h := b.Float16s()
			if len(h) == 0 || !f.rt.surfaces[&h[0]] {
				continue
			}
			if was := f.rt.roles[&h[0]]; was != "" && was != side {
				return errors.New("fake: the surface of " + name + " was an " + was + " and is now an " + side)
			}
			f.rt.roles[&h[0]] = side
		}
	}
	widen := func(b mlcore.Buffer) mlcore.Buffer {
		h, at := b.Float16s(), rowIndex(b)
		n := 1
		for _, d := range b.Shape() {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = cpu.F16(h[at(i)])
		}
		w, _ := mlcore.NewFloat32(v, b.Shape()...)
		return w
	}
	in, out := map[string]mlcore.Buffer{}, map[string]mlcore.Buffer{}
	for name, b := range inputs {
		if b.DType() != mlcore.Float16 {
			return errors.New("fake: input " + name + " is not fp16")
		}
		in[name] = widen(b)
	}
	for name, b := range outputs {
		if b.DType() == mlcore.Int32 {
			out[name] = b
		} else {
			out[name] = widen(b)
		}
	}
	if err := f.rt.ref.Run(ctx, f.chunk, f.info, in, out); err != nil {
		return err
	}
	for name, b := range outputs {
		if h, at := b.Float16s(), rowIndex(b); h != nil {
			for i, v := range out[name].Float32s() {
				h[at(i)] = cpu.ToF16(v)
			}
		}
	}
	f.calls++
	return nil
}

func newFake(t *testing.T) *fakeCoreML {
	t.Helper()
	ctx := context.Background()
	b, err := coreml.OpenBundle(ctx, testData(t, "gemma4-exact.bundle"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ref, err := refrun.Open(ctx, b, testData(t, "gemma4-exact"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	return &fakeCoreML{b: b, ref: ref}
}

// TestCoreMLExecutorLoads: every chunk is compiled once (a second load finds
// them in the compile cache), every function of each (generate and
// prefill, and sample on the last) is loaded by name and checked against
// the manifest, progress counts every function, and the executor's functions
// run.
func TestCoreMLExecutorLoads(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	cache := t.TempDir()
	var steps []int
	r, err := coreml.NewCoreMLExecutor(ctx, f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: cache}, func(done, total int) {
		steps = append(steps, done*100+total)
	})
	if err != nil {
		t.Fatal(err)
	}
	n := len(f.b.Manifest.Chunks)
	fns := 2*n + 1
	if f.compiles != n || len(steps) != fns || steps[len(steps)-1] != fns*100+fns {
		t.Errorf("%d compiles, progress %v for %d chunks", f.compiles, steps, n)
	}
	for j, l := range r.Loads() {
		if !l.Compiled {
			t.Errorf("%s: not compiled by the first load", l.Package)
		}
		want := [3]string{"generate_8", "prefill_16"}
		if j == n-1 {
			want = [3]string{"generate_8", "sample_8", "prefill_16"}
		}
		if l.Functions != want {
			t.Errorf("%s: loaded %v, want %v", l.Package, l.Functions, want)
		}
	}
	if r.Name() != "Core ML (neural-engine)" || r.Float() != mlcore.Float16 {
		t.Errorf("executor %q, %v", r.Name(), r.Float())
	}
	r.Close()
	r2, err := coreml.NewCoreMLExecutor(ctx, f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: cache, ComputeUnits: mlcore.ComputeCPU}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if f.compiles != n {
		t.Errorf("the second load compiled again (%d compiles)", f.compiles)
	}
	for _, l := range r2.Loads() {
		if l.Compiled {
			t.Errorf("%s: compiled again", l.Package)
		}
	}
}

// TestCoreMLExecutorCancel: cancelling between chunks stops the load, and
// what was loaded is released.
func TestCoreMLExecutorCancel(t *testing.T) {
	f := newFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := coreml.NewCoreMLExecutor(ctx, f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: t.TempDir()}, func(done, total int) {
		if done == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled load: %v", err)
	}
	if f.compiles != 1 || f.closed != 2 {
		t.Errorf("after cancelling: %d compiles, %d functions closed (want 1, 2)", f.compiles, f.closed)
	}
}

// TestCoreMLExecutorRefusesMismatch: a package whose function description
// disagrees with the manifest is refused, naming the package, the function
// and the feature.
func TestCoreMLExecutorRefusesMismatch(t *testing.T) {
	f := newFake(t)
	f.reshape = "hidden_in"
	_, err := coreml.NewCoreMLExecutor(context.Background(), f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: t.TempDir()}, nil)
	if err == nil || !errors.Is(err, coreml.ErrBundle) || !strings.Contains(err.Error(), "chunk_0.mlpackage") ||
		!strings.Contains(err.Error(), "generate_8") || !strings.Contains(err.Error(), "hidden_in") {
		t.Fatalf("mismatched package: %v", err)
	}
}

// TestCoreMLExecutorSpeculation: through the Core ML executor's fp16 buffers
// (the host building fp16 inputs and reading fp16 outputs, the blockwise
// argmax's maxima in fp16), speculation on and off give the same greedy
// ids at every width. (Not sampled ids: this fake rounds its outputs to
// fp16 but attends, inside a call, to its own rows in float32, so a row's
// logits differ in the last bits with the call's other rows, which the
// greedy ids' margins hide and a sampler's draws need not; a real fp16
// function and the float32 reference executor have no such difference, and
// TestSpeculationIdentical checks sampled ids on the latter.)
func TestCoreMLExecutorSpeculation(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	r, err := coreml.NewCoreMLExecutor(ctx, f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	be, err := coreml.NewModel(f.b, r, "fake")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	V := be.Config().VocabSize
	for i, prompt := range prompts(V)[:3] {
		ref, _ := generate(t, be, prompt, 40, 1, nil, false)
		if slices.Max(ref) == slices.Min(ref) {
			t.Fatalf("prompt %d: degenerate output %v", i, ref)
		}
		for _, w := range []int{2, 4, 8} {
			got, _ := generate(t, be, prompt, 40, w, nil, true)
			if !slices.Equal(got, ref) {
				t.Fatalf("prompt %d width %d: %v, width 1 %v", i, w, got, ref)
			}
		}
	}

	if st := be.CallStats(); len(st) < 3 {
		t.Errorf("call stats %v", st)
	}
}

var quiet = slog.New(slog.DiscardHandler)

// surfaceCoreML is fakeCoreML with IOSurface-like buffers: memory whose
// rows are padded to 32 elements, as Apple pads an IOSurface's rows
// (forum thread 712709), so the host must honour the strides. A shape
// whose last axis is wider than refuse fails, as CVPixelBufferCreate may.
type surfaceCoreML struct {
	*fakeCoreML
	refuse int
	shapes [][]int // every shape asked for, in order
}

func (f *surfaceCoreML) AllocSurface(shape ...int) (mlcore.Buffer, func() error, error) {
	f.shapes = append(f.shapes, slices.Clone(shape))
	width := shape[len(shape)-1]
	if width > f.refuse {
		return mlcore.Buffer{}, nil, errors.New("corevideo: CVPixelBufferCreate returned -6681")
	}
	pitch := (width + 31) / 32 * 32
	rows := 1
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	mem, free, err := mlcore.Alloc(mlcore.Float16, rows*pitch)
	if err != nil {
		return mlcore.Buffer{}, nil, err
	}
	for i := range mem.Float16s() {
		if i%pitch >= width {
			mem.Float16s()[i] = 0x7e00 // NaN in the padding: a read of it would show
		}
	}
	strides := make([]int, len(shape))
	strides[len(shape)-1] = 1
	for i, step := len(shape)-2, pitch; i >= 0; i-- {
		strides[i] = step
		step *= shape[i]
	}
	b, err := mem.View(shape, strides)
	if err != nil {
		free()
		return mlcore.Buffer{}, nil, err
	}
	f.surfaces[&mem.Float16s()[0]] = true
	return b, free, nil
}

// TestCoreMLExecutorSharedBuffers: with IOSurface-like buffers (rows padded
// to 32 elements, head_dim 16 here), the backend puts the KV caches and the
// outputs only the host reads in them, never an int32 output nor an output
// a later chunk takes as an input (a surface is never an input and an
// output backing); a buffer the runtime cannot make falls back to plain
// memory with a log line; and every id and every logit bit is what plain
// buffers give.
func TestCoreMLExecutorSharedBuffers(t *testing.T) {
	ctx := context.Background()
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	open := func(surfaces bool) (*coreml.Model, *coreml.CoreMLExecutor, *surfaceCoreML) {
		f := newFake(t)
		var rt mlcore.Runtime = f
		sf := &surfaceCoreML{fakeCoreML: f, refuse: 48}
		if surfaces {
			f.surfaces, f.roles = map[*uint16]bool{}, map[*uint16]string{}
			rt = sf
		}
		r, err := coreml.NewCoreMLExecutor(ctx, rt, f.b, coreml.CoreMLOptions{Log: log, CacheDir: t.TempDir()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		be, err := coreml.NewModel(f.b, r, "fake")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return be, r, sf
	}
	plain, _, _ := open(false)
	shared, r, sf := open(true)

	// The fixture bundle (3 chunks, layers 0-1 sliding with 24 slots, 2
	// full with 128, head_dim 16 and 32, the argmax in 8 blocks of 64
	// ids): the caches of the owning layers 0, 1, 2, the K/V rows of layer
	// 0 (chunk 0; layers 1 and 2 are taken by later chunks) of each
	// function (the sample call's own buffers for chunk 0's generate
	// function too), the blocks' maxima [1,8,T] (rows of 8 and of 1,
	// padded to 32); the logits [1,8,T,64] are refused (wider than 48) and
	// fall back.
	want := [][]int{
		{1, 2, 8, 16}, {1, 2, 8, 16}, {1, 2, 24, 16}, {1, 2, 24, 16}, {1, 2, 24, 16}, {1, 2, 24, 16}, {1, 2, 128, 32}, {1, 2, 128, 32},
		{1, 8, 8}, {1, 2, 8, 16}, {1, 2, 8, 16}, {1, 8, 8, 64},
		{1, 2, 16, 16}, {1, 2, 16, 16},
		{1, 8, 1}, {1, 8, 1, 64},
	}
	sortShapes := func(s [][]int) { slices.SortFunc(s, func(a, b []int) int { return slices.Compare(a, b) }) }
	sortShapes(want)
	got := slices.Clone(sf.shapes)
	sortShapes(got)
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("surfaces asked for %v\nwant %v", got, want)
	}
	if s, p := r.SharedBuffers(); s != 14 || p != 2 {
		t.Errorf("%d surfaces, %d fell back; want 14, 2", s, p)
	}
	if n := strings.Count(logs.String(), "no IOSurface-backed buffer"); n != 2 || !strings.Contains(logs.String(), "-6681") {
		t.Errorf("%d fallback log lines:\n%s", n, logs.String())
	}

	V := plain.Config().VocabSize
	for i, prompt := range prompts(V)[:3] {
		for _, w := range []int{1, 4, 8} {
			a, _ := generate(t, plain, prompt, 24, w, nil, true)
			b, _ := generate(t, shared, prompt, 24, w, nil, true)
			if !slices.Equal(a, b) {
				t.Fatalf("prompt %d width %d: %v with surfaces, %v without", i, w, b, a)
			}
		}
	}
	// Logits, bit for bit, of a generation call after a prefill.
	prompt := prompts(V)[4]
	var logits [2][][]float32
	for k, be := range []*coreml.Model{plain, shared} {
		cache := newCache(t, be, 64)
		if _, err := be.Forward(ctx, prompt, 0, cache, model.Argmax|model.Last); err != nil {
			t.Fatal(err)
		}
		if err := cache.Commit(len(prompt)); err != nil {
			t.Fatal(err)
		}
		res, err := be.Forward(ctx, prompt[:8], len(prompt), cache, model.Logits)
		if err != nil {
			t.Fatal(err)
		}
		logits[k] = res.Logits
	}
	for row := range logits[0] {
		if !model.SameBits(logits[0][row], logits[1][row]) {
			t.Fatalf("row %d: logits differ with surfaces", row)
		}
	}
}

// planCoreML is fakeCoreML with compute plans: chunk j's plan puts j
// operations of each function on the CPU, the rest on the Neural Engine.
type planCoreML struct {
	*fakeCoreML
	units []mlcore.ComputeUnits
	fail  error
}

func (f *planCoreML) ComputePlan(ctx context.Context, compiled string, units mlcore.ComputeUnits) (*mlcore.ComputePlan, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	f.units = append(f.units, units)
	raw, err := os.ReadFile(filepath.Join(compiled, "chunk"))
	if err != nil {
		return nil, err
	}
	j, _ := strconv.Atoi(string(raw))
	plan := &mlcore.ComputePlan{Functions: map[string][]mlcore.PlanOp{}}
	for _, fn := range f.b.Manifest.Chunks[j].Functions {
		ops := []mlcore.PlanOp{{Operator: "ios18.constexpr_lut_to_dense"}, {Operator: "ios18.conv", Preferred: mlcore.DeviceNeuralEngine}}
		for range j {
			ops = append(ops, mlcore.PlanOp{Operator: "ios18.reduce_argmax", Output: "block_argmax", Preferred: mlcore.DeviceCPU, HasCost: true, Cost: 0.01})
		}
		plan.Functions[fn.Name] = ops
	}
	return plan, nil
}

// TestCoreMLExecutorPlacement: the executor reads the compute plan of every
// chunk it loaded, with its compute units, and summarises each function;
// a runtime without compute plans says so (errors.ErrUnsupported), and a
// plan that fails names the package.
func TestCoreMLExecutorPlacement(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	pf := &planCoreML{fakeCoreML: f}
	r, err := coreml.NewCoreMLExecutor(ctx, pf, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: t.TempDir(), ComputeUnits: mlcore.ComputeAll}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pl, err := r.Placement(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pl) != len(f.b.Manifest.Chunks) {
		t.Fatalf("%d chunks placed, want %d", len(pl), len(f.b.Manifest.Chunks))
	}
	for j, c := range pl {
		if c.Package != f.b.PackagePath(j) || len(c.Functions) != len(f.b.Manifest.Chunks[j].Functions) {
			t.Fatalf("chunk %d: %+v", j, c)
		}
		for _, p := range c.Functions {
			if p.Ops != 1+j || p.NeuralEngine != 1 || p.CPU != j || p.ConstOps != 1 || len(p.OffANE) != j {
				t.Errorf("chunk %d %s: %+v", j, p.Function, p)
			}
		}
	}
	if len(pf.units) != len(pl) || pf.units[0] != mlcore.ComputeAll {
		t.Errorf("plans read with units %v", pf.units)
	}
	pf.fail = errors.New("no plan for you")
	if _, err := r.Placement(ctx); err == nil || !strings.Contains(err.Error(), "chunk_0.mlpackage") || !strings.Contains(err.Error(), "no plan for you") {
		t.Errorf("failing plan: %v", err)
	}
	plainExecutor, err := coreml.NewCoreMLExecutor(ctx, f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer plainExecutor.Close()
	if _, err := plainExecutor.Placement(ctx); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "macOS 14.4") {
		t.Errorf("no compute plans: %v", err)
	}
}
