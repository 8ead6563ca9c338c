//go:build unix

package mlcore

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Alloc returns a zeroed contiguous buffer of the given type and shape in
// anonymous memory outside the Go heap, page-aligned as Core ML's
// MLPredictionOptions header recommends for output backings, and the
// function that frees it. The buffer must not be used after free; free is
// safe to call twice.
func Alloc(dt DType, shape ...int) (Buffer, func() error, error) {
	count, err := shapeCount(shape)
	if err != nil {
		return Buffer{}, nil, err
	}
	if dt.Size() == 0 {
		return Buffer{}, nil, fmt.Errorf("mlcore: unsupported element type %v", dt)
	}
	mem, err := unix.Mmap(-1, 0, count*dt.Size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return Buffer{}, nil, fmt.Errorf("mlcore: allocating %d bytes for shape %v: %w", count*dt.Size(), shape, err)
	}
	b, err := newBuffer(dt, unsafe.Pointer(unsafe.SliceData(mem)), count, mem, shape, nil)
	if err != nil {
		unix.Munmap(mem)
		return Buffer{}, nil, err
	}
	freed := false
	return b, func() error {
		if freed {
			return nil
		}
		freed = true
		return unix.Munmap(mem)
	}, nil
}
