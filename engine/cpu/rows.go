//go:build amd64 || arm64

package cpu

import (
	"unsafe"

	"anechat/engine/model/gguf"
)

// The row kernels' loop, shared by the architectures that have them
// (q8rows_amd64.s and q8rowsavx2_amd64.s, q8rows_arm64.s): rowKernels of
// each architecture hands out its forms.

// rowKernel multiplies 8 weight rows with 1, 2, 4 or 8 tokens (see
// q8rows_amd64.s for the arguments; the arm64 forms take the same).
type rowKernel func(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

// hasIntegerKernels reports whether t's weights multiply 8-bit activations
// here (the row kernels) rather than floats.
func hasIntegerKernels(t gguf.Type) bool { return rowKernels(t)[1] != nil }

// matMulQ8 is MatMul for quantised weights with 8-bit activations: each
// token's row of the input is quantised once (Input), then the row kernels
// take 8 weight rows and up to 8 tokens per call (matMulRows; VNNI, AVX2
// or NEON forms). It reports false when the CPU or the type has no integer kernel.
func (m *Matrix) matMulQ8(p *Pool, out []float32, in *Input, n int) bool {
	return in.Cols == m.Cols && m.matMulRows(p, out, in, n)
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
	ts := in.q8T()
	var sx []int32
	switch m.Type {
	case gguf.Q4_1:
		sx = unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(in.sT))), len(in.sT))
	case gguf.Q4_0:
		sx = in.qs8T
	default:
		sx = in.qs128T
	}
	full := m.Rows &^ 7
	const chunk = 16
	t := &in.rows
	*t = rowsTask{m: m, out: out, n: n, ks: ks, sx: sx, qG: in.qG, dT: in.dT, dstride: 4 * ts, full: full}
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
	sx      []int32
	qG      []int8
	dT      []float32
	dstride int
	full    int       // rows below are whole groups of 8 in m.Data
	scratch []float32 // the padded rows' results, 8·n per worker
}

// Run implements Task.
func (t *rowsTask) Run(worker, lo, hi int) {
	m, out, n := t.m, t.out, t.n
	cols, nb, ostride := m.Cols, m.Cols/32, 4*m.Rows
	for r := lo; r < hi; r += 8 {
		w, o, os := &m.Data[r*m.rowBytes], out[r:], ostride
		if r >= t.full {
			w, o, os = &m.tail[0], t.scratch[worker*8*n:], 32
		}
		for tk := 0; tk < n; {
			g := rowGroupSize(n - tk)
			t.ks[g](w, m.rowBytes, nb, &t.qG[tk*cols], &t.dT[tk], unsafe.Pointer(&t.sx[tk]), t.dstride, &o[tk*os/4], os)
			tk += g
		}
		if r >= t.full {
			for tk := range n {
				copy(out[tk*m.Rows+r:tk*m.Rows+m.Rows], t.scratch[(worker*n+tk)*8:])
			}
		}
	}
}
