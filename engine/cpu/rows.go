//go:build amd64 || arm64

package cpu

import (
	"unsafe"

	"anechat/engine/model/gguf"
)

// The row kernels' loop, shared by the architectures that have them
// (q8rows_amd64.s, q8rowsavx2_amd64.s, q5rows*_amd64.s, kqrows*_amd64.s;
// q8rows_arm64.s): rowKernels of each architecture hands out its forms.

// rowKernel multiplies 8 weight rows with 1, 2, 4 or 8 tokens (see
// q8rows_amd64.s for the arguments; the arm64 forms take the same).
type rowKernel func(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)

// matMulQ8 is MatMul for quantised weights with 8-bit activations: each
// token's row of the input is quantised once (Input), then the row kernels
// take 8 weight rows and up to 8 tokens per call (matMulRows; VNNI, AVX2
// or NEON forms). It reports false when the CPU or the type has no integer
// kernel.
func (m *Matrix) matMulQ8(p *Pool, out []float32, in *Input, n int) bool {
	return in.Cols == m.Cols && m.matMulRows(p, out, in, n)
}

// hasIntegerKernels reports whether t's weights have row kernels here (the
// other integer formats run the Go loops of dotref.go, with the same sums).
func hasIntegerKernels(t gguf.Type) bool { return rowKernels(t)[1] != nil }

// rowArgs is the activations' side of a row-kernel call for m's format.
type rowArgs struct {
	nb           int            // blocks per row
	q            []int8         // the grouped values (token t's group at q[t*Cols:])
	dx, sx       unsafe.Pointer // token 0's first scalars
	dsize, ssize int            // bytes from one token's scalars to the next
	dstride      int            // bytes from one block's scalars to the next
}

// rowArgs computes (on first use) and returns the Input form m's kernels read.
func (m *Matrix) rowArgs(in *Input) rowArgs {
	if kFormat(m.Type) {
		k := in.q8K()
		return rowArgs{nb: m.Cols / qkK, q: k.q, dx: unsafe.Pointer(&k.recs[0]), sx: unsafe.Pointer(&k.recs[0]), dsize: kRecBytes, ssize: kRecBytes, dstride: k.ts * kRecBytes}
	}
	ts := in.q8T()
	a := rowArgs{nb: m.Cols / 32, q: in.qG, dx: unsafe.Pointer(&in.dT[0]), dsize: 4, ssize: 4, dstride: 4 * ts}
	switch m.Type {
	case gguf.Q4_1, gguf.Q5_1:
		a.sx = unsafe.Pointer(&in.sT[0])
	case gguf.Q4_0:
		a.sx = unsafe.Pointer(&in.qs8T[0])
	case gguf.Q5_0:
		a.sx = unsafe.Pointer(&in.qs16T[0])
	default:
		a.sx = unsafe.Pointer(&in.qs128T[0])
	}
	return a
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
