//go:build !unix

package mlcore

import (
	"fmt"
	"unsafe"
)

// Alloc returns a zeroed contiguous buffer of the given type and shape, and
// the function that frees it. Without mmap the memory is a Go slice of
// 8-byte words (aligned, but not to a page); the buffer must not be used
// after free.
func Alloc(dt DType, shape ...int) (Buffer, func() error, error) {
	count, err := shapeCount(shape)
	if err != nil {
		return Buffer{}, nil, err
	}
	if dt.Size() == 0 {
		return Buffer{}, nil, fmt.Errorf("mlcore: unsupported element type %v", dt)
	}
	mem := make([]uint64, (count*dt.Size()+7)/8)
	b, err := newBuffer(dt, unsafe.Pointer(unsafe.SliceData(mem)), count, mem, shape, nil)
	if err != nil {
		return Buffer{}, nil, err
	}
	return b, func() error { return nil }, nil
}
