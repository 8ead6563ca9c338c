package mlcore

// These tests run Core ML for real, so they only build and run on a Mac
// with Apple silicon (CI, on Linux, type-checks them with the darwin vet).
// The packages come from testdata/make_fixtures.py.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// x and the exact float16 results of x+1 and x*2 (IEEE binary16 bits).
var (
	tinyX     = []uint16{0x0000, 0x3c00, 0xc000, 0x3800, 0x5640, 0x67ff} // 0 1 -2 0.5 100 2047
	tinyPlus1 = []uint16{0x3c00, 0x4000, 0xbc00, 0x3e00, 0x5650, 0x6800} // 1 2 -1 1.5 101 2048
	tinyTimes = []uint16{0x0000, 0x4000, 0xc400, 0x3c00, 0x5a40, 0x6bff} // 0 2 -4 1 200 4094
)

func macOS(t *testing.T) osVersion {
	s, err := unix.Sysctl("kern.osproductversion")
	if err != nil {
		t.Fatal(err)
	}
	v, err := parseOSVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newCoreML(t *testing.T) (Runtime, *Cache) {
	rt, err := New()
	if err != nil {
		t.Fatal(err)
	}
	return rt, NewCache(t.TempDir(), rt.Compile, quietLog())
}

func TestCoreMLPredict(t *testing.T) {
	ctx := context.Background()
	rt, cache := newCoreML(t)
	spec := []FeatureSpec{{Name: "x", MultiArray: true, DType: Float16, Shape: []int{2, 3}}}
	for _, units := range []ComputeUnits{ComputeCPU, ComputeNeuralEngine, ComputeGPU, ComputeAll} {
		t.Run(units.String(), func(t *testing.T) {
			fn, err := LoadPackage(ctx, rt, cache, filepath.Join("testdata", "add.mlpackage"), LoadOptions{ComputeUnits: units})
			if err != nil {
				t.Fatal(err)
			}
			defer fn.Close()
			outSpec := []FeatureSpec{{Name: "y", MultiArray: true, DType: Float16, Shape: []int{2, 3}}}
			if !slices.EqualFunc(fn.Inputs(), spec, specEqual) || !slices.EqualFunc(fn.Outputs(), outSpec, specEqual) {
				t.Fatalf("description: %v -> %v", fn.Inputs(), fn.Outputs())
			}
			// Go slices, contiguous.
			x, _ := NewFloat16(slices.Clone(tinyX), 2, 3)
			yMem := make([]uint16, 6)
			y, _ := NewFloat16(yMem, 2, 3)
			if err := fn.Predict(ctx, map[string]Buffer{"x": x}, map[string]Buffer{"y": y}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(yMem, tinyPlus1) {
				t.Fatalf("y = %#x, want %#x", yMem, tinyPlus1)
			}
			// Page-aligned memory, and an output view with padded rows:
			// right whether Core ML writes in place or Predict copies.
			xa, freeX, err := Alloc(Float16, 2, 3)
			if err != nil {
				t.Fatal(err)
			}
			defer freeX()
			copy(xa.Float16s(), tinyX)
			padded, freeY, err := Alloc(Float16, 2, 8)
			if err != nil {
				t.Fatal(err)
			}
			defer freeY()
			for i := range padded.Float16s() {
				padded.Float16s()[i] = 0x7e00 // NaN: any element Core ML does not write stays NaN
			}
			view, err := padded.View([]int{2, 3}, []int{8, 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := fn.Predict(ctx, map[string]Buffer{"x": xa}, map[string]Buffer{"y": view}); err != nil {
				t.Fatal(err)
			}
			got := append(slices.Clone(padded.Float16s()[0:3]), padded.Float16s()[8:11]...)
			if !slices.Equal(got, tinyPlus1) || padded.Float16s()[3] != 0x7e00 || padded.Float16s()[15] != 0x7e00 {
				t.Fatalf("padded y = %#x", padded.Float16s())
			}
			st := fn.Stats()
			if st.Calls != 2 {
				t.Errorf("stats %+v", st)
			}
			t.Logf("%v: %d of 2 outputs copied (Core ML did not use the backing)", units, st.OutputCopies)
		})
	}
}

func specEqual(a, b FeatureSpec) bool {
	return a.Name == b.Name && a.MultiArray == b.MultiArray && a.DType == b.DType && slices.Equal(a.Shape, b.Shape)
}

func TestCoreMLErrors(t *testing.T) {
	ctx := context.Background()
	rt, cache := newCoreML(t)
	var ns *NSError
	// A package Core ML cannot compile: its NSError becomes the Go error.
	bad := filepath.Join(t.TempDir(), "bad.mlpackage")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "Manifest.json"), []byte("not json"), 0o644)
	if _, err := cache.Compiled(ctx, bad); !errors.As(err, &ns) || ns.Op != "compileModelAtURL:error:" || ns.Description == "" {
		t.Errorf("bad package: %v", err)
	}
	// A compiled model that is not there.
	if _, err := rt.Load(ctx, filepath.Join(t.TempDir(), "none.mlmodelc"), LoadOptions{}); !errors.As(err, &ns) {
		t.Errorf("missing model: %v", err)
	}
	fn, err := LoadPackage(ctx, rt, cache, filepath.Join("testdata", "add.mlpackage"), LoadOptions{ComputeUnits: ComputeCPU})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := NewFloat16(make([]uint16, 6), 3, 2)
	y, _ := NewFloat16(make([]uint16, 6), 2, 3)
	if err := fn.Predict(ctx, map[string]Buffer{"x": x}, map[string]Buffer{"y": y}); err == nil || !strings.Contains(err.Error(), "has shape [2 3], the buffer [3 2]") {
		t.Errorf("wrong shape: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := fn.Predict(cctx, map[string]Buffer{"x": y}, map[string]Buffer{"y": y}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if err := fn.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fn.Predict(ctx, map[string]Buffer{"x": y}, map[string]Buffer{"y": y}); err == nil || !strings.Contains(err.Error(), "after Close") {
		t.Errorf("after Close: %v", err)
	}
	if err := fn.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCoreMLMultiFunction(t *testing.T) {
	if !macOS(t).atLeast(osVersion{15}) {
		t.Skip("multifunction models need macOS 15")
	}
	ctx := context.Background()
	rt, cache := newCoreML(t)
	pkg := filepath.Join("testdata", "multi.mlpackage")
	for name, want := range map[string][]uint16{"": tinyPlus1, "add_one": tinyPlus1, "times_two": tinyTimes} {
		fn, err := LoadPackage(ctx, rt, cache, pkg, LoadOptions{ComputeUnits: ComputeCPU, FunctionName: name})
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		x, _ := NewFloat16(slices.Clone(tinyX), 2, 3)
		yMem := make([]uint16, 6)
		y, _ := NewFloat16(yMem, 2, 3)
		if err := fn.Predict(ctx, map[string]Buffer{"x": x}, map[string]Buffer{"y": y}); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if !slices.Equal(yMem, want) {
			t.Errorf("%q: y = %#x, want %#x", name, yMem, want)
		}
		fn.Close()
	}
	var ns *NSError
	if _, err := LoadPackage(ctx, rt, cache, pkg, LoadOptions{FunctionName: "nope"}); !errors.As(err, &ns) {
		t.Errorf("unknown function: %v", err)
	}
}

// TestCoreMLSurfaces: IOSurface-backed input and output (rows of 3 padded
// as CoreVideo pads them), reused across calls; the host reads the right
// values through the strides; a surface cannot change roles. Mac only:
// nothing here has run yet (see README "What only a Mac can confirm").
func TestCoreMLSurfaces(t *testing.T) {
	ctx := context.Background()
	rt, cache := newCoreML(t)
	sa, ok := rt.(SurfaceAllocator)
	if !ok {
		t.Fatal("Core ML's runtime makes no IOSurface-backed buffers")
	}
	x, freeX, err := sa.AllocSurface(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer freeX()
	y, freeY, err := sa.AllocSurface(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer freeY()
	w, pitch, ok := x.Rows()
	if !ok || w != 3 || pitch < 3 {
		t.Fatalf("rows %d pitch %d %v (strides %v)", w, pitch, ok, x.Strides())
	}
	t.Logf("IOSurface rows of 3 float16 are %d elements apart", pitch)
	for i, v := range tinyX {
		x.Float16s()[i/3*pitch+i%3] = v
	}
	for _, units := range []ComputeUnits{ComputeCPU, ComputeNeuralEngine} {
		fn, err := LoadPackage(ctx, rt, cache, filepath.Join("testdata", "add.mlpackage"), LoadOptions{ComputeUnits: units})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := fn.Predict(ctx, map[string]Buffer{"x": x}, map[string]Buffer{"y": y}); err != nil {
				t.Fatal(err)
			}
			for i, want := range tinyPlus1 {
				if got := y.Float16s()[i/3*pitch+i%3]; got != want {
					t.Fatalf("%v: y[%d] = %#x, want %#x", units, i, got, want)
				}
			}
		}
		t.Logf("%v: %+v (copies: outputs Core ML did not write into the surface)", units, fn.Stats())
		if err := fn.Predict(ctx, map[string]Buffer{"x": y}, map[string]Buffer{"y": x}); err == nil || !strings.Contains(err.Error(), "cannot be") {
			t.Errorf("%v: swapped roles: %v", units, err)
		}
		fn.Close()
	}
}

// TestCoreMLComputePlan: the compute plan of the add model lists its one
// operation with a device (macOS 14.4 or later; Mac only, not run yet).
func TestCoreMLComputePlan(t *testing.T) {
	ctx := context.Background()
	rt, cache := newCoreML(t)
	entry, err := cache.Compiled(ctx, filepath.Join("testdata", "add.mlpackage"))
	if err != nil {
		t.Fatal(err)
	}
	pl, ok := rt.(Planner)
	if !ok {
		t.Fatal("Core ML's runtime reads no compute plans")
	}
	plan, err := pl.ComputePlan(ctx, entry.Path, ComputeNeuralEngine)
	var old *OSVersionError
	if errors.As(err, &old) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	sum := SummarizePlan(plan)
	t.Logf("%+v", sum)
	if len(sum) != 1 || sum[0].Ops < 1 || sum[0].Unplaced != 0 {
		t.Fatalf("placement %+v of plan %+v", sum, plan)
	}
	// A multifunction package: one plan, every function in it (what
	// doctor relies on for the converter's generate/prefill packages).
	if !macOS(t).atLeast(osVersion{15}) {
		return
	}
	multi, err := cache.Compiled(ctx, filepath.Join("testdata", "multi.mlpackage"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err = pl.ComputePlan(ctx, multi.Path, ComputeNeuralEngine)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"add_one", "times_two"} {
		if _, ok := plan.Functions[name]; !ok {
			t.Errorf("the plan of multi.mlpackage has no function %s: %+v", name, SummarizePlan(plan))
		}
	}
}
