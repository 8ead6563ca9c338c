package mlcore

// IOSurface-backed buffers on a Mac: CVPixelBufferCreate with an
// IOSurface, -[MLMultiArray initWithPixelBuffer:shape:] over it, the host's
// lock taken through CVPixelBufferLockBaseAddress (surface.go says why and
// when). Type-checked on Linux by the darwin vet; run only on a Mac.

import (
	"errors"
	"fmt"
	"unsafe"
)

// cvSurface implements surfaceOps over one CVPixelBuffer.
type cvSurface struct {
	r   *objcRuntime
	pb  uintptr // CVPixelBufferRef: +1 from CVPixelBufferCreate
	arr uintptr // the MLMultiArray over pb: +1 from alloc/init
}

// lock takes the read-write lock (no kCVPixelBufferLock_ReadOnly: the host
// writes the KV inputs) and returns the base address.
func (s *cvSurface) lock() (unsafe.Pointer, error) {
	if rc := s.r.cv.CVPixelBufferLockBaseAddress(s.pb, 0); rc != cvReturnSuccess {
		return nil, &CVReturnError{Op: "CVPixelBufferLockBaseAddress", Code: rc}
	}
	p := s.r.cv.CVPixelBufferGetBaseAddress(s.pb)
	if p == nil {
		s.r.cv.CVPixelBufferUnlockBaseAddress(s.pb, 0)
		return nil, errors.New("CVPixelBufferGetBaseAddress returned NULL")
	}
	return p, nil
}

func (s *cvSurface) unlock() error {
	if rc := s.r.cv.CVPixelBufferUnlockBaseAddress(s.pb, 0); rc != cvReturnSuccess {
		return &CVReturnError{Op: "CVPixelBufferUnlockBaseAddress", Code: rc}
	}
	return nil
}

func (s *cvSurface) array() uintptr { return s.arr }

// release drops the MLMultiArray and our reference to the pixel buffer.
// MLMultiArray.h says the array "will own the pixel buffer and release it
// on the deallocation"; the initializer's parameter is not annotated as
// consumed, so the array holds a reference of its own and ours, from
// CVPixelBufferCreate, is released here (only a Mac can confirm the count
// under Instruments).
func (s *cvSurface) release() {
	s.r.withPool(func() error {
		s.r.release(s.arr)
		return nil
	})
	s.arr = 0
	if s.pb != 0 {
		s.r.cv.CVPixelBufferRelease(s.pb)
		s.pb = 0
	}
}

// AllocSurface implements SurfaceAllocator: a pixel buffer as wide as the
// last axis and as high as the product of the others, in
// kCVPixelFormatType_OneComponent16Half, with the attributes CoreML-LLM and
// ANEMLL use ({kCVPixelBufferIOSurfacePropertiesKey: {},
// kCVPixelBufferMetalCompatibilityKey: YES}), zeroed, and the MLMultiArray
// over it. The layout Core ML reports for the array must be the pixel
// buffer's rows, or the buffer is refused (the host would write where Core
// ML does not read).
func (c *coreML) AllocSurface(shape ...int) (Buffer, func() error, error) {
	r := c.r
	if r.cvErr != nil {
		return Buffer{}, nil, fmt.Errorf("mlcore: IOSurface-backed buffers need CoreVideo: %w", r.cvErr)
	}
	if err := requireMethod(r.os, selArrayInitWithPixelBuffer, "IOSurface-backed multi-arrays"); err != nil {
		return Buffer{}, nil, err
	}
	count, err := shapeCount(shape)
	if err != nil {
		return Buffer{}, nil, err
	}
	width := shape[len(shape)-1]
	height := count / width
	s := &cvSurface{r: r}
	var b Buffer
	err = r.withPool(func() error {
		yes := r.sendID(r.classes["NSNumber"], selNumberWithBool, aBool(true))
		attrs := r.dictionary(
			[]uintptr{r.cvKeys["kCVPixelBufferIOSurfacePropertiesKey"], r.cvKeys["kCVPixelBufferMetalCompatibilityKey"]},
			[]uintptr{r.dictionary(nil, nil), yes})
		if rc := r.cv.CVPixelBufferCreate(0, uintptr(width), uintptr(height), cvPixelFormatOneComponent16Half, attrs, &s.pb); rc != cvReturnSuccess || s.pb == 0 {
			return &CVReturnError{Op: "CVPixelBufferCreate", Code: rc}
		}
		s.arr = r.sendID(r.sendID(r.classes["MLMultiArray"], selAlloc), selArrayInitWithPixelBuffer, aCF(s.pb), aID(r.numbers(shape)))
		if s.arr == 0 {
			return errors.New("-[MLMultiArray initWithPixelBuffer:shape:] returned nil")
		}
		if dt := DType(r.sendInt(s.arr, selMultiArrayDataType)); dt != Float16 {
			return fmt.Errorf("the multi-array over the pixel buffer is %v, not float16", dt)
		}
		base, err := s.lock()
		if err != nil {
			return err
		}
		bytesPerRow := int(r.cv.CVPixelBufferGetBytesPerRow(s.pb))
		if b, err = newSurfaceBuffer(s, shape, base, bytesPerRow); err != nil {
			s.unlock()
			return err
		}
		if got := r.ints(r.sendID(s.arr, selMultiArrayStrides)); len(got) != len(shape) || !sameSteps(shape, got, b.strides) {
			s.unlock()
			return fmt.Errorf("Core ML's strides %v for the multi-array disagree with the pixel buffer's rows of %d bytes (strides %v)", got, bytesPerRow, b.strides)
		}
		clear(unsafe.Slice((*byte)(base), bytesPerRow*height))
		return nil
	})
	if err != nil {
		s.release()
		return Buffer{}, nil, fmt.Errorf("mlcore: IOSurface-backed buffer %v (%d x %d float16): %w", shape, width, height, err)
	}
	return b, b.surfaceOf().free, nil
}
