package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"anechat/engine/model/gguf"
)

// Matrix is a weight matrix of Rows rows of Cols elements, stored row-major
// in one of the supported GGML encodings. Data usually aliases a memory
// mapping: nothing is copied or converted at load time.
type Matrix struct {
	Name       string
	Type       gguf.Type
	Rows, Cols int
	Data       []byte
	f32        []float32 // Data viewed as float32 when Type is F32
	rowBytes   int
	// tail is the last Rows%8 rows of an integer-kernel type padded to 8
	// with copies of the last row, for the 8-row kernels (matMulRows); nil
	// when Rows is a multiple of 8.
	tail []byte
}

// Supported reports whether the CPU kernels compute with t.
func Supported(t gguf.Type) bool {
	switch t {
	case gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1,
		gguf.Q5_0, gguf.Q5_1, gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
		return true
	}
	return false
}

// checkType returns an error naming tensor name when the kernels do not
// compute with t.
func checkType(name string, t gguf.Type) error {
	if Supported(t) {
		return nil
	}
	return fmt.Errorf("tensor %q: type %s is not supported by the CPU backend (want F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K or Q6_K)", name, t)
}

// NewMatrix wraps data as a rows×cols matrix of type t, checking that the
// type is supported and the size matches. name is used in errors.
func NewMatrix(name string, t gguf.Type, rows, cols int, data []byte) (*Matrix, error) {
	if err := checkType(name, t); err != nil {
		return nil, err
	}
	if rows <= 0 || cols <= 0 || cols%t.BlockSize() != 0 {
		return nil, fmt.Errorf("tensor %q: shape %dx%d is invalid for %s (rows of %s hold whole blocks of %d)", name, rows, cols, t, t, t.BlockSize())
	}
	rb := t.RowBytes(cols)
	if len(data) != rows*rb {
		return nil, fmt.Errorf("tensor %q: %d bytes, want %d for %dx%d %s", name, len(data), rows*rb, rows, cols, t)
	}
	m := &Matrix{Name: name, Type: t, Rows: rows, Cols: cols, Data: data, rowBytes: rb}
	if full := rows &^ 7; full != rows && integerType(t) {
		m.tail = make([]byte, 8*rb)
		for i := range 8 {
			r := min(full+i, rows-1)
			copy(m.tail[i*rb:(i+1)*rb], data[r*rb:(r+1)*rb])
		}
	}
	if t == gguf.F32 {
		if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%4 != 0 {
			// Unaligned (never in a well-formed GGUF): copy.
			m.f32 = make([]float32, rows*cols)
			for i := range m.f32 {
				m.f32[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
		} else {
			m.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), rows*cols)
		}
	}
	return m, nil
}

// FromF32 wraps float32 values as an F32 matrix (tests, computed weights).
func FromF32(name string, rows, cols int, vals []float32) *Matrix {
	return &Matrix{Name: name, Type: gguf.F32, Rows: rows, Cols: cols, f32: vals[:rows*cols], rowBytes: 4 * cols,
		Data: unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), 4*rows*cols)}
}

// Row writes the dequantised row r into dst (len ≥ Cols) and returns dst[:Cols].
func (m *Matrix) Row(dst []float32, r int) []float32 {
	dst = dst[:m.Cols]
	if m.f32 != nil {
		copy(dst, m.f32[r*m.Cols:(r+1)*m.Cols])
		return dst
	}
	dequantRow(dst, m.Type, m.Data[r*m.rowBytes:(r+1)*m.rowBytes])
	return dst
}

// rowF32 returns row r as float32, either aliasing the weights (F32) or
// dequantised into buf.
func (m *Matrix) rowF32(buf []float32, r int) []float32 {
	if m.f32 != nil {
		return m.f32[r*m.Cols : (r+1)*m.Cols : (r+1)*m.Cols]
	}
	dequantRow(buf[:m.Cols], m.Type, m.Data[r*m.rowBytes:(r+1)*m.rowBytes])
	return buf[:m.Cols]
}

// MatMul computes out[t*Rows+r] = Dot(row r, x[t*Cols:(t+1)*Cols]) for the
// n = len(x)/Cols tokens of x. Each weight row comes from memory once per
// call and serves the tokens from the core's caches (the kernels take it
// for a group of up to 8 or 4 tokens at a time), so a wide call costs
// little more memory traffic than a narrow one; the dot product of a row
// with a token is the same computation whatever n is (row independence).
func (m *Matrix) MatMul(p *Pool, out, x []float32) {
	m.MatMulInput(p, out, NewInput(x, m.Cols))
}

// MatMulInput is MatMul on an Input that other matrices may share (see
// Input). The integer formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K)
// multiply quantised activations with the canonical sums of dotref.go: the
// row kernels where this CPU has them for the format (matMulQ8), else the
// Go loops (matMulRef), the same bits either way; F32, F16 and BF16 rows
// are read in place by the fused kernels of dot4_amd64.s for groups of 4,
// 2 and 1 tokens where they exist (dotTokens); what is left dequantises
// each row to float32 once for the remaining tokens.
func (m *Matrix) MatMulInput(p *Pool, out []float32, in *Input) {
	x := in.X
	n := len(x) / m.Cols
	out = out[:n*m.Rows]
	if integerType(m.Type) && in.Cols == m.Cols {
		// Quantised activations, the canonical sums (dotref.go): the row
		// kernels where this CPU has them for the type, else the Go loops.
		if !m.matMulQ8(p, out, in, n) {
			m.matMulRef(p, out, in, n)
		}
		return
	}
	const chunk = 16
	t := &in.mm
	*t = matTask{m: m, out: out, x: x, n: n}
	if m.f32 == nil {
		t.scratch = in.scratch(p.Workers() * m.Cols)
	}
	p.Run(m.Rows, chunk, m.Cols*n, t)
}

