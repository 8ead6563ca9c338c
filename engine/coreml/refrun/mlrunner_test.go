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
)

// fakeCoreML is an mlcore.Runtime whose "compiled models" compute the
// function contract with the reference runner on fp16 buffers (inputs read
// as fp16, outputs rounded to fp16): the Core ML runner's compile cache,
// function selection, description checks, progress and cancellation, and
// the whole fp16 host path, run on Linux.
type fakeCoreML struct {
	b        *coreml.Bundle
	ref      *refrun.Runner
	compiles int
	closed   int
	// reshape, when set, changes the declared shape of this input of
	// every function (a package that disagrees with its manifest).
	reshape string
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

func (f *fakeFn) Predict(ctx context.Context, inputs, outputs map[string]mlcore.Buffer) error {
	widen := func(b mlcore.Buffer) mlcore.Buffer {
		h := b.Float16s()
		v := make([]float32, len(h))
		for i, x := range h {
			v[i] = cpu.F16(x)
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
		if h := b.Float16s(); h != nil {
			for i, v := range out[name].Float32s() {
				h[i] = cpu.ToF16(v)
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

// TestCoreMLRunnerLoads: every chunk is compiled once (a second load finds
// them in the compile cache), both functions of each are loaded by name
// and checked against the manifest, progress counts every function, and
// the runner's functions run.
func TestCoreMLRunnerLoads(t *testing.T) {
	ctx := context.Background()
	f := newFake(t)
	cache := t.TempDir()
	var steps []int
	r, err := coreml.NewCoreMLRunner(ctx, f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: cache}, func(done, total int) {
		steps = append(steps, done*100+total)
	})
	if err != nil {
		t.Fatal(err)
	}
	n := len(f.b.Manifest.Chunks)
	if f.compiles != n || len(steps) != 2*n || steps[len(steps)-1] != 2*n*100+2*n {
		t.Errorf("%d compiles, progress %v for %d chunks", f.compiles, steps, n)
	}
	for _, l := range r.Loads() {
		if !l.Compiled {
			t.Errorf("%s: not compiled by the first load", l.Package)
		}
	}
	if r.Name() != "Core ML (neural-engine)" || r.Float() != mlcore.Float16 {
		t.Errorf("runner %q, %v", r.Name(), r.Float())
	}
	r.Close()
	r2, err := coreml.NewCoreMLRunner(ctx, f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: cache, ComputeUnits: mlcore.ComputeCPU}, nil)
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

// TestCoreMLRunnerCancel: cancelling between chunks stops the load, and
// what was loaded is released.
func TestCoreMLRunnerCancel(t *testing.T) {
	f := newFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := coreml.NewCoreMLRunner(ctx, f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: t.TempDir()}, func(done, total int) {
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

// TestCoreMLRunnerRefusesMismatch: a package whose function description
// disagrees with the manifest is refused, naming the package, the function
// and the feature.
func TestCoreMLRunnerRefusesMismatch(t *testing.T) {
	f := newFake(t)
	f.reshape = "hidden_in"
	_, err := coreml.NewCoreMLRunner(context.Background(), f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: t.TempDir()}, nil)
	if err == nil || !errors.Is(err, coreml.ErrBundle) || !strings.Contains(err.Error(), "chunk_0.mlpackage") ||
		!strings.Contains(err.Error(), "generate_8") || !strings.Contains(err.Error(), "hidden_in") {
		t.Fatalf("mismatched package: %v", err)
	}
}

// TestCoreMLRunnerSpeculation: through the Core ML runner's fp16 buffers
// (the host building fp16 inputs and reading fp16 outputs), speculation on
// and off give the same ids at every width.
func TestCoreMLRunnerSpeculation(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	r, err := coreml.NewCoreMLRunner(ctx, f, f.b, coreml.CoreMLOptions{Log: quiet, CacheDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	be, err := coreml.NewBackend(f.b, r, "fake")
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
