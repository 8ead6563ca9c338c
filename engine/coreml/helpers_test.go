package coreml

import (
	"context"
	"path/filepath"
	"testing"

	"anechat/engine/coreml/mlcore"
	"anechat/internal/testres"
)

// testData returns build/testdeps/coreml/NAME, which
// build/scripts/deps-coremlhost.sh makes (skipped without it unless CI).
func testData(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(testres.RepoRoot(tb), "build", "testdeps", "coreml", name)
	return testres.Require(tb, p, "Core ML test bundles ("+name+")", "run build/scripts/deps-coreml.sh, then build/scripts/deps-coremlhost.sh (make test runs both)")
}

// openTestBundle opens a bundle of the test data.
func openTestBundle(tb testing.TB, name string) *Bundle {
	tb.Helper()
	b, err := OpenBundle(context.Background(), testData(tb, name), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// recorder is an Executor that computes nothing: it keeps a copy of every
// input buffer of the last call, by name, as the first chunk taking it saw
// it (so the host-built ones), and zeroes the outputs.
type recorder struct {
	dt     mlcore.DType
	inputs map[string][]uint16 // fp16 bits, or float32 bits truncated for f32
	f32    map[string][]float32
	calls  int
	noCopy bool // benchmarks: keep nothing
}

func (r *recorder) Name() string        { return "recorder" }
func (r *recorder) Float() mlcore.DType { return r.dt }
func (r *recorder) Close() error        { return nil }
func (r *recorder) Run(_ context.Context, chunk int, fn *FunctionInfo, inputs, outputs map[string]mlcore.Buffer) error {
	if r.inputs == nil || chunk == 0 {
		r.inputs, r.f32 = map[string][]uint16{}, map[string][]float32{}
	}
	r.calls++
	if r.noCopy {
		return nil
	}
	for name, b := range inputs {
		if _, seen := r.inputs[name]; seen {
			continue // carried from an earlier chunk of this call
		}
		if _, seen := r.f32[name]; seen {
			continue
		}
		if h := b.Float16s(); h != nil {
			r.inputs[name] = append([]uint16(nil), h...)
		}
		if f := b.Float32s(); f != nil {
			r.f32[name] = append([]float32(nil), f...)
		}
	}
	for _, b := range outputs {
		clear(b.Float16s())
		clear(b.Float32s())
		clear(b.Int32s())
	}
	return nil
}

// testDataDir is build/testdeps/coreml, whether or not it exists (fuzz
// seeds are optional).
func testDataDir(tb testing.TB) string {
	return filepath.Join(testres.RepoRoot(tb), "build", "testdeps", "coreml")
}
