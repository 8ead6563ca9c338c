package mlcore

import (
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func TestBufferContiguous(t *testing.T) {
	data := make([]uint16, 6)
	b, err := NewFloat16(data, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	if b.DType() != Float16 || !slices.Equal(b.Shape(), []int{2, 3}) || !slices.Equal(b.Strides(), []int{3, 1}) || b.Len() != 6 {
		t.Fatalf("got %v %v %v %d", b.DType(), b.Shape(), b.Strides(), b.Len())
	}
	// No copy: the buffer is the caller's memory.
	b.Float16s()[4] = 0x3c00
	if data[4] != 0x3c00 || unsafe.Pointer(&b.Float16s()[0]) != unsafe.Pointer(&data[0]) {
		t.Fatal("Float16s is not the caller's slice")
	}
	if b.Float32s() != nil || b.Int32s() != nil {
		t.Error("a float16 buffer exposes another element type")
	}
	// Shape and Strides are copies.
	b.Shape()[0] = 99
	b.Strides()[0] = 99
	if b.shape[0] != 2 || b.strides[0] != 3 {
		t.Error("Shape or Strides exposes internal state")
	}
	f, err := NewFloat32(make([]float32, 24), 2, 3, 4)
	if err != nil || !slices.Equal(f.Strides(), []int{12, 4, 1}) || len(f.Float32s()) != 24 {
		t.Fatalf("float32: %v %v", err, f.Strides())
	}
	i, err := NewInt32([]int32{7}, 1)
	if err != nil || i.Int32s()[0] != 7 {
		t.Fatalf("int32: %v", err)
	}
}

func TestBufferRefusesBadShapes(t *testing.T) {
	for name, c := range map[string]struct {
		n     int
		shape []int
		want  string
	}{
		"length disagrees": {5, []int{2, 3}, "5 float16 elements disagree with shape [2 3] (6 elements)"},
		"too long":         {7, []int{2, 3}, "disagree"},
		"no dimensions":    {1, nil, "at least one dimension"},
		"zero dimension":   {0, []int{2, 0}, "dimension 1 is 0"},
		"negative":         {2, []int{-2}, "dimension 0 is -2"},
		"overflow":         {1, []int{1 << 30, 1 << 30, 1 << 30}, "more than"},
	} {
		_, err := NewFloat16(make([]uint16, c.n), c.shape...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, c.want)
		}
	}
	if _, err := (Buffer{}).View([]int{1}, []int{1}); err == nil {
		t.Error("View of a zero Buffer accepted")
	}
}

func TestBufferStrides(t *testing.T) {
	// A [2,3] view into rows of 4 (one element of padding per row): it
	// spans 4+3 = 7 elements.
	base, err := NewFloat16(make([]uint16, 7), 7)
	if err != nil {
		t.Fatal(err)
	}
	v, err := base.View([]int{2, 3}, []int{4, 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Strides(), []int{4, 1}) || !slices.Equal(v.Shape(), []int{2, 3}) || v.Len() != 7 {
		t.Fatalf("view %v %v len %d", v.Shape(), v.Strides(), v.Len())
	}
	v.Float16s()[6] = 9
	if base.Float16s()[6] != 9 {
		t.Fatal("a view does not share its buffer's memory")
	}
	if _, err := base.View([]int{7}, nil); err == nil {
		t.Error("View without strides accepted")
	}
	for name, c := range map[string]struct {
		n       int
		shape   []int
		strides []int
		want    string
	}{
		"past the end":     {6, []int{2, 3}, []int{4, 1}, "addresses 7 elements, the buffer has 6"},
		"overlap":          {6, []int{2, 3}, []int{2, 1}, "overlap"},
		"overlap reversed": {6, []int{3, 2}, []int{1, 2}, "overlap"},
		"zero stride":      {6, []int{2, 3}, []int{0, 1}, "not positive"},
		"negative stride":  {6, []int{2, 3}, []int{3, -1}, "not positive"},
		"rank":             {6, []int{2, 3}, []int{1}, "1 strides for a 2-dimensional shape"},
	} {
		b, err := NewFloat16(make([]uint16, c.n), c.n)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.View(c.shape, c.strides)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, c.want)
		}
	}
	// Transposed (column-major) strides are a valid, non-overlapping layout;
	// a dimension of size 1 may have any stride.
	b, _ := NewFloat32(make([]float32, 6), 6)
	if _, err := b.View([]int{2, 3}, []int{1, 2}); err != nil {
		t.Errorf("column-major: %v", err)
	}
	if _, err := b.View([]int{1, 6}, []int{0, 1}); err != nil {
		t.Errorf("size-1 dimension with stride 0: %v", err)
	}
}

func TestAlloc(t *testing.T) {
	b, free, err := Alloc(Float16, 3, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s := b.Float16s()
	if len(s) != 3*4096 || !slices.Equal(b.Strides(), []int{4096, 1}) {
		t.Fatalf("len %d strides %v", len(s), b.Strides())
	}
	for _, x := range s {
		if x != 0 {
			t.Fatal("Alloc's memory is not zeroed")
		}
	}
	s[len(s)-1] = 1 // writable to the end
	if err := free(); err != nil {
		t.Fatal(err)
	}
	if err := free(); err != nil {
		t.Fatalf("second free: %v", err)
	}
	if _, _, err := Alloc(Float16, 0); err == nil {
		t.Error("Alloc of an empty shape accepted")
	}
	if _, _, err := Alloc(DType(7), 2); err == nil {
		t.Error("Alloc of an unknown type accepted")
	}
}

func TestCopyStrided(t *testing.T) {
	// Source: a [2,3] float32 array in column-major order (strides 1,2).
	src := []float32{0, 10, 1, 11, 2, 12}
	// Destination: rows padded to 4.
	mem := make([]float32, 7)
	for i := range mem {
		mem[i] = -1
	}
	flat, _ := NewFloat32(mem, 7)
	dst, err := flat.View([]int{2, 3}, []int{4, 1})
	if err != nil {
		t.Fatal(err)
	}
	copyStrided(dst, unsafe.Pointer(&src[0]), []int{1, 2})
	want := []float32{0, 1, 2, -1, 10, 11, 12}
	if !slices.Equal(mem, want) {
		t.Fatalf("got %v, want %v", mem, want)
	}
	// fp16, contiguous to contiguous, one element per dimension.
	h := []uint16{0x1234}
	out := make([]uint16, 1)
	ob, _ := NewFloat16(out, 1, 1)
	copyStrided(ob, unsafe.Pointer(&h[0]), []int{1, 1})
	if out[0] != 0x1234 {
		t.Fatalf("fp16 copy: %#x", out[0])
	}
}

func TestDType(t *testing.T) {
	for d, want := range map[DType]struct {
		size int
		name string
	}{Float16: {2, "float16"}, Float32: {4, "float32"}, Int32: {4, "int32"}, DType(mlMultiArrayDataTypeDouble): {0, "float64"}, DType(3): {0, "dtype(0x3)"}} {
		if d.Size() != want.size || d.String() != want.name {
			t.Errorf("%d: size %d name %q, want %d %q", int(d), d.Size(), d.String(), want.size, want.name)
		}
	}
}
