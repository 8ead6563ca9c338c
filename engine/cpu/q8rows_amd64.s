#include "textflag.h"
#include "vec_amd64.h"
#include "q8rows_amd64.h"
#include "q8rowsvnni_amd64.h"

// Integer kernels with AVX-512 VNNI (VPDPBUSD on YMM registers): 8 weight
// rows (Q4_0, Q4_1 or Q8_0) times the 8-bit activations of 1, 2 or 4
// tokens... up to 8 (the 8-token forms at the end), with the rows in the lanes.
//
// Per block, the 8 rows' weights are loaded and transposed (4x4 dwords per
// 128-bit half) so that vector k holds 4-byte chunk k of every row; each
// chunk of a token's activations is then broadcast from memory
// (VPDPBUSD.BCST), so one instruction adds 4 products to all 8 rows, with
// no shuffles or horizontal sums per token. A token's block costs 8
// VPDPBUSD, one conversion and one or two FMAs for 8 rows; the transpose and
// the block scales are shared by the tokens of the call. Every lane computes
// exactly the canonical sum of q8.go (dotQ8Ref), whatever the number of
// tokens:
//   A = fma(d_w*d_x, float(I_b), A), then for Q4_1 A = fma(m_w, s_x, A),
// over the blocks b in order, with I_b the exact int32 product of the block.
// Q4_0 and Q8_0 fold their weight offsets into I_b with the tokens' block
// sums of q (Input.qs8, qs128): Q4_0 weights are nibbles q of value q-8
// (I_b = Σq·x - 8Σx), Q8_0 weights w go in as the unsigned w+128 (w XOR
// 0x80; I_b = Σ(w+128)·x - 128Σx). |I_b| <= 32*255*127 < 2^24, so float(I_b)
// is exact too.
//
// Arguments: w the first row's block 0 (rows rstride bytes apart), nb
// blocks, qx the group's activations (block b's 32 bytes of token t at
// (b*G+t)*32), dx the group's first d_x in the block-major copy (tokens
// adjacent, blocks dstride bytes apart), sx the same for the second scalar
// (s_x for Q4_1, 8Σq for Q4_0, 128Σq for Q8_0), out the results of token 0
// for the 8 rows (tokens ostride bytes apart).
//
// Registers: R8..R15 the 8 rows, BX the block's offset in a row, SI qx,
// DX dx, AX sx-dx, DI the next group of rows (prefetch), CX blocks left. Y0..Y7 loads and transpose,
// Y8..Y15 the weight chunks 0..7, Y16 nibble mask, Y17 0x80 bytes, Y18 d_w,
// Y19 m_w, Y20..Y23 and Y0..Y3 integer sums (after the transpose), Y24..Y27 accumulators, Y29 scale.

// func rowsQ41x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x1(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q41r1done
q41r1loop:
	PF3
	H41
	W4(4)
	F41(0, Y20, Y0, Y24)
	NEXT(20, 1)
	JNZ q41r1loop
q41r1done:
	OUT1
	VZEROUPPER
	RET

// func rowsQ41x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x2(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q41r2done
q41r2loop:
	PF3
	H41
	W4(4)
	F41(0, Y20, Y0, Y24)
	F41(1, Y21, Y1, Y25)
	NEXT(20, 2)
	JNZ q41r2loop
q41r2done:
	OUT2
	VZEROUPPER
	RET

// func rowsQ41x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x4(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q41r4done
q41r4loop:
	PF3
	H41
	W4(4)
	F41(0, Y20, Y0, Y24)
	F41(1, Y21, Y1, Y25)
	F41(2, Y22, Y2, Y26)
	F41(3, Y23, Y3, Y27)
	NEXT(20, 4)
	JNZ q41r4loop
q41r4done:
	OUT4
	VZEROUPPER
	RET

// func rowsQ40x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x1(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q40r1done
q40r1loop:
	PF3
	H16
	W4(2)
	FQ16(0, Y20, Y0, Y24)
	NEXT(18, 1)
	JNZ q40r1loop
