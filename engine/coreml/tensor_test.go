package coreml

import (
	"math"
	"slices"
	"testing"

	"anechat/engine/coreml/mlcore"
)

// paddedTensor returns a tensor of shape whose rows of the last axis are
// pitch elements apart, the layout of an IOSurface-backed buffer, with
// every padding element set to NaN so that a write into the padding, or a
// read of it, shows.
func paddedTensor(t *testing.T, dt mlcore.DType, shape []int, pitch int) (*tensor, mlcore.Buffer) {
	t.Helper()
	rows := 1
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	mem, free, err := mlcore.Alloc(dt, rows*pitch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { free() })
	strides := make([]int, len(shape))
	strides[len(shape)-1] = 1
	step := pitch
	for i := len(shape) - 2; i >= 0; i-- {
		strides[i] = step
		step *= shape[i]
	}
	view, err := mem.View(shape, strides)
	if err != nil {
		t.Fatal(err)
	}
	x, err := tensorOf(view, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows * pitch {
		if i%pitch >= shape[len(shape)-1] {
			if dt == mlcore.Float16 {
				mem.Float16s()[i] = 0x7e00
			} else {
				mem.Float32s()[i] = float32(math.NaN())
			}
		}
	}
	return x, mem
}

// TestTensorPaddedRows: every accessor of the host pipeline addresses a
// tensor whose rows are padded (an IOSurface-backed buffer: Apple pads
// rows to 32 elements, so a KV cache of head_dim 16 has 16 elements of
// padding per row) exactly as it addresses a contiguous one, and never
// touches the padding.
func TestTensorPaddedRows(t *testing.T) {
	for _, dt := range []mlcore.DType{mlcore.Float16, mlcore.Float32} {
		shape := []int{1, 2, 3, 16} // [1, kv heads, slots, head_dim]
		n := 2 * 3 * 16
		flat, err := newTensor(dt, shape)
		if err != nil {
			t.Fatal(err)
		}
		defer flat.close()
		pad, mem := paddedTensor(t, dt, shape, 32)
		if pad.width != 16 || pad.pitch != 32 {
			t.Fatalf("rows %d of %d", pad.width, pad.pitch)
		}
		// The writes of buildKV, placeRows, buildMask and buildRope: spans
		// inside a row, across rows, single elements.
		row := make([]float32, 40)
		for i := range row {
			row[i] = float32(i) + 0.5
		}
		halves := make([]uint16, 16)
		for i := range halves {
			halves[i] = toHalf(float32(-i))
		}
		for _, x := range []*tensor{flat, pad} {
			x.fill(0, n, 1)
			x.setRow(16, row[:16]) // one whole row
			x.setRow(40, row)      // from the middle of a row over two more
			x.set(3, 7)
			x.set64(95, 0.25)
			x.fill(82, 5, -2)
			if dt == mlcore.Float16 {
				x.setHalves(48, halves)
				if d := x.row16(64, 16); d == nil {
					t.Fatal("row16 of a whole row is nil")
				} else {
					copy(d, halves)
				}
			} else {
				x.setFloats(48, row[:16])
			}
		}
		got, want := make([]float32, n), make([]float32, n)
		pad.getRow(got, 0)
		flat.getRow(want, 0)
		if !slices.Equal(got, want) {
			t.Fatalf("%v: padded rows read\n%v\nwant\n%v", dt, got, want)
		}
		for i := range n {
			if pad.get(i) != flat.get(i) {
				t.Fatalf("%v: element %d is %v, want %v", dt, i, pad.get(i), flat.get(i))
			}
		}
		part := make([]float32, 20)
		pad.getRow(part, 10)
		if !slices.Equal(part, want[10:30]) {
			t.Errorf("%v: a span across rows reads %v", dt, part)
		}
		for i := range mem.Len() {
			if i%32 < 16 {
				continue
			}
			var v float32
			if dt == mlcore.Float16 {
				v = fromHalf(mem.Float16s()[i])
			} else {
				v = mem.Float32s()[i]
			}
			if !math.IsNaN(float64(v)) {
				t.Fatalf("%v: padding element %d was written (%v)", dt, i, v)
			}
		}
		if dt == mlcore.Float16 && pad.row16(10, 16) != nil {
			t.Error("row16 returned a span that crosses a row's end")
		}
	}
	// int32 (argmax) through getInt32.
	ints := []int32{4, 5, 6}
	b, _ := mlcore.NewInt32(ints, 1, 3)
	x, err := tensorOf(b, nil)
	if err != nil || x.getInt32(2) != 6 {
		t.Fatalf("int32: %v", err)
	}
	// A layout no host code can address is refused.
	mem, _ := mlcore.NewFloat32(make([]float32, 6), 6)
	tr, _ := mem.View([]int{2, 3}, []int{1, 2})
	if _, err := tensorOf(tr, nil); err == nil {
		t.Error("a transposed buffer accepted")
	}
}
