package mlcore

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"unsafe"
)

// DType is the element type of a Buffer. Its values are Core ML's
// MLMultiArrayDataType values, so the darwin code passes them unchanged.
type DType int

// The element types the backend uses. Float16 is IEEE 754 binary16 carried
// as uint16 bits.
const (
	Float16 DType = mlMultiArrayDataTypeFloat16
	Float32 DType = mlMultiArrayDataTypeFloat32
	Int32   DType = mlMultiArrayDataTypeInt32
)

// Size returns the size of one element in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case Float16:
		return 2
	case Float32, Int32:
		return 4
	}
	return 0
}

// String returns the type's name ("float16", ...), or "dtype(N)".
func (d DType) String() string {
	switch d {
	case Float16:
		return "float16"
	case Float32:
		return "float32"
	case Int32:
		return "int32"
	case mlMultiArrayDataTypeDouble:
		return "float64"
	}
	return fmt.Sprintf("dtype(%#x)", int(d))
}

// maxElems bounds a buffer's element count and every stride product so that
// offsets never overflow an int (nor Core ML's NSInteger).
const maxElems = math.MaxInt32 * 16

// Buffer is host memory seen as a multi-dimensional array: an element type,
// a shape and strides (in elements, as Core ML counts them). It does not own
// its memory; it refers to a Go slice (kept reachable through the Buffer) or
// to memory from Alloc. Make one with NewFloat16, NewFloat32, NewInt32 or
// Alloc; the zero Buffer is invalid.
type Buffer struct {
	dtype   DType
	shape   []int
	strides []int
	ptr     unsafe.Pointer
	n       int // elements addressable from ptr
	keep    any // what owns the memory (a slice or an allocation)
}

// NewFloat16 wraps data (IEEE binary16 bits) as a contiguous row-major
// array of the given shape; len(data) must equal the product of shape.
func NewFloat16(data []uint16, shape ...int) (Buffer, error) {
	return newBuffer(Float16, unsafe.Pointer(unsafe.SliceData(data)), len(data), data, shape, nil)
}

// NewFloat32 wraps data as a contiguous row-major array of the given shape.
func NewFloat32(data []float32, shape ...int) (Buffer, error) {
	return newBuffer(Float32, unsafe.Pointer(unsafe.SliceData(data)), len(data), data, shape, nil)
}

// NewInt32 wraps data as a contiguous row-major array of the given shape.
func NewInt32(data []int32, shape ...int) (Buffer, error) {
	return newBuffer(Int32, unsafe.Pointer(unsafe.SliceData(data)), len(data), data, shape, nil)
}

// View returns the same memory seen with another shape and explicit
// strides (in elements, one per dimension, outermost first), for a view
// into a larger buffer such as a padded KV row. Every addressed element
// must lie inside the memory and no two indexes may share an element.
func (b Buffer) View(shape, strides []int) (Buffer, error) {
	if !b.valid() {
		return Buffer{}, errors.New("mlcore: View of an invalid (zero) buffer")
	}
	if strides == nil {
		return Buffer{}, errors.New("mlcore: View needs strides")
	}
	return newBuffer(b.dtype, b.ptr, b.n, b.keep, shape, strides)
}

func newBuffer(dt DType, ptr unsafe.Pointer, n int, keep any, shape, strides []int) (Buffer, error) {
	if dt.Size() == 0 {
		return Buffer{}, fmt.Errorf("mlcore: unsupported element type %v", dt)
	}
	count, err := shapeCount(shape)
	if err != nil {
		return Buffer{}, err
	}
	if strides == nil {
		if n != count {
			return Buffer{}, fmt.Errorf("mlcore: %d %v elements disagree with shape %v (%d elements)", n, dt, shape, count)
		}
		strides = rowMajor(shape)
	} else {
		extent, err := stridedExtent(shape, strides)
		if err != nil {
			return Buffer{}, err
		}
		if extent > n {
			return Buffer{}, fmt.Errorf("mlcore: shape %v with strides %v addresses %d elements, the buffer has %d", shape, strides, extent, n)
		}
	}
	if n > 0 && ptr == nil {
		return Buffer{}, errors.New("mlcore: buffer memory is nil")
	}
	return Buffer{dtype: dt, shape: slices.Clone(shape), strides: slices.Clone(strides), ptr: ptr, n: n, keep: keep}, nil
}

