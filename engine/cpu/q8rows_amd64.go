package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"anechat/engine/model/gguf"
)

// hasVNNI selects the row kernels (q8rows_amd64.s): VPDPBUSD with embedded
// broadcasts on YMM registers, so they need AVX-512 VNNI, VL, BW and F.
var hasVNNI = hasQ8 && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512F

// rowKernel multiplies 8 weight rows with 1, 2 or 4 tokens (see
// q8rows_amd64.s for the arguments).
type rowKernel func(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ41x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ40x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

//go:noescape
func rowsQ80x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

// rowKernels returns the row kernels for t on this CPU by group size
// (index 1, 2, 4, 8; nil if none): the VNNI forms, or the AVX2 forms. Both
// compute the canonical sum (dotQ8Ref).
func rowKernels(t gguf.Type) (k [9]rowKernel) {
	if k, ok := moreRowKernels(t); ok {
		return k // Q5_0, Q5_1 and the K formats (kqrows_amd64.go)
	}
	if hasVNNI {
		switch t {
		case gguf.Q4_0:
			k[1], k[2], k[4], k[8] = rowsQ40x1, rowsQ40x2, rowsQ40x4, rowsQ40x8
		case gguf.Q4_1:
			k[1], k[2], k[4], k[8] = rowsQ41x1, rowsQ41x2, rowsQ41x4, rowsQ41x8
		case gguf.Q8_0:
			k[1], k[2], k[4], k[8] = rowsQ80x1, rowsQ80x2, rowsQ80x4, rowsQ80x8
		}
		return k
	}
	if hasQ8 {
		// The AVX2 forms (q8rowsavx2_amd64.s).
		switch t {
		case gguf.Q4_0:
			k[1], k[2], k[4], k[8] = rowsQ40x1A, rowsQ40x2A, rowsQ40x4A, rowsQ40x8A
		case gguf.Q4_1:
			k[1], k[2], k[4], k[8] = rowsQ41x1A, rowsQ41x2A, rowsQ41x4A, rowsQ41x8A
		case gguf.Q8_0:
			k[1], k[2], k[4], k[8] = rowsQ80x1A, rowsQ80x2A, rowsQ80x4A, rowsQ80x8A
		}
	}
	return k
}

// matMulRows is matMulQ8 with the row kernels: 8 rows per call, tokens in
// groups of 8, then 4, 2, 1 (rowGroupSize; Input.qG). A last partial group
// of rows runs on the matrix's padded copy (Matrix.tail) into scratch.
func (m *Matrix) matMulRows(p *Pool, out []float32, in *Input, n int) bool {
	ks := rowKernels(m.Type)
	if ks[1] == nil {
		return false
	}
	cols := m.Cols
	full := m.Rows &^ 7
	const chunk = 16
	t := &in.rows
	// The activations in the form the type's kernels read (rowArgs).
	*t = rowsTask{m: m, out: out, n: n, ks: ks, a: m.rowArgs(in), full: full}
	if full != m.Rows {
		// Scratch for the padded rows' results: n tokens x 8 rows per worker.
		t.scratch = in.scratch(8 * n * p.Workers())
	}
	p.Run(m.Rows, chunk, cols*n/2, t)
	return true
}

// rowsTask is matMulRows' loop over groups of 8 weight rows.
type rowsTask struct {
	m       *Matrix
	out     []float32
	n       int
	ks      [9]rowKernel
	a       rowArgs
	full    int       // rows below are whole groups of 8 in m.Data
	scratch []float32 // the padded rows' results, 8·n per worker
}

// Run implements Task.
func (t *rowsTask) Run(worker, lo, hi int) {
	m, out, n := t.m, t.out, t.n
	cols, a, ostride := m.Cols, &t.a, 4*m.Rows
	for r := lo; r < hi; r += 8 {
		w, o, os := &m.Data[r*m.rowBytes], out[r:], ostride
		if r >= t.full {
			w, o, os = &m.tail[0], t.scratch[worker*8*n:], 32
		}
		for tk := 0; tk < n; {
			g := rowGroupSize(n - tk)
			t.ks[g](w, m.rowBytes, a.nb, &a.q[tk*cols], (*float32)(unsafe.Add(a.dx, tk*a.dsize)), unsafe.Add(a.sx, tk*a.ssize), a.dstride, &o[tk*os/4], os)
			tk += g
		}
		if r >= t.full {
			for tk := range n {
				copy(out[tk*m.Rows+r:tk*m.Rows+m.Rows], t.scratch[(worker*n+tk)*8:])
			}
		}
	}
}
