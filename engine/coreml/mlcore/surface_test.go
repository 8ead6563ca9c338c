package mlcore

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// fakeSurface stands in for a CVPixelBuffer: memory with a lock count.
type fakeSurface struct {
	mem       []uint16
	locked    bool
	locks     int
	unlocks   int
	released  bool
	lockErr   error
	unlockErr error
	moved     bool // lock returns another address
}

func (f *fakeSurface) lock() (unsafe.Pointer, error) {
	if f.lockErr != nil {
		return nil, f.lockErr
	}
	f.locks++
	f.locked = true
	if f.moved {
		return unsafe.Pointer(&f.mem[1]), nil
	}
	return unsafe.Pointer(&f.mem[0]), nil
}

func (f *fakeSurface) unlock() error {
	if f.unlockErr != nil {
		return f.unlockErr
	}
	f.unlocks++
	f.locked = false
	return nil
}

func (f *fakeSurface) array() uintptr { return 0 }
func (f *fakeSurface) release()       { f.released = true }

// newFakeSurface makes a locked surface buffer of shape with rows
// bytesPerRow apart, as AllocSurface does on a Mac.
func newFakeSurface(t *testing.T, shape []int, bytesPerRow int) (Buffer, *fakeSurface) {
	t.Helper()
	count, _ := shapeCount(shape)
	f := &fakeSurface{mem: make([]uint16, count/shape[len(shape)-1]*bytesPerRow/2+1)}
	base, _ := f.lock()
	b, err := newSurfaceBuffer(f, shape, base, bytesPerRow)
	if err != nil {
		t.Fatal(err)
	}
	return b, f
}

// TestSurfaceLayout: a pixel buffer's rows become the Buffer's strides,
// as Apple's forum thread 712709 reports them for IOSurface-backed arrays
// (shape [2,3,4] padded to 32: strides [96,32,1]).
func TestSurfaceLayout(t *testing.T) {
	for _, c := range []struct {
		shape       []int
		bytesPerRow int
		strides     []int
		n           int
	}{
		{[]int{2, 3, 4}, 64, []int{96, 32, 1}, 192},
		{[]int{1, 2, 24, 16}, 64, []int{1536, 768, 32, 1}, 1536},   // a KV cache of the test bundle: head_dim 16
		{[]int{1, 2, 128, 32}, 64, []int{8192, 4096, 32, 1}, 8192}, // head_dim 32: no padding
		{[]int{1, 8, 512}, 1024, []int{4096, 512, 1}, 4096},        // logits
		{[]int{7}, 64, []int{1}, 32},
	} {
		strides, n, err := surfaceLayout(c.shape, c.bytesPerRow)
		if err != nil || !slices.Equal(strides, c.strides) || n != c.n {
			t.Errorf("%v in rows of %d bytes: strides %v, %d elements, %v; want %v, %d", c.shape, c.bytesPerRow, strides, n, err, c.strides, c.n)
		}
	}
	for _, c := range []struct {
		shape       []int
		bytesPerRow int
		want        string
	}{
		{[]int{2, 40}, 64, "40 float16 wide has 64 bytes per row"},
		{[]int{2, 4}, 63, "has 63 bytes per row"},
		{[]int{2, 0}, 64, "dimension 1 is 0"},
		{nil, 64, "at least one dimension"},
	} {
		if _, _, err := surfaceLayout(c.shape, c.bytesPerRow); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, %d bytes per row: %v, want %q", c.shape, c.bytesPerRow, err, c.want)
		}
	}
}

// TestBufferRows: Rows describes contiguous buffers, padded rows (a
// surface, or a View with padded rows) and refuses other layouts.
func TestBufferRows(t *testing.T) {
	plain, _ := NewFloat16(make([]uint16, 24), 2, 3, 4)
	if w, p, ok := plain.Rows(); w != 4 || p != 4 || !ok {
		t.Errorf("contiguous: %d %d %v", w, p, ok)
	}
	sb, _ := newFakeSurface(t, []int{1, 2, 24, 16}, 64)
	if w, p, ok := sb.Rows(); w != 16 || p != 32 || !ok {
		t.Errorf("surface: %d %d %v", w, p, ok)
	}
	// Size-1 dimensions may carry any stride.
	mem, _ := NewFloat16(make([]uint16, 64), 64)
	v, _ := mem.View([]int{1, 2, 1, 16}, []int{0, 32, 7, 1})
	if w, p, ok := v.Rows(); w != 16 || p != 32 || !ok {
		t.Errorf("padded view with size-1 dimensions: %d %d %v", w, p, ok)
	}
	one, _ := mem.View([]int{1, 1, 5}, []int{99, 99, 1})
	if w, p, ok := one.Rows(); w != 5 || p != 5 || !ok {
		t.Errorf("one row: %d %d %v", w, p, ok)
	}
	for name, c := range map[string]struct{ shape, strides []int }{
		"transposed":   {[]int{4, 3}, []int{1, 4}},
		"pitch short":  {[]int{2, 2, 8}, []int{8, 4, 1}}, // rows overlap, refused by View already
		"outer padded": {[]int{2, 3, 4}, []int{13, 4, 1}},
	} {
		b, err := mem.View(c.shape, c.strides)
		if err != nil {
			continue // not even a valid view
		}
		if _, _, ok := b.Rows(); ok {
			t.Errorf("%s: %v %v described as rows", name, c.shape, c.strides)
		}
	}
	if _, _, ok := (Buffer{}).Rows(); ok {
		t.Error("the zero Buffer has rows")
	}
}

