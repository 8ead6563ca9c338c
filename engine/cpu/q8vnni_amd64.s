#include "textflag.h"

// Generated from q8_amd64.s by replacing each VPMADDUBSW+VPMADDWD pair with
// one VPDPBUSD (AVX-512 VNNI on YMM registers). The int32 lane sums are the
// same exact integers (no int16 saturation is reachable: |w| <= 128,
// |x| <= 127), so every result is bit-identical to the AVX2 kernels.


// Integer dot products of quantised weight rows (Q4_0, Q4_1, Q8_0) with
// activations quantised to 8 bits per block of 32 (quantizeQ8): per block,
// VPMADDUBSW multiplies 32 byte pairs (weights unsigned or sign-folded), the
// 8 int32 lane sums become floats and are accumulated with one FMA by
// d_w*d_x; Q4_1's (and Q4_0's) offset term m_w*(d_x*Σq_x) goes into a scalar
// accumulator. Every token's accumulators see the same operations in the same
// order, whether the kernel handles 1 or 4 tokens: results are bit-identical
// (row independence).

DATA q8nib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA q8nib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL q8nib<>(SB), RODATA|NOPTR, $16

DATA q8ones<>+0(SB)/8, $0x0001000100010001
DATA q8ones<>+8(SB)/8, $0x0001000100010001
DATA q8ones<>+16(SB)/8, $0x0001000100010001
DATA q8ones<>+24(SB)/8, $0x0001000100010001
GLOBL q8ones<>(SB), RODATA|NOPTR, $32

DATA q8m8<>+0(SB)/4, $0xc1000000
GLOBL q8m8<>(SB), RODATA|NOPTR, $4

// Registers: SI weight block, R8 qx of token 0 (tokens R11 bytes apart), R9
// dx, R10 sx of token 0 (tokens R12 bytes apart), CX blocks left.
// Y0..Y3 accumulators, X4..X7 offset accumulators, Y8 weights (u8 or |w|),
// Y9 sign source (Q8_0), X10 d_w, X14 m_w, Y13 ones, X15 nibble mask.

// W4 expands a 4-bit block's 16 bytes at off(SI) into Y8 (32 u8).
#define W4(off) \
	VMOVDQU off(SI), X9 \
	VPAND X15, X9, X11 \
	VPSRLW $4, X9, X9 \
	VPAND X15, X9, X9 \
	VINSERTI128 $1, X9, Y11, Y8

// HALFS converts the f16 at off(SI) into the low lane of X.
#define HALFS(off, X) \
	MOVWLZX off(SI), AX \
	VMOVD AX, X \
	VCVTPH2PS X, X

// TOK4 accumulates token k of a 4-bit block (u8 weights in Y8).
#define TOKM(q, d, sm, acc, macc) \
	VPXOR Y12, Y12, Y12 \
	VPDPBUSD q, Y8, Y12 \
	VCVTDQ2PS Y12, Y12 \
	VMULSS d, X10, X11 \
	VBROADCASTSS X11, Y11 \
	VFMADD231PS Y11, Y12, acc \
	VFMADD231SS sm, X14, macc

#define TOK4(acc, macc) TOKM((R8), (R9), (R10), acc, macc)

// REDUCE stores reduce(acc)+macc to off(DI).
#define REDUCE(acc, accx, tmpx, macc, off) \
	VEXTRACTF128 $1, acc, tmpx \
	VADDPS tmpx, accx, accx \
	VHADDPS accx, accx, accx \
	VHADDPS accx, accx, accx \
	VADDSS macc, accx, accx \
	MOVSS accx, off(DI)

#define ZERO \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7

#define ARGS \
	MOVQ w+0(FP), SI \
	MOVQ nb+8(FP), CX \
	MOVQ qx+16(FP), R8 \
	MOVQ dx+24(FP), R9 \
	MOVQ sx+32(FP), R10 \
	MOVQ qstride+40(FP), R11 \
	MOVQ dstride+48(FP), R12 \
	MOVQ out+56(FP), DI \
	VMOVDQU q8nib<>(SB), X15 \
	VMOVDQU q8ones<>(SB), Y13

// func dotQ41Q8x1(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ41Q8x1V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q41x1v:
	TESTQ CX, CX
	JZ q41x1vdone
	HALFS(0, X10)
	HALFS(2, X14)
	W4(4)
	TOK4(Y0, X4)
	ADDQ $20, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q41x1v
q41x1vdone:
	REDUCE(Y0, X0, X1, X4, 0)
	VZEROUPPER
	RET

// TOKS4 accumulates tokens 0..3: token k's data at base + k*stride (R13 =
// 3*qstride, BX = 3*dstride, set by STRIDES3).
#define TOKS4 \
	TOKM((R8), (R9), (R10), Y0, X4) \
	TOKM((R8)(R11*1), (R9)(R12*1), (R10)(R12*1), Y1, X5) \
	TOKM((R8)(R11*2), (R9)(R12*2), (R10)(R12*2), Y2, X6) \
	TOKM((R8)(R13*1), (R9)(BX*1), (R10)(BX*1), Y3, X7)

#define STRIDES3 \
	LEAQ (R11)(R11*2), R13 \
	LEAQ (R12)(R12*2), BX