q40r1done:
	OUT1
	VZEROUPPER
	RET

// func rowsQ40x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x2(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q40r2done
q40r2loop:
	PF3
	H16
	W4(2)
	FQ16(0, Y20, Y0, Y24)
	FQ16(1, Y21, Y1, Y25)
	NEXT(18, 2)
	JNZ q40r2loop
q40r2done:
	OUT2
	VZEROUPPER
	RET

// func rowsQ40x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x4(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q40r4done
q40r4loop:
	PF3
	H16
	W4(2)
	FQ16(0, Y20, Y0, Y24)
	FQ16(1, Y21, Y1, Y25)
	FQ16(2, Y22, Y2, Y26)
	FQ16(3, Y23, Y3, Y27)
	NEXT(18, 4)
	JNZ q40r4loop
q40r4done:
	OUT4
	VZEROUPPER
	RET

// func rowsQ80x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x1(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q80r1done
q80r1loop:
	PF5
	H16
	W8
	FQ16(0, Y20, Y0, Y24)
	NEXT(34, 1)
	JNZ q80r1loop
q80r1done:
	OUT1
	VZEROUPPER
	RET

// func rowsQ80x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x2(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q80r2done
q80r2loop:
	PF5
	H16
	W8
	FQ16(0, Y20, Y0, Y24)
	FQ16(1, Y21, Y1, Y25)
	NEXT(34, 2)
	JNZ q80r2loop
q80r2done:
	OUT2
	VZEROUPPER
	RET

// func rowsQ80x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x4(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q80r4done
q80r4loop:
	PF5
	H16
	W8
	FQ16(0, Y20, Y0, Y24)
	FQ16(1, Y21, Y1, Y25)
	FQ16(2, Y22, Y2, Y26)
	FQ16(3, Y23, Y3, Y27)
	NEXT(34, 4)
	JNZ q80r4loop
q80r4done:
	OUT4
	VZEROUPPER
	RET

// func rowsQ41x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x8(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q41r8done
q41r8loop:
	PF3
	H41
	W4(4)
	F41x8(0, Y0, Y20)
	F41x8(1, Y1, Y21)
	F41x8(2, Y2, Y22)
	F41x8(3, Y3, Y23)
	F41x8(4, Y4, Y24)
	F41x8(5, Y5, Y25)
	F41x8(6, Y6, Y26)
	F41x8(7, Y7, Y27)
	NEXT(20, 8)
	JNZ q41r8loop
q41r8done:
	OUT8
	VZEROUPPER
	RET

// func rowsQ40x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x8(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q40r8done
q40r8loop:
	PF3
	H16
	W4(2)
	FQ16x8(0, Y0, Y20)
	FQ16x8(1, Y1, Y21)
	FQ16x8(2, Y2, Y22)
	FQ16x8(3, Y3, Y23)
	FQ16x8(4, Y4, Y24)
	FQ16x8(5, Y5, Y25)
	FQ16x8(6, Y6, Y26)
	FQ16x8(7, Y7, Y27)
	NEXT(18, 8)
	JNZ q40r8loop
q40r8done:
	OUT8
	VZEROUPPER
	RET

// func rowsQ80x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x8(SB), NOSPLIT, $0-72
	SETUP
	TESTQ CX, CX
	JZ q80r8done
q80r8loop:
	PF5
	H16
	W8
	FQ16x8(0, Y0, Y20)
	FQ16x8(1, Y1, Y21)
	FQ16x8(2, Y2, Y22)
	FQ16x8(3, Y3, Y23)
	FQ16x8(4, Y4, Y24)
	FQ16x8(5, Y5, Y25)
	FQ16x8(6, Y6, Y26)
	FQ16x8(7, Y7, Y27)
	NEXT(34, 8)
	JNZ q80r8loop
q80r8done:
	OUT8
	VZEROUPPER
	RET
