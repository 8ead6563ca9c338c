#include "textflag.h"

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
	VPMADDUBSW q, Y8, Y12 \
	VPMADDWD Y13, Y12, Y12 \
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
TEXT ·dotQ41Q8x1(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q41x1:
	TESTQ CX, CX
	JZ q41x1done
	HALFS(0, X10)
	HALFS(2, X14)
	W4(4)
	TOK4(Y0, X4)
	ADDQ $20, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q41x1
q41x1done:
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
TEXT ·dotQ41Q8x4(SB), NOSPLIT, $0-64
	ARGS
	STRIDES3
	ZERO
q41x4:
	TESTQ CX, CX
	JZ q41x4done
	HALFS(0, X10)
	HALFS(2, X14)
	W4(4)
	TOKS4
	ADDQ $20, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q41x4
q41x4done:
	STORE4
	VZEROUPPER
	RET

// Q4_0: m_w = -8*d_w (exact).
// func dotQ40Q8x1(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ40Q8x1(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q40x1:
	TESTQ CX, CX
	JZ q40x1done
	HALFS(0, X10)
	VMULSS q8m8<>(SB), X10, X14
	W4(2)
	TOK4(Y0, X4)
	ADDQ $18, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q40x1
q40x1done:
	REDUCE(Y0, X0, X1, X4, 0)
	VZEROUPPER
	RET

// func dotQ40Q8x4(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ40Q8x4(SB), NOSPLIT, $0-64
	ARGS
	STRIDES3
	ZERO
q40x4:
	TESTQ CX, CX
	JZ q40x4done
	HALFS(0, X10)
	VMULSS q8m8<>(SB), X10, X14
	W4(2)
	TOKS4
	ADDQ $18, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q40x4
q40x4done:
	STORE4
	VZEROUPPER
	RET

// TOK8 accumulates one token of a Q8_0 block (x at q, d_x at d): |w| in
// Y8, w (sign) in Y9.
#define TOK8M(q, d, acc) \
	VMOVDQU q, Y12 \
	VPSIGNB Y9, Y12, Y12 \
	VPMADDUBSW Y12, Y8, Y12 \
	VPMADDWD Y13, Y12, Y12 \
	VCVTDQ2PS Y12, Y12 \
	VMULSS d, X10, X11 \
	VBROADCASTSS X11, Y11 \
	VFMADD231PS Y11, Y12, acc

#define TOK8(acc) TOK8M((R8), (R9), acc)

#define W8 \
	VMOVDQU 2(SI), Y9 \
	VPABSB Y9, Y8

// func dotQ80Q8x1(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ80Q8x1(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q80x1:
	TESTQ CX, CX
	JZ q80x1done
	HALFS(0, X10)
	W8
	TOK8(Y0)
	ADDQ $34, SI
	ADDQ $32, R8
	ADDQ $4, R9
	DECQ CX
	JMP q80x1
q80x1done:
	REDUCE(Y0, X0, X1, X4, 0)
	VZEROUPPER
	RET

// func dotQ80Q8x4(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ80Q8x4(SB), NOSPLIT, $0-64
	ARGS
	STRIDES3
	ZERO
q80x4:
	TESTQ CX, CX
	JZ q80x4done
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
	JMP q80x4
q80x4done:
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
TEXT ·dotQ41Q8x2(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q41x2:
	TESTQ CX, CX
	JZ q41x2done
	HALFS(0, X10)
	HALFS(2, X14)
	W4(4)
	TOKS2
	ADDQ $20, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q41x2
q41x2done:
	STORE2
	VZEROUPPER
	RET

// func dotQ40Q8x2(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ40Q8x2(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q40x2:
	TESTQ CX, CX
	JZ q40x2done
	HALFS(0, X10)
	VMULSS q8m8<>(SB), X10, X14
	W4(2)
	TOKS2
	ADDQ $18, SI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ CX
	JMP q40x2
q40x2done:
	STORE2
	VZEROUPPER
	RET

// func dotQ80Q8x2(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ80Q8x2(SB), NOSPLIT, $0-64
	ARGS
	ZERO
q80x2:
	TESTQ CX, CX
	JZ q80x2done
	HALFS(0, X10)
	W8
	TOK8M((R8), (R9), Y0)
	TOK8M((R8)(R11*1), (R9)(R12*1), Y1)
	ADDQ $34, SI
	ADDQ $32, R8
	ADDQ $4, R9
	DECQ CX
	JMP q80x2
q80x2done:
	STORE2
	VZEROUPPER
	RET

// quantizeQ8AVX2 is quantizeQ8 (q8.go) for nb whole blocks, with the same
// result bits for every finite input (and, for a block with a NaN, NaN d
// and s, q all -127, as the Go code gives): |x| max by VMAXPS, d = amax/127,
// id = 1/d (0 when d is 0), q = VCVTPS2DQ(x*id) (round to nearest even;
// out of range or NaN gives INT_MIN) clamped to ±127, qs = Σq, s = d·qs.
//
// Block b's 32 values go to q+b*qstride and its scalars to d, s and qs +
// b*sstride bytes, so a caller can write a grouped or transposed layout
// directly.
//
// func quantizeQ8AVX2(x *float32, nb int, q *int8, qstride int, d, s *float32, qs *int32, sstride int)
DATA qzabs<>+0(SB)/4, $0x7fffffff
GLOBL qzabs<>(SB), RODATA|NOPTR, $4
DATA qz127f<>+0(SB)/4, $0x42fe0000
GLOBL qz127f<>(SB), RODATA|NOPTR, $4
DATA qznan<>+0(SB)/4, $0x7fc00000
GLOBL qznan<>(SB), RODATA|NOPTR, $4
DATA qzone<>+0(SB)/4, $0x3f800000
GLOBL qzone<>(SB), RODATA|NOPTR, $4
DATA qz127<>+0(SB)/4, $127
GLOBL qz127<>(SB), RODATA|NOPTR, $4
DATA qzm127<>+0(SB)/4, $-127
GLOBL qzm127<>(SB), RODATA|NOPTR, $4
DATA qzperm<>+0(SB)/8, $0x0000000400000000
DATA qzperm<>+8(SB)/8, $0x0000000500000001
DATA qzperm<>+16(SB)/8, $0x0000000600000002
DATA qzperm<>+24(SB)/8, $0x0000000700000003
GLOBL qzperm<>(SB), RODATA|NOPTR, $32

TEXT ·quantizeQ8AVX2(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ qstride+24(FP), R11
	MOVQ d+32(FP), R8
	MOVQ s+40(FP), R9
	MOVQ qs+48(FP), R10
	MOVQ sstride+56(FP), R12
	VBROADCASTSS qzabs<>(SB), Y15
	VMOVSS qz127f<>(SB), X14
	VPBROADCASTD qz127<>(SB), Y13
	VPBROADCASTD qzm127<>(SB), Y12
	VMOVDQU qzperm<>(SB), Y11
	VMOVSS qzone<>(SB), X10
	TESTQ CX, CX
	JZ qzdone
qzloop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VANDPS Y15, Y0, Y4
	VANDPS Y15, Y1, Y5
	VANDPS Y15, Y2, Y6
	VANDPS Y15, Y3, Y7
	VMAXPS Y5, Y4, Y4
	VMAXPS Y7, Y6, Y6
	VMAXPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS X5, X4, X4
	VPERMILPS $0x4e, X4, X5
	VMAXPS X5, X4, X4
	VPERMILPS $0xb1, X4, X5
	VMAXPS X5, X4, X4
	// VMAXPS drops a NaN unless it is the second operand; Go's max keeps
	// it: a block with a NaN gets amax = NaN, so d, s are NaN and every q
	// is -127, as in the Go quantiser.
	VCMPPS $3, Y1, Y0, Y5
	VCMPPS $3, Y3, Y2, Y6
	VORPS Y6, Y5, Y5
	VPTEST Y5, Y5
	JZ qznonan
	VMOVSS qznan<>(SB), X4
qznonan:
	VDIVSS X14, X4, X8
	VDIVSS X8, X10, X9
	VXORPS X6, X6, X6
	VCMPSS $4, X6, X8, X7
	VANDPS X7, X9, X9
	VBROADCASTSS X9, Y9
	VMULPS Y9, Y0, Y0
	VMULPS Y9, Y1, Y1
	VMULPS Y9, Y2, Y2
	VMULPS Y9, Y3, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	VPMINSD Y13, Y0, Y0
	VPMINSD Y13, Y1, Y1
	VPMINSD Y13, Y2, Y2
	VPMINSD Y13, Y3, Y3
	VPMAXSD Y12, Y0, Y0
	VPMAXSD Y12, Y1, Y1
	VPMAXSD Y12, Y2, Y2
	VPMAXSD Y12, Y3, Y3
	VPADDD Y1, Y0, Y4
	VPADDD Y3, Y2, Y5
	VPADDD Y5, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD X5, X4, X4
	VPSHUFD $0x4e, X4, X5
	VPADDD X5, X4, X4
	VPSHUFD $0xb1, X4, X5
	VPADDD X5, X4, X4
	VMOVD X4, (R10)
	VCVTDQ2PS X4, X5
	VMULSS X5, X8, X5
	VMOVSS X5, (R9)
	VMOVSS X8, (R8)
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD Y0, Y11, Y0
	VMOVDQU Y0, (DI)
	ADDQ $128, SI
	ADDQ R11, DI
	ADDQ R12, R8
	ADDQ R12, R9
	ADDQ R12, R10
	DECQ CX
	JNZ qzloop
qzdone:
	VZEROUPPER
	RET
