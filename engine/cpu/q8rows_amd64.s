#include "textflag.h"
#include "vec_amd64.h"
#include "q8rows_amd64.h"

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

VEC4(r8nib<>, $0x0f0f0f0f0f0f0f0f)

VEC4(r8bias<>, $0x8080808080808080)

#define SETUP \
	ROWS \
	VMOVDQU32 r8nib<>(SB), Y16 \
	VMOVDQU32 r8bias<>(SB), Y17 \
	VPXORD Y20, Y20, Y20 \
	VPXORD Y21, Y21, Y21 \
	VPXORD Y22, Y22, Y22 \
	VPXORD Y23, Y23, Y23 \
	VPXORD Y24, Y24, Y24 \
	VPXORD Y25, Y25, Y25 \
	VPXORD Y26, Y26, Y26 \
	VPXORD Y27, Y27, Y27

#define TRANSPOSE TRANSPOSE4(Y4, Y5, Y6, Y7)

// W4 (Q4_0, Q4_1): the 16 nibble bytes at off give chunks 0..3 (low
// nibbles) in Y8..Y11 and chunks 4..7 (high nibbles) in Y12..Y15.
#define W4(off) \
	LOAD4(off) \
	TRANSPOSE \
	VPSRLW $4, Y0, Y12 \
	VPSRLW $4, Y1, Y13 \
	VPSRLW $4, Y2, Y14 \
	VPSRLW $4, Y3, Y15 \
	VPANDD Y16, Y0, Y8 \
	VPANDD Y16, Y1, Y9 \
	VPANDD Y16, Y2, Y10 \
	VPANDD Y16, Y3, Y11 \
	VPANDD Y16, Y12, Y12 \
	VPANDD Y16, Y13, Y13 \
	VPANDD Y16, Y14, Y14 \
	VPANDD Y16, Y15, Y15

// W8 (Q8_0): the 32 weights at 2 as w+128, chunks 0..7 in Y8..Y15.
#define W8 \
	LOAD4(2) \
	TRANSPOSE \
	VPXORD Y17, Y0, Y8 \
	VPXORD Y17, Y1, Y9 \
	VPXORD Y17, Y2, Y10 \
	VPXORD Y17, Y3, Y11 \
	LOAD4(18) \
	TRANSPOSE \
	VPXORD Y17, Y0, Y12 \
	VPXORD Y17, Y1, Y13 \
	VPXORD Y17, Y2, Y14 \
	VPXORD Y17, Y3, Y15

// H41: the 8 rows' d_w in Y18 and m_w in Y19 (Q4_1's 4-byte header).
#define H41 \
	VMOVD (R8)(BX*1), X4 \
	VPINSRD $1, (R9)(BX*1), X4, X4 \
	VPINSRD $2, (R10)(BX*1), X4, X4 \
	VPINSRD $3, (R11)(BX*1), X4, X4 \
	VMOVD (R12)(BX*1), X5 \
	VPINSRD $1, (R13)(BX*1), X5, X5 \
	VPINSRD $2, (R14)(BX*1), X5, X5 \
	VPINSRD $3, (R15)(BX*1), X5, X5 \
	VINSERTI128 $1, X5, Y4, Y4 \
	VPMOVDW Y4, X5 \
	VPSRLD $16, Y4, Y4 \
	VPMOVDW Y4, X6 \
	VCVTPH2PS X5, Y18 \
	VCVTPH2PS X6, Y19

// H16: the 8 rows' d_w in Y18 (Q4_0's and Q8_0's 2-byte header).
#define H16 \
	VPINSRW $0, (R8)(BX*1), X4, X4 \
	VPINSRW $0, (R12)(BX*1), X5, X5 \
	VPINSRW $1, (R9)(BX*1), X4, X4 \
	VPINSRW $1, (R13)(BX*1), X5, X5 \
	VPINSRW $2, (R10)(BX*1), X4, X4 \
	VPINSRW $2, (R14)(BX*1), X5, X5 \
	VPINSRW $3, (R11)(BX*1), X4, X4 \
	VPINSRW $3, (R15)(BX*1), X5, X5 \
	VPUNPCKLQDQ X5, X4, X4 \
	VCVTPH2PS X4, Y18

// DOT adds token t's block (32 bytes at t*32(SI)) times the 8 rows' chunks
// into acc, in two zeroed halves (acc, acc2) so that the chain of dependent
// VPDPBUSD is 4 long, not 8: the sum is the same exact integer.
#define DOT(t, acc, acc2) \
	VPXORD acc, acc, acc \
	VPXORD acc2, acc2, acc2 \
	VPDPBUSD.BCST (t*32+0)(SI), Y8, acc \
	VPDPBUSD.BCST (t*32+16)(SI), Y12, acc2 \
	VPDPBUSD.BCST (t*32+4)(SI), Y9, acc \
	VPDPBUSD.BCST (t*32+20)(SI), Y13, acc2 \
	VPDPBUSD.BCST (t*32+8)(SI), Y10, acc \
	VPDPBUSD.BCST (t*32+24)(SI), Y14, acc2 \
	VPDPBUSD.BCST (t*32+12)(SI), Y11, acc \
	VPDPBUSD.BCST (t*32+28)(SI), Y15, acc2 \
	VPADDD acc2, acc, acc

