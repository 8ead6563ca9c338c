// Macros the row kernels share (q8rows_amd64.s, q8rowsavx2_amd64.s).

// ROWS sets up the registers of a row kernel: R8..R15 the 8 rows (rstride
// bytes apart), CX blocks, SI the activations, DX the first scalars, AX the
// second scalars' offset from DX, DI the next group of rows (for prefetch),
// BX the block offset 0.
#define ROWS \
	MOVQ w+0(FP), R8 \
	MOVQ rstride+8(FP), AX \
	LEAQ (R8)(AX*1), R9 \
	LEAQ (R9)(AX*1), R10 \
	LEAQ (R10)(AX*1), R11 \
	LEAQ (R11)(AX*1), R12 \
	LEAQ (R12)(AX*1), R13 \
	LEAQ (R13)(AX*1), R14 \
	LEAQ (R14)(AX*1), R15 \
	MOVQ nb+16(FP), CX \
	MOVQ qx+24(FP), SI \
	MOVQ dx+32(FP), DX \
	MOVQ sx+40(FP), AX \
	SUBQ DX, AX \
	MOVQ rstride+8(FP), DI \
	ADDQ R15, DI \
	XORQ BX, BX

// LOAD4 loads 16 bytes at off of each row's block: rows 0..3 in the low
// halves of Y0..Y3, rows 4..7 in the high halves.
#define LOAD4(off) \
	VMOVDQU off(R8)(BX*1), X0 \
	VINSERTI128 $1, off(R12)(BX*1), Y0, Y0 \
	VMOVDQU off(R9)(BX*1), X1 \
	VINSERTI128 $1, off(R13)(BX*1), Y1, Y1 \
	VMOVDQU off(R10)(BX*1), X2 \
	VINSERTI128 $1, off(R14)(BX*1), Y2, Y2 \
	VMOVDQU off(R11)(BX*1), X3 \
	VINSERTI128 $1, off(R15)(BX*1), Y3, Y3

// TRANSPOSE4 turns Y0..Y3 into dword k of rows 0..7 in Y(k) (a 4x4
// transpose in each 128-bit half), with t0..t3 as temporaries.
#define TRANSPOSE4(t0, t1, t2, t3) \
	VPUNPCKLDQ Y1, Y0, t0 \
	VPUNPCKHDQ Y1, Y0, t1 \
	VPUNPCKLDQ Y3, Y2, t2 \
	VPUNPCKHDQ Y3, Y2, t3 \
	VPUNPCKLQDQ t2, t0, Y0 \
	VPUNPCKHQDQ t2, t0, Y1 \
	VPUNPCKLQDQ t3, t1, Y2 \
	VPUNPCKHQDQ t3, t1, Y3
