package coreml

import (
	"context"
	"fmt"
	"math"
	"slices"

	"anechat/engine/coreml/mlcore"
)

// An Executor executes "function F of chunk C on these buffers": the one
// thing the host pipeline cannot do itself. Two implement it: the Core ML
// executor (NewCoreMLExecutor: the packages compiled and run by Core ML, on
// darwin/arm64) and the reference executor (engine/coreml/refrun: the same
// function contract executed with the CPU backend's kernels in float32, on
// any platform), so that everything around the call — sidecar rows, RoPE
// rows, masks, placement, the host KV, the chunk handoff and commit — is
// the same code, tested on Linux.
type Executor interface {
	// Name says what executes the functions, for doctor and Settings
	// ("Core ML (neural-engine)", "reference (CPU kernels, float32)").
	Name() string
	// Float is the element type of the buffers of the functions' fp16
	// features: mlcore.Float16 for Core ML, mlcore.Float32 for the
	// reference executor (which computes the contract in float32).
	Float() mlcore.DType
	// Run executes function fn of chunk on the buffers: inputs holds one
	// for every input fn declares, outputs one for every output, each of
	// the declared shape (fp16 features in Float(), int32 ones in Int32).
	// It writes every output. ctx is checked before the call starts.
	Run(ctx context.Context, chunk int, fn *FunctionInfo, inputs, outputs map[string]mlcore.Buffer) error
	// Close releases what the executor loaded.
	Close() error
}

// A SharedAllocator is an Executor that can put float16 buffers in memory
// its compute units read and write without a copy: the Core ML executor
// makes IOSurface-backed buffers on a Mac (mlcore.SurfaceAllocator). The
// backend asks it for the KV cache inputs and for the outputs it reads
// back itself; never for an output a later chunk takes as an input, since
// a surface must not be an input and an output backing (mlcore/surface.go).
type SharedAllocator interface {
	// AllocShared returns a zeroed float16 buffer of shape, shared when it
	// can be and plain memory otherwise, and the function that frees it.
	// Its rows may be padded (mlcore.Buffer.Rows).
	AllocShared(shape []int) (mlcore.Buffer, func() error, error)
}

// tensor is a host buffer with typed access to its elements. Elements are
// addressed by their row-major index in the tensor's shape, the layout
// the manifest and the host code assume. The memory may pad the rows of
// the last axis (an IOSurface-backed buffer: mlcore.Buffer.Rows): element
// i then lives at (i/width)*pitch + i%width, and every accessor below maps
// it so. The f16/f32/i32 slices are the raw memory: indexing them directly
// is right only when the tensor is contiguous (pitch == width), which every
// tensor of newTensor is.
type tensor struct {
	buf          mlcore.Buffer
	f16          []uint16
	f32          []float32
	i32          []int32
	width, pitch int // elements per row of the last axis, and from row to row
	free         func() error
}

// newTensor allocates a zeroed buffer of dt and shape outside the Go heap
// (page-aligned, as Core ML prefers).
func newTensor(dt mlcore.DType, shape []int) (*tensor, error) {
	buf, free, err := mlcore.Alloc(dt, shape...)
	if err != nil {
		return nil, err
	}
	return tensorOf(buf, free)
}

// tensorOf gives typed access to buf, contiguous or in padded rows; free
// (nil for memory someone else owns) releases it. A buffer in another
// layout is refused: no host code here could address it.
func tensorOf(buf mlcore.Buffer, free func() error) (*tensor, error) {
	width, pitch, ok := buf.Rows()
	if !ok {
		if free != nil {
			free()
		}
		return nil, fmt.Errorf("coreml: a %v buffer of shape %v with strides %v is not in rows of its last axis", buf.DType(), buf.Shape(), buf.Strides())
	}
	return &tensor{buf: buf, f16: buf.Float16s(), f32: buf.Float32s(), i32: buf.Int32s(), width: width, pitch: pitch, free: free}, nil
}

// at maps a row-major element index to its place in memory.
func (t *tensor) at(i int) int {
	if t.pitch == t.width {
		return i
	}
	return i/t.width*t.pitch + i%t.width
}

// spans calls f for the pieces of elements off..off+n-1 that lie in one
// row each: f(p, k, j) covers k elements from memory index p, the j-th
// element of the range first. A contiguous tensor is one piece.
func (t *tensor) spans(off, n int, f func(p, k, j int)) {
	if t.pitch == t.width {
		f(off, n, 0)
		return
	}
	for j := 0; j < n; {
		r, c := (off+j)/t.width, (off+j)%t.width
		k := min(t.width-c, n-j)
		f(r*t.pitch+c, k, j)
		j += k
	}
}

func (t *tensor) set(i int, v float32) {
	if t.f16 != nil {
		t.f16[t.at(i)] = toHalf(v)
	} else {
		t.f32[t.at(i)] = v
	}
}

// set64 stores v with one rounding to the buffer's type.
func (t *tensor) set64(i int, v float64) {
	if t.f16 != nil {
		t.f16[t.at(i)] = toHalf64(v)
	} else {
		t.f32[t.at(i)] = float32(v)
	}
}

func (t *tensor) get(i int) float32 {
	if t.f16 != nil {
		return fromHalf(t.f16[t.at(i)])
	}
	return t.f32[t.at(i)]
}

// getInt32 reads element i of an int32 tensor.
func (t *tensor) getInt32(i int) int32 { return t.i32[t.at(i)] }

// setRow stores row at off.
func (t *tensor) setRow(off int, row []float32) {
	t.spans(off, len(row), func(p, k, j int) {
		if t.f16 != nil {
			d := t.f16[p : p+k]
			for i, v := range row[j : j+k] {
				d[i] = toHalf(v)
			}
			return
		}
		copy(t.f32[p:p+k], row[j:j+k])
	})
}

// row16 returns the fp16 memory of the n elements from off when they lie
// in one row of the last axis (a whole row always does), else nil; nil
// for a float32 tensor.
func (t *tensor) row16(off, n int) []uint16 {
	if t.f16 == nil || t.pitch != t.width && off%t.width+n > t.width {
		return nil
	}
	p := t.at(off)
	return t.f16[p : p+n]
}

// setHalves stores fp16 bits at off (an fp16 tensor only).
func (t *tensor) setHalves(off int, h []uint16) {
	t.spans(off, len(h), func(p, k, j int) { copy(t.f16[p:p+k], h[j:j+k]) })
}

// setFloats stores float32 values at off unrounded (a float32 tensor only).
func (t *tensor) setFloats(off int, v []float32) {
	t.spans(off, len(v), func(p, k, j int) { copy(t.f32[p:p+k], v[j:j+k]) })
}

// getRow reads len(dst) elements at off.
func (t *tensor) getRow(dst []float32, off int) {
	t.spans(off, len(dst), func(p, k, j int) {
		if t.f16 != nil {
			for i, h := range t.f16[p : p+k] {
				dst[j+i] = fromHalf(h)
			}
			return
		}
		copy(dst[j:j+k], t.f32[p:p+k])
	})
}

// fill stores v in n elements from off.
func (t *tensor) fill(off, n int, v float32) {
	t.spans(off, n, func(p, k, _ int) {
		if t.f16 != nil {
			h := toHalf(v)
			for i := p; i < p+k; i++ {
				t.f16[i] = h
			}
			return
		}
		for i := p; i < p+k; i++ {
			t.f32[i] = v
		}
	})
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

// dtypeOf maps a manifest dtype to the buffer type an executor computes in.
func dtypeOf(r Executor, dtype string) (mlcore.DType, error) {
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