// F41 accumulates token t's block of Q4_1.
#define F41(t, acc, acc2, A) \
	DOT(t, acc, acc2) \
	VCVTDQ2PS acc, acc \
	VMULPS.BCST (4*t)(DX), Y18, Y29 \
	VFMADD231PS acc, Y29, A \
	VFMADD231PS.BCST (4*t)(DX)(AX*1), Y19, A

// F16 accumulates token t's block of Q4_0 and Q8_0 (offsets in sx).
#define FQ16(t, acc, acc2, A) \
	DOT(t, acc, acc2) \
	VPSUBD.BCST (4*t)(DX)(AX*1), acc, acc \
	VCVTDQ2PS acc, acc \
	VMULPS.BCST (4*t)(DX), Y18, Y29 \
	VFMADD231PS acc, Y29, A

// DOT1 is DOT in one chain (acc only): the 8-token kernels keep their
// accumulators in Y20..Y27 and their integer sums in Y0..Y7, with no room
// for second halves; 8 independent tokens hide the longer chain.
#define DOT1(t, acc) \
	VPXORD acc, acc, acc \
	VPDPBUSD.BCST (t*32+0)(SI), Y8, acc \
	VPDPBUSD.BCST (t*32+4)(SI), Y9, acc \
	VPDPBUSD.BCST (t*32+8)(SI), Y10, acc \
	VPDPBUSD.BCST (t*32+12)(SI), Y11, acc \
	VPDPBUSD.BCST (t*32+16)(SI), Y12, acc \
	VPDPBUSD.BCST (t*32+20)(SI), Y13, acc \
	VPDPBUSD.BCST (t*32+24)(SI), Y14, acc \
	VPDPBUSD.BCST (t*32+28)(SI), Y15, acc

#define F41x8(t, acc, A) \
	DOT1(t, acc) \
	VCVTDQ2PS acc, acc \
	VMULPS.BCST (4*t)(DX), Y18, Y29 \
	VFMADD231PS acc, Y29, A \
	VFMADD231PS.BCST (4*t)(DX)(AX*1), Y19, A

#define FQ16x8(t, acc, A) \
	DOT1(t, acc) \
	VPSUBD.BCST (4*t)(DX)(AX*1), acc, acc \
	VCVTDQ2PS acc, acc \
	VMULPS.BCST (4*t)(DX), Y18, Y29 \
	VFMADD231PS acc, Y29, A

#define NEXT(bs, g) \
	ADDQ $bs, BX \
	ADDQ $(g*32), SI \
	ADDQ dstride+48(FP), DX \
	DECQ CX

// PF3, PF5 prefetch the next 8 rows' share of one block (8*bs bytes at
// DI+8*BX: the next group of rows is fetched while this one computes, as
// the 8 short interleaved row streams of a group are a poor pattern for the
// hardware prefetcher).
#define PF3 \
	PREFETCHT0 (DI)(BX*8) \
	PREFETCHT0 64(DI)(BX*8) \
	PREFETCHT0 128(DI)(BX*8)

#define PF5 \
	PF3 \
	PREFETCHT0 192(DI)(BX*8) \
	PREFETCHT0 256(DI)(BX*8)

#define OUT1 \
	MOVQ out+56(FP), DI \
	VMOVUPS Y24, (DI)

#define OUT2 \
	OUT1 \
	MOVQ ostride+64(FP), AX \
	VMOVUPS Y25, (DI)(AX*1)

#define OUT8 \
	MOVQ out+56(FP), DI \
	MOVQ ostride+64(FP), AX \
	LEAQ (AX)(AX*2), BX \
	VMOVUPS Y20, (DI) \
	VMOVUPS Y21, (DI)(AX*1) \
	VMOVUPS Y22, (DI)(AX*2) \
	VMOVUPS Y23, (DI)(BX*1) \
	LEAQ (DI)(AX*4), DI \
	VMOVUPS Y24, (DI) \
	VMOVUPS Y25, (DI)(AX*1) \
	VMOVUPS Y26, (DI)(AX*2) \
	VMOVUPS Y27, (DI)(BX*1)

#define OUT4 \
	OUT2 \
	VMOVUPS Y26, (DI)(AX*2) \
	LEAQ (DI)(AX*2), DI \
	VMOVUPS Y27, (DI)(AX*1)

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