// shapeCount checks a shape (at least one dimension, each at least 1) and
// returns its element count.
func shapeCount(shape []int) (int, error) {
	if len(shape) == 0 {
		return 0, errors.New("mlcore: a shape needs at least one dimension")
	}
	count := 1
	for i, d := range shape {
		if d < 1 {
			return 0, fmt.Errorf("mlcore: shape %v: dimension %d is %d, want >= 1", shape, i, d)
		}
		if count > maxElems/d {
			return 0, fmt.Errorf("mlcore: shape %v has more than %d elements", shape, maxElems)
		}
		count *= d
	}
	return count, nil
}

// rowMajor returns the contiguous strides of shape, last dimension fastest.
func rowMajor(shape []int) []int {
	s := make([]int, len(shape))
	step := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = step
		step *= shape[i]
	}
	return s
}

// stridedExtent checks strides against a checked shape and returns how many
// elements from the start the layout spans (1 + the largest offset). It
// refuses non-positive strides on dimensions longer than 1 and layouts where
// two indexes address one element: sorted by stride, each dimension must
// step over the whole extent of the faster ones.
func stridedExtent(shape, strides []int) (int, error) {
	if len(strides) != len(shape) {
		return 0, fmt.Errorf("mlcore: %d strides for a %d-dimensional shape %v", len(strides), len(shape), shape)
	}
	type dim struct{ size, stride int }
	var dims []dim
	for i, s := range strides {
		if shape[i] == 1 {
			continue // never stepped: its stride does not matter
		}
		if s < 1 {
			return 0, fmt.Errorf("mlcore: stride %d of dimension %d is not positive", s, i)
		}
		if s > maxElems {
			return 0, fmt.Errorf("mlcore: stride %d of dimension %d is too large", s, i)
		}
		dims = append(dims, dim{shape[i], s})
	}
	sort.Slice(dims, func(i, j int) bool { return dims[i].stride < dims[j].stride })
	extent := 1 // elements spanned by the dimensions sorted so far
	for _, d := range dims {
		if d.stride < extent {
			return 0, fmt.Errorf("mlcore: strides %v overlap for shape %v", strides, shape)
		}
		last := (d.size - 1) * d.stride
		if last/d.stride != d.size-1 || last > maxElems {
			return 0, fmt.Errorf("mlcore: shape %v with strides %v is too large", shape, strides)
		}
		extent = last + extent
	}
	return extent, nil
}

// DType returns the element type.
func (b Buffer) DType() DType { return b.dtype }

// Shape returns a copy of the shape.
func (b Buffer) Shape() []int { return slices.Clone(b.shape) }

// Strides returns a copy of the strides, in elements.
func (b Buffer) Strides() []int { return slices.Clone(b.strides) }

// Len returns the number of elements of the underlying memory (for a view
// with strides, more than the product of the shape).
func (b Buffer) Len() int { return b.n }

// Float16s returns the memory as uint16 bits, or nil if the type is not Float16.
func (b Buffer) Float16s() []uint16 {
	if b.dtype != Float16 || b.n == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(b.ptr), b.n)
}

// Float32s returns the memory as float32s, or nil if the type is not Float32.
func (b Buffer) Float32s() []float32 {
	if b.dtype != Float32 || b.n == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(b.ptr), b.n)
}

// Int32s returns the memory as int32s, or nil if the type is not Int32.
func (b Buffer) Int32s() []int32 {
	if b.dtype != Int32 || b.n == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(b.ptr), b.n)
}

// valid reports whether b came from a constructor.
func (b Buffer) valid() bool { return b.dtype.Size() != 0 && len(b.shape) > 0 }

// copyStrided copies count elements of elemSize bytes laid out as shape and
// srcStrides at src into dst's layout. Predict uses it for an output Core ML
// wrote into memory of its own instead of the backing it was offered. The
// caller has checked that shapes and element types agree and that src spans
// the layout.
func copyStrided(dst Buffer, src unsafe.Pointer, srcStrides []int) {
	size := uintptr(dst.dtype.Size())
	idx := make([]int, len(dst.shape))
	for {
		so, do := 0, 0
		for d, i := range idx {
			so += i * srcStrides[d]
			do += i * dst.strides[d]
		}
		copy(unsafe.Slice((*byte)(unsafe.Add(dst.ptr, uintptr(do)*size)), size),
			unsafe.Slice((*byte)(unsafe.Add(src, uintptr(so)*size)), size))
		d := len(idx) - 1
		for d >= 0 {
			idx[d]++
			if idx[d] < dst.shape[d] {
				break
			}
			idx[d] = 0
			d--
		}
		if d < 0 {
			return
		}
	}
}