// matTask is MatMulInput's loop over weight rows for the float path.
type matTask struct {
	m       *Matrix
	out, x  []float32
	n       int
	scratch []float32 // one dequantised row per worker (nil for F32)
}

// Run implements Task.
func (t *matTask) Run(worker, lo, hi int) {
	m, out, x, n := t.m, t.out, t.x, t.n
	var buf []float32
	if t.scratch != nil {
		buf = t.scratch[worker*m.Cols : (worker+1)*m.Cols]
	}
	for r := lo; r < hi; r++ {
		t := m.dotTokens(r, out, x, n, buf)
		if t == n {
			continue
		}
		w := m.rowF32(buf, r)
		for ; t+3 <= n; t += 3 {
			c := m.Cols
			d := Dot3(w, x[t*c:(t+1)*c], x[(t+1)*c:(t+2)*c], x[(t+2)*c:(t+3)*c])
			out[t*m.Rows+r], out[(t+1)*m.Rows+r], out[(t+2)*m.Rows+r] = d[0], d[1], d[2]
		}
		for ; t < n; t++ {
			out[t*m.Rows+r] = Dot(w, x[t*m.Cols:(t+1)*m.Cols])
		}
	}
}

// dotTokens computes row r's outputs for the tokens it can with the fused
// float kernels (dot4_amd64.s: they read the row's bytes directly, widening
// as they go, for 4 tokens, then 2, then 1) and returns how many tokens,
// from token 0, it did (0 where there are no such kernels). Each result is
// Dot's bit for bit: the kernels keep Dot's accumulation, and a row tail
// beyond a multiple of 32 goes through dotGo as in Dot (widened into buf).
func (m *Matrix) dotTokens(r int, out, x []float32, n int, buf []float32) int {
	c := m.Cols
	row := m.Data[r*m.rowBytes : (r+1)*m.rowBytes]
	t := 0
	for t < n {
		g := groupSize(n - t)
		var d [4]float32
		k := dotNSIMD(g, m.Type, row, x[t*c:(t+g)*c], c, &d)
		if k == 0 {
			return t
		}
		if k < c {
			tail := m.tailF32(buf, r, k)
			for j := range g {
				d[j] += dotGo(tail, x[(t+j)*c+k:(t+j+1)*c])
			}
		}
		for j := range g {
			out[(t+j)*m.Rows+r] = d[j]
		}
		t += g
	}
	return t
}

// tailF32 returns elements k.. of row r as float32 (aliasing the weights
// for F32, else dequantised into buf); k is a multiple of 32.
func (m *Matrix) tailF32(buf []float32, r, k int) []float32 {
	if m.f32 != nil {
		return m.f32[r*m.Cols+k : (r+1)*m.Cols]
	}
	row := m.Data[r*m.rowBytes : (r+1)*m.rowBytes]
	skip := m.Type.RowBytes(k)
	dequantRow(buf[:m.Cols-k], m.Type, row[skip:])
	return buf[:m.Cols-k]
}

func dequantRow(dst []float32, t gguf.Type, src []byte) {
	if dequantSIMD(dst, t, src) || dequantRowMore(dst, t, src) {
		return
	}
	switch t {
	case gguf.F16:
		for i := f16SIMD(dst, src); i < len(dst); i++ {
			dst[i] = F16(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case gguf.BF16:
		for i := bf16SIMD(dst, src); i < len(dst); i++ {
			dst[i] = BF16(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case gguf.F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case gguf.Q8_0:
		// Block: f16 scale d, 32 int8 q; x = d·q.
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*34 : b*34+34 : b*34+34]
			d := F16(binary.LittleEndian.Uint16(blk))
			o := dst[b*32 : b*32+32 : b*32+32]
			for i := range 32 {
				o[i] = d * float32(int8(blk[2+i]))
			}
		}
	case gguf.Q4_0:
		// Block: f16 scale d, 16 bytes; element i is the low nibble of
		// byte i, element i+16 the high nibble; x = d·(q-8).
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*18 : b*18+18 : b*18+18]
			d := F16(binary.LittleEndian.Uint16(blk))
			o := dst[b*32 : b*32+32 : b*32+32]
			for i := range 16 {
				q := blk[2+i]
				o[i] = d * float32(int(q&0xf)-8)
				o[i+16] = d * float32(int(q>>4)-8)
			}
		}
	case gguf.Q4_1:
		// Block: f16 scale d, f16 min m, 16 bytes of nibbles laid out as
		// Q4_0; x = d·q + m.
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*20 : b*20+20 : b*20+20]
			d := F16(binary.LittleEndian.Uint16(blk))
			mn := F16(binary.LittleEndian.Uint16(blk[2:]))
			o := dst[b*32 : b*32+32 : b*32+32]
			for i := range 16 {
				q := blk[4+i]
				// Rounded product, then the sum (never fused): the
				// reference dequantiser's two roundings.
				o[i] = float32(d*float32(q&0xf)) + mn
				o[i+16] = float32(d*float32(q>>4)) + mn
			}
		}
	}
}
