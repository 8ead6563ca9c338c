package mlcore

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// IOSurface-backed buffers.
//
// An MLMultiArray made with initWithPixelBuffer:shape: over an
// IOSurface-backed CVPixelBuffer is memory the Neural Engine reads and
// writes without a copy: Apple's MLMultiArray.h says it "can reduce the
// inference latency by avoiding the buffer copy", and at WWDC22 an Apple
// engineer said the Neural Engine "is unable to write into MLMultiArray
// directly unless it was initialized with an IOSurface-backed pixel
// buffer" (both quoted in research-ane.md §5). Such a buffer is a Buffer
// like any other (Float16, a shape, strides), whose memory is a pixel
// buffer instead of Alloc's mmap: the surface below is its keeper.
//
// Three rules come with it, all enforced here:
//
//   - Layout. The pixel buffer is height rows of width float16 values,
//     width = the last axis, height = the product of the others (the
//     header's rule), and each row starts bytesPerRow bytes after the
//     previous one. Apple's forum thread 712709 reports that rows are
//     padded to a multiple of 32 elements: shape [2,3,4] gets strides
//     [96,32,1]. The Buffer's strides carry that padding (rowStrides), and
//     every host copy honours them (Buffer.Rows says how).
//   - Locking. The host may touch the memory only while it holds the
//     pixel buffer's base-address lock (CVPixelBuffer.h: "Retrieving the
//     base address for a PixelBuffer requires that the buffer base address
//     be locked"). A surface is locked from allocation on; Predict unlocks
//     the surfaces it hands to Core ML for the call and locks them again
//     before it returns. So the package's one rule for callers ("do not
//     touch a buffer during Predict") is also the locking rule.
//   - One role. A surface is an input or an output backing for its whole
//     life, never both: CoreML-LLM found that "IOSurface-backed
//     MLMultiArray becomes locked once used as model input and cannot be
//     reused as output backing", after which Core ML allocated fresh
//     surfaces on every call, "1129 ms/step vs 71 ms baseline (16×
//     slowdown)" (docs/CPU_BOTTLENECK_INVESTIGATION.md, research-ane.md
//     §5). Predict refuses a surface in the other role.
//
// What only a Mac can confirm: that Core ML honours the backing (Stats
// counts the outputs it did not), that the base address does not move
// between lock and relock (Predict checks and fails if it does), and the
// latency gained.

// A SurfaceAllocator makes IOSurface-backed float16 buffers. Core ML on a
// Mac (New) implements it; elsewhere no Runtime does.
type SurfaceAllocator interface {
	// AllocSurface returns a zeroed float16 buffer of shape in an
	// IOSurface-backed pixel buffer, with an MLMultiArray over it made once
	// and reused by every Predict, and the function that frees both. The
	// buffer's strides carry the pixel buffer's row padding. It must not be
	// used after free; free is safe to call twice.
	AllocSurface(shape ...int) (Buffer, func() error, error)
}

// surfaceRole is what a surface has been to Core ML so far.
type surfaceRole int

const (
	roleNone   surfaceRole = iota
	roleInput              // passed as an input feature
	roleOutput             // passed as an output backing
)

func (r surfaceRole) String() string {
	return [...]string{"unused", "an input", "an output backing"}[r]
}

// surfaceOps is what a surface needs from the platform: CoreVideo on a
// Mac, a fake in tests.
type surfaceOps interface {
	// lock takes the host's read-write lock on the base address and
	// returns the address.
	lock() (unsafe.Pointer, error)
	unlock() error
	// array is the MLMultiArray over the pixel buffer (0 in tests).
	array() uintptr
	// release frees the MLMultiArray and the pixel buffer; the surface is
	// unlocked first.
	release()
}

// surface is the keeper of an IOSurface-backed Buffer.
type surface struct {
	ops     surfaceOps
	base    unsafe.Pointer // the base address the Buffer was made with
	shape   []int
	strides []int
	locked  bool
	role    surfaceRole
	err     error // sticky: once the host lost the memory, the buffer is unusable
	freed   bool
}

// rowStrides returns the strides of shape stored as rows of its last axis,
// pitch elements apart (pitch >= the last axis): the layout of a pixel
// buffer whose width is the last axis. pitch equal to the last axis gives
// the contiguous row-major strides.
func rowStrides(shape []int, pitch int) []int {
	s := make([]int, len(shape))
	s[len(s)-1] = 1
	step := pitch
	for i := len(shape) - 2; i >= 0; i-- {
		s[i] = step
		step *= shape[i]
	}
	return s
}

// surfaceLayout checks a pixel buffer's row pitch (bytesPerRow, as
// CVPixelBufferGetBytesPerRow returns it) against a float16 shape and
// returns the Buffer strides and the number of elements the rows span.
func surfaceLayout(shape []int, bytesPerRow int) (strides []int, n int, err error) {
	count, err := shapeCount(shape)
	if err != nil {
		return nil, 0, err
	}
	width := shape[len(shape)-1]
	size := Float16.Size()
	if bytesPerRow%size != 0 || bytesPerRow/size < width {
		return nil, 0, fmt.Errorf("mlcore: a pixel buffer %d float16 wide has %d bytes per row", width, bytesPerRow)
	}
	pitch := bytesPerRow / size
	height := count / width
	if height > maxElems/pitch {
		return nil, 0, fmt.Errorf("mlcore: %d rows of %d bytes are too many", height, bytesPerRow)
	}
	return rowStrides(shape, pitch), height * pitch, nil
}