#define STORE4 \
	REDUCE(Y0, X0, X8, X4, 0) \
	REDUCE(Y1, X1, X8, X5, 4) \
	REDUCE(Y2, X2, X8, X6, 8) \
	REDUCE(Y3, X3, X8, X7, 12)

// func dotQ41Q8x4(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ41Q8x4V(SB), NOSPLIT, $0-64
	ARGS
	STRIDES3
	ZERO
q41x4v:
	TESTQ CX, CX
	JZ q41x4vdone
	HALFS(0, X10)
	HALFS(2, X14)
	W4(4)
	TOKS4
	ADDQ $20, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q41x4v
q41x4vdone:
	STORE4
	VZEROUPPER
	RET

// Q4_0: m_w = -8*d_w (exact).
// func dotQ40Q8x1(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ40Q8x1V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q40x1v:
	TESTQ CX, CX
	JZ q40x1vdone
	HALFS(0, X10)
	VMULSS q8m8<>(SB), X10, X14
	W4(2)
	TOK4(Y0, X4)
	ADDQ $18, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q40x1v
q40x1vdone:
	REDUCE(Y0, X0, X1, X4, 0)
	VZEROUPPER
	RET

// func dotQ40Q8x4(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ40Q8x4V(SB), NOSPLIT, $0-64
	ARGS
	STRIDES3
	ZERO
q40x4v:
	TESTQ CX, CX
	JZ q40x4vdone
	HALFS(0, X10)
	VMULSS q8m8<>(SB), X10, X14
	W4(2)
	TOKS4
	ADDQ $18, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q40x4v
q40x4vdone:
	STORE4
	VZEROUPPER
	RET

// TOK8 accumulates one token of a Q8_0 block (x at q, d_x at d): |w| in
// Y8, w (sign) in Y9.
#define TOK8M(q, d, acc) \
	VMOVDQU q, Y12 \
	VPSIGNB Y9, Y12, Y12 \
	VPXOR Y14, Y14, Y14 \
	VPDPBUSD Y12, Y8, Y14 \
	VCVTDQ2PS Y14, Y12 \
	VMULSS d, X10, X11 \
	VBROADCASTSS X11, Y11 \
	VFMADD231PS Y11, Y12, acc

#define TOK8(acc) TOK8M((R8), (R9), acc)

#define W8 \
	VMOVDQU 2(SI), Y9 \
	VPABSB Y9, Y8

// func dotQ80Q8x1(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ80Q8x1V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q80x1v:
	TESTQ CX, CX
	JZ q80x1vdone
	HALFS(0, X10)
	W8
	TOK8(Y0)
	ADDQ $34, SI
	ADDQ $32, R8
	ADDQ $4, R9
	DECQ CX
	JMP q80x1v
q80x1vdone:
	REDUCE(Y0, X0, X1, X4, 0)
	VZEROUPPER
	RET

// func dotQ80Q8x4(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ80Q8x4V(SB), NOSPLIT, $0-64
	ARGS
	STRIDES3
	ZERO
q80x4v:
	TESTQ CX, CX
	JZ q80x4vdone
	HALFS(0, X10)
	W8
	TOK8M((R8), (R9), Y0)
	TOK8M((R8)(R11*1), (R9)(R12*1), Y1)
	TOK8M((R8)(R11*2), (R9)(R12*2), Y2)
	TOK8M((R8)(R13*1), (R9)(BX*1), Y3)
	ADDQ $34, SI
	ADDQ $32, R8
	ADDQ $4, R9
	DECQ CX
	JMP q80x4v
q80x4vdone:
	STORE4
	VZEROUPPER
	RET

// Two-token variants (widths 2, 3, 6, 7): same per-token operations.
#define TOKS2 \
	TOKM((R8), (R9), (R10), Y0, X4) \
	TOKM((R8)(R11*1), (R9)(R12*1), (R10)(R12*1), Y1, X5)

#define STORE2 \
	REDUCE(Y0, X0, X8, X4, 0) \
	REDUCE(Y1, X1, X8, X5, 4)

// func dotQ41Q8x2(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ41Q8x2V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q41x2v:
	TESTQ CX, CX
	JZ q41x2vdone
	HALFS(0, X10)
	HALFS(2, X14)
	W4(4)
	TOKS2
	ADDQ $20, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q41x2v
q41x2vdone:
	STORE2
	VZEROUPPER
	RET

// func dotQ40Q8x2(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ40Q8x2V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q40x2v:
	TESTQ CX, CX
	JZ q40x2vdone
	HALFS(0, X10)
	VMULSS q8m8<>(SB), X10, X14
	W4(2)
	TOKS2
	ADDQ $18, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q40x2v
q40x2vdone:
	STORE2
	VZEROUPPER
	RET

// func dotQ80Q8x2(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ80Q8x2V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q80x2v:
	TESTQ CX, CX
	JZ q80x2vdone
	HALFS(0, X10)
	W8
	TOK8M((R8), (R9), Y0)
	TOK8M((R8)(R11*1), (R9)(R12*1), Y1)
	ADDQ $34, SI
	ADDQ $32, R8
	ADDQ $4, R9
	DECQ CX
	JMP q80x2v
q80x2vdone:
	STORE2
	VZEROUPPER
	RET