// TestLendSurfaces: Predict's rules for IOSurface-backed buffers. A
// surface is unlocked for the call and locked again after it; it keeps one
// role for its life (CoreML-LLM measured a 16x slowdown when one surface
// alternated between input and output backing); views and duplicates are
// refused before any surface is unlocked; a moved base address or a failed
// lock leaves the buffer unusable.
func TestLendSurfaces(t *testing.T) {
	kc, kf := newFakeSurface(t, []int{1, 2, 24, 16}, 64)
	out, of := newFakeSurface(t, []int{1, 8, 512}, 1024)
	plain, _ := NewFloat16(make([]uint16, 6), 2, 3)
	ins := map[string]Buffer{"k_cache_0": kc, "hidden_in": plain}
	outs := map[string]Buffer{"logits": out}

	relock, err := lendSurfaces("f", ins, outs)
	if err != nil {
		t.Fatal(err)
	}
	if kf.locked || of.locked {
		t.Fatal("a surface stays locked by the host during the call")
	}
	if err := relock(); err != nil {
		t.Fatal(err)
	}
	if !kf.locked || !of.locked || kf.locks != 2 || kf.unlocks != 1 {
		t.Fatalf("after the call: locked %v %v, %d locks %d unlocks", kf.locked, of.locked, kf.locks, kf.unlocks)
	}
	// Same roles again: fine.
	if relock, err = lendSurfaces("f", ins, outs); err != nil {
		t.Fatal(err)
	}
	relock()

	// The other role, a duplicate, a view: refused, nothing unlocked.
	view, _ := kc.View([]int{1, 2, 24, 8}, []int{1536, 768, 32, 1})
	for name, c := range map[string]struct {
		ins, outs map[string]Buffer
		want      string
	}{
		"input as output": {map[string]Buffer{}, map[string]Buffer{"k_new_0": kc}, `"k_new_0" is an IOSurface used as an input before; it cannot be an output backing`},
		"output as input": {map[string]Buffer{"x": out}, map[string]Buffer{}, "used as an output backing before; it cannot be an input"},
		"both in a call":  {map[string]Buffer{"a": kc}, map[string]Buffer{"b": kc}, `"a" and "b" are one IOSurface`},
		"twice as input":  {map[string]Buffer{"a": kc, "b": kc}, nil, `"a" and "b" are one IOSurface`},
		"a view":          {map[string]Buffer{"k": view}, nil, "a view of an IOSurface-backed buffer"},
	} {
		locks := kf.unlocks
		if _, err := lendSurfaces("f", c.ins, c.outs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		if kf.unlocks != locks || !kf.locked {
			t.Errorf("%s: a refused call unlocked a surface", name)
		}
	}

	// A base address that moves: the buffer is unusable from then on.
	kf.moved = true
	relock, err = lendSurfaces("f", ins, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := relock(); err == nil || !strings.Contains(err.Error(), "base address moved") {
		t.Fatalf("moved: %v", err)
	}
	if kf.locked {
		t.Error("a moved surface stays locked")
	}
	if _, err := lendSurfaces("f", ins, nil); err == nil || !strings.Contains(err.Error(), "unusable") {
		t.Fatalf("after a move: %v", err)
	}

	// A lock that fails after the call, and an unlock that fails before it.
	b2, f2 := newFakeSurface(t, []int{4, 32}, 64)
	relock, _ = lendSurfaces("f", map[string]Buffer{"x": b2}, nil)
	f2.lockErr = errors.New("kCVReturnInvalidArgument")
	if err := relock(); err == nil || !strings.Contains(err.Error(), "kCVReturnInvalidArgument") {
		t.Fatalf("lock failure: %v", err)
	}
	b3, f3 := newFakeSurface(t, []int{4, 32}, 64)
	b4, f4 := newFakeSurface(t, []int{4, 32}, 64)
	f4.unlockErr = errors.New("busy")
	if _, err := lendSurfaces("f", map[string]Buffer{"a": b3, "b": b4}, nil); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("unlock failure: %v", err)
	}
	if !f3.locked {
		t.Error("a surface lent before an unlock failed was not locked again")
	}

	// Freed: unlocked and released once; then refused.
	if err := b3.surfaceOf().free(); err != nil || f3.locked || !f3.released {
		t.Fatalf("free: %v, locked %v, released %v", err, f3.locked, f3.released)
	}
	if err := b3.surfaceOf().free(); err != nil {
		t.Fatalf("second free: %v", err)
	}
	if _, err := lendSurfaces("f", map[string]Buffer{"a": b3}, nil); err == nil || !strings.Contains(err.Error(), "freed") {
		t.Fatalf("freed surface: %v", err)
	}
}