// newSurfaceBuffer makes the Buffer of a locked surface whose base address
// is base and rows bytesPerRow apart.
func newSurfaceBuffer(ops surfaceOps, shape []int, base unsafe.Pointer, bytesPerRow int) (Buffer, error) {
	strides, n, err := surfaceLayout(shape, bytesPerRow)
	if err != nil {
		return Buffer{}, err
	}
	if base == nil {
		return Buffer{}, errors.New("mlcore: the pixel buffer has no base address")
	}
	s := &surface{ops: ops, base: base, shape: slices.Clone(shape), strides: strides, locked: true}
	return newBuffer(Float16, base, n, s, shape, strides)
}

// surfaceOf returns the surface b lives in, or nil for other memory.
func (b Buffer) surfaceOf() *surface {
	s, _ := b.keep.(*surface)
	return s
}

// whole reports whether b is all of its surface (not a View of it): only
// then is the surface's own MLMultiArray the array of b.
func (s *surface) whole(b Buffer) bool {
	return b.ptr == s.base && slices.Equal(b.shape, s.shape) && slices.Equal(b.strides, s.strides)
}

// free releases the surface; later calls do nothing.
func (s *surface) free() error {
	if s.freed {
		return nil
	}
	s.freed = true
	var err error
	if s.locked {
		err = s.ops.unlock()
		s.locked = false
	}
	s.ops.release()
	return err
}

// lendSurfaces checks the IOSurface-backed buffers of one Predict call and
// lends them to Core ML: each must be a whole surface (the surface's own
// MLMultiArray is what Core ML gets), appear once, keep the role it had in
// earlier calls, and be locked by the host (not freed, not broken). It then
// unlocks them and returns the function that locks them again, which must
// be called once Core ML has returned and before the host touches any of
// them; it fails (and the surface stays unusable) if a lock fails or the
// base address moved. subject names the function for messages.
func lendSurfaces(subject string, inputs, outputs map[string]Buffer) (relock func() error, err error) {
	type use struct {
		s    *surface
		name string
		role surfaceRole
	}
	var uses []use
	seen := map[*surface]string{}
	for _, side := range []struct {
		bufs map[string]Buffer
		role surfaceRole
	}{{inputs, roleInput}, {outputs, roleOutput}} {
		names := make([]string, 0, len(side.bufs))
		for name := range side.bufs {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			b := side.bufs[name]
			s := b.surfaceOf()
			if s == nil {
				continue
			}
			switch {
			case s.freed:
				return nil, fmt.Errorf("mlcore: %s: %s %q: its IOSurface was freed", subject, side.role, name)
			case s.err != nil:
				return nil, fmt.Errorf("mlcore: %s: %s %q: the IOSurface is unusable: %w", subject, side.role, name, s.err)
			case !s.whole(b):
				return nil, fmt.Errorf("mlcore: %s: %s %q is a view of an IOSurface-backed buffer; pass the whole buffer", subject, side.role, name)
			case seen[s] != "":
				return nil, fmt.Errorf("mlcore: %s: %q and %q are one IOSurface; a surface is passed once, as an input or as an output backing", subject, seen[s], name)
			case s.role != roleNone && s.role != side.role:
				// CoreML-LLM: 16x slower when one surface alternates roles.
				return nil, fmt.Errorf("mlcore: %s: %q is an IOSurface used as %v before; it cannot be %v (Core ML would copy every call)", subject, name, s.role, side.role)
			}
			seen[s] = name
			uses = append(uses, use{s, name, side.role})
		}
	}
	relock = func() error {
		var first error
		for _, u := range uses {
			if u.s.locked || u.s.err != nil {
				continue
			}
			p, err := u.s.ops.lock()
			switch {
			case err != nil:
				u.s.err = fmt.Errorf("locking its pixel buffer after the call: %w", err)
			case p != u.s.base:
				// The Buffer (and every copy of it) points at the old
				// address: the host must not use it.
				u.s.ops.unlock()
				u.s.err = fmt.Errorf("its pixel buffer's base address moved from %p to %p during the call", u.s.base, p)
			default:
				u.s.locked = true
				continue
			}
			if first == nil {
				first = fmt.Errorf("mlcore: %s: %q: %w", subject, u.name, u.s.err)
			}
		}
		return first
	}
	for _, u := range uses {
		if err := u.s.ops.unlock(); err != nil {
			// Take back the ones already lent before failing.
			u.s.err = fmt.Errorf("unlocking its pixel buffer: %w", err)
			relock()
			return nil, fmt.Errorf("mlcore: %s: %q: %w", subject, u.name, u.s.err)
		}
		u.s.locked = false
		u.s.role = u.role
	}
	return relock, nil
}

// Rows describes b as rows of its last axis: width elements each, pitch
// elements from the start of one row to the next, and ok when b is laid
// out so (every contiguous buffer, pitch = width, and every
// IOSurface-backed one, whose rows are padded). Host code that copies
// whole rows or fills spans uses it to honour the padding.
func (b Buffer) Rows() (width, pitch int, ok bool) {
	if !b.valid() {
		return 0, 0, false
	}
	last := len(b.shape) - 1
	width = b.shape[last]
	if width > 1 && b.strides[last] != 1 {
		return 0, 0, false
	}
	pitch = width
	// The pitch is the stride of the innermost leading dimension that is
	// ever stepped.
	for i := last - 1; i >= 0; i-- {
		if b.shape[i] > 1 {
			pitch = b.strides[i] // the dimensions between it and the last are all 1
			break
		}
	}
	if pitch < width || !sameSteps(b.shape, b.strides, rowStrides(b.shape, pitch)) {
		return 0, 0, false
	}
	return width, pitch, true
}

// sameSteps compares strides on the dimensions that are ever stepped
// (size > 1); a dimension of size 1 may have any stride.
func sameSteps(shape, a, b []int) bool {
	for i := range shape {
		if shape[i] > 1 && a[i] != b[i] {
			return false
		}
	}
	return true
}
