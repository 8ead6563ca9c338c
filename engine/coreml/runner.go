package coreml

import (
	"context"
	"fmt"
	"math"
	"slices"

	"anechat/engine/coreml/mlcore"
)

// A Runner executes "function F of chunk C on these buffers": the one
// thing the host pipeline cannot do itself. Two implement it: the Core ML
// runner (NewCoreMLRunner: the packages compiled and run by Core ML, on
// darwin/arm64) and the reference runner (engine/coreml/refrun: the same
// function contract executed with the CPU backend's kernels in float32, on
// any platform), so that everything around the call — sidecar rows, RoPE
// rows, masks, placement, the host KV, the chunk handoff and commit — is
// the same code, tested on Linux.
type Runner interface {
	// Name says what executes the functions, for doctor and Settings
	// ("Core ML (neural-engine)", "reference (CPU kernels, float32)").
	Name() string
	// Float is the element type of the buffers of the functions' fp16
	// features: mlcore.Float16 for Core ML, mlcore.Float32 for the
	// reference runner (which computes the contract in float32).
	Float() mlcore.DType
	// Run executes function fn of chunk on the buffers: inputs holds one
	// for every input fn declares, outputs one for every output, each of
	// the declared shape (fp16 features in Float(), int32 ones in Int32).
	// It writes every output. ctx is checked before the call starts.
	Run(ctx context.Context, chunk int, fn *FunctionInfo, inputs, outputs map[string]mlcore.Buffer) error
	// Close releases what the runner loaded.
	Close() error
}

// tensor is a host buffer with typed access to its elements.
type tensor struct {
	buf  mlcore.Buffer
	f16  []uint16
	f32  []float32
	i32  []int32
	free func() error
}

// newTensor allocates a zeroed buffer of dt and shape outside the Go heap
// (page-aligned, as Core ML prefers).
func newTensor(dt mlcore.DType, shape []int) (*tensor, error) {
	buf, free, err := mlcore.Alloc(dt, shape...)
	if err != nil {
		return nil, err
	}
	return &tensor{buf: buf, f16: buf.Float16s(), f32: buf.Float32s(), i32: buf.Int32s(), free: free}, nil
}

// wrapTensor gives typed access to a buffer someone else owns.
func wrapTensor(buf mlcore.Buffer) *tensor {
	return &tensor{buf: buf, f16: buf.Float16s(), f32: buf.Float32s(), i32: buf.Int32s()}
}

func (t *tensor) set(i int, v float32) {
	if t.f16 != nil {
		t.f16[i] = toHalf(v)
	} else {
		t.f32[i] = v
	}
}

// set64 stores v with one rounding to the buffer's type.
func (t *tensor) set64(i int, v float64) {
	if t.f16 != nil {
		t.f16[i] = toHalf64(v)
	} else {
		t.f32[i] = float32(v)
	}
}

func (t *tensor) get(i int) float32 {
	if t.f16 != nil {
		return fromHalf(t.f16[i])
	}
	return t.f32[i]
}

// setRow stores row at off.
func (t *tensor) setRow(off int, row []float32) {
	if t.f16 != nil {
		d := t.f16[off : off+len(row)]
		for i, v := range row {
			d[i] = toHalf(v)
		}
		return
	}
	copy(t.f32[off:off+len(row)], row)
}

// getRow reads len(dst) elements at off.
func (t *tensor) getRow(dst []float32, off int) {
	if t.f16 != nil {
		for i, h := range t.f16[off : off+len(dst)] {
			dst[i] = fromHalf(h)
		}
		return
	}
	copy(dst, t.f32[off:off+len(dst)])
}

// fill stores v in n elements from off.
func (t *tensor) fill(off, n int, v float32) {
	if t.f16 != nil {
		h := toHalf(v)
		for i := off; i < off+n; i++ {
			t.f16[i] = h
		}
		return
	}
	for i := off; i < off+n; i++ {
		t.f32[i] = v
	}
}

func (t *tensor) close() error {
	if t.free == nil {
		return nil
	}
	f := t.free
	t.free = nil
	t.f16, t.f32, t.i32 = nil, nil, nil
	return f()
}

// dtypeOf maps a manifest dtype to the buffer type a runner computes in.
func dtypeOf(r Runner, dtype string) (mlcore.DType, error) {
	switch dtype {
	case "fp16":
		return r.Float(), nil
	case "int32":
		return mlcore.Int32, nil
	}
	return 0, fmt.Errorf("dtype %q is not fp16 or int32", dtype)
}

// CheckFunction compares a loaded function's features (a Core ML model's
// description) with what the manifest declares for it: the same names,
// element types and shapes. A package that disagrees with its manifest is
// refused before any call.
func CheckFunction(pkg string, fn *FunctionInfo, ins, outs []mlcore.FeatureSpec) error {
	side := func(what string, want []TensorInfo, got []mlcore.FeatureSpec) error {
		byName := map[string]mlcore.FeatureSpec{}
		for _, f := range got {
			byName[f.Name] = f
		}
		for _, w := range want {
			g, ok := byName[w.Name]
			if !ok {
				return fmt.Errorf("%w: %s: function %s has no %s %q that the manifest declares", ErrBundle, pkg, fn.Name, what, w.Name)
			}
			dt := mlcore.Float16
			if w.DType == "int32" {
				dt = mlcore.Int32
			}
			if !g.MultiArray || g.DType != dt || !slices.Equal(g.Shape, w.Shape) {
				return fmt.Errorf("%w: %s: function %s %s %s, the manifest declares %s%v", ErrBundle, pkg, fn.Name, what, g, w.DType, w.Shape)
			}
			delete(byName, w.Name)
		}
		for name := range byName {
			return fmt.Errorf("%w: %s: function %s has %s %q that the manifest does not declare", ErrBundle, pkg, fn.Name, what, name)
		}
		return nil
	}
	if err := side("input", fn.Inputs, ins); err != nil {
		return err
	}
	return side("output", fn.Outputs, outs)
}

var negInf = float32(math.Inf(-1))
