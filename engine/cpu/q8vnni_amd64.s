#include "textflag.h"

// VPDPBUSD (AVX-512 VNNI on YMM registers) variants of the integer kernels
// of q8_amd64.s. Every token's accumulators see exactly the operations of the
// AVX2 kernels, in the same order (the int32 lane sums are the same exact
// integers: no int16 saturation is reachable, |w| <= 128, |x| <= 127), so
// every result is bit-identical to them, whatever the width.
//
// What differs is how the per-block scalars are fetched, so that tokens 2-4
// of a pass cost as little as possible next to the weight stream: the
// activations' scales d_x and sums s_x come from the transposed copies of
// Input (dT, sT: the 4 tokens of a pass adjacent for each block), so one
// VMULPS forms d_w*d_x for 4 tokens and one VFMADD231PS adds m_w*s_x to 4
// offset accumulators; a lane is then spread with VPERMPS (port 5, off the
// ports the dot products use). The nibbles of a block are unpacked once into
// Y8 for all tokens (VBROADCASTI128, then one variable shift and one AND).
//
// Arguments: w weight row, nb blocks, qx 8-bit activations of token 0 (tokens
// qstride bytes apart), dx, sx = &dT[t0], &sT[t0] (blocks dstride bytes
// apart; 4 floats are always readable there), out 1, 2 or 4 floats.
//
// Registers: SI weight block, R8 qx of token 0 (R11 = qstride, R13 =
// 3*qstride), R9 dx, R10 sx, R12 dstride, CX blocks left, DI out.
// Y0..Y3 accumulators, X4 the 4 offset accumulators (lane k = token k),
// Y8 weights (u8 or |w|), Y9 sign source (Q8_0) / unpack temp, Y10 d_w
// broadcast, X11 d_w*d_x of the 4 tokens, Y12 dot temp, Y13 scale temp,
// X14 m_w broadcast, Y15 nibble mask, Y5 shift counts, Y6 Y7 Y16 lane
// indexes 1, 2, 3.

DATA v8nib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA v8nib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA v8nib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA v8nib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL v8nib<>(SB), RODATA|NOPTR, $32

// Shift counts per quadword: the low 16 bytes keep the low nibbles (elements
// 0..15), the high 16 bytes the high nibbles (elements 16..31).
DATA v8shift<>+0(SB)/8, $0
DATA v8shift<>+8(SB)/8, $0
DATA v8shift<>+16(SB)/8, $4
DATA v8shift<>+24(SB)/8, $4
GLOBL v8shift<>(SB), RODATA|NOPTR, $32

DATA v8idx1<>+0(SB)/8, $0x0000000100000001
DATA v8idx1<>+8(SB)/8, $0x0000000100000001
DATA v8idx1<>+16(SB)/8, $0x0000000100000001
DATA v8idx1<>+24(SB)/8, $0x0000000100000001
GLOBL v8idx1<>(SB), RODATA|NOPTR, $32

DATA v8idx2<>+0(SB)/8, $0x0000000200000002
DATA v8idx2<>+8(SB)/8, $0x0000000200000002
DATA v8idx2<>+16(SB)/8, $0x0000000200000002
DATA v8idx2<>+24(SB)/8, $0x0000000200000002
GLOBL v8idx2<>(SB), RODATA|NOPTR, $32

DATA v8idx3<>+0(SB)/8, $0x0000000300000003
DATA v8idx3<>+8(SB)/8, $0x0000000300000003
DATA v8idx3<>+16(SB)/8, $0x0000000300000003
DATA v8idx3<>+24(SB)/8, $0x0000000300000003
GLOBL v8idx3<>(SB), RODATA|NOPTR, $32

// -8 in four lanes: Q4_0's m_w = -8*d_w (exact).
DATA v8m8<>+0(SB)/4, $0xc1000000
DATA v8m8<>+4(SB)/4, $0xc1000000
DATA v8m8<>+8(SB)/4, $0xc1000000
DATA v8m8<>+12(SB)/4, $0xc1000000
GLOBL v8m8<>(SB), RODATA|NOPTR, $16

#define ARGS \
	MOVQ w+0(FP), SI \
	MOVQ nb+8(FP), CX \
	MOVQ qx+16(FP), R8 \
	MOVQ dx+24(FP), R9 \
	MOVQ sx+32(FP), R10 \
	MOVQ qstride+40(FP), R11 \
	MOVQ dstride+48(FP), R12 \
	MOVQ out+56(FP), DI \
	LEAQ (R11)(R11*2), R13 \
	VMOVDQU v8nib<>(SB), Y15 \
	VMOVDQU v8shift<>(SB), Y5 \
	VMOVDQU v8idx1<>(SB), Y6 \
	VMOVDQU v8idx2<>(SB), Y7 \
	VMOVDQU32 v8idx3<>(SB), Y16

#define ZERO \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4

// Q41S: d_w (Y10), m_w (X14), d_w*d_x (X11), offsets += m_w*s_x.
#define Q41S \
	MOVL (SI), AX \
	VMOVD AX, X10 \
	VCVTPH2PS X10, X10 \
	VPERMILPS $0x55, X10, X14 \
	VBROADCASTSS X10, Y10 \
	VMULPS (R9), X10, X11 \
	VFMADD231PS (R10), X14, X4

// Q40S: as Q41S with m_w = -8*d_w.
#define Q40S \
	MOVWLZX (SI), AX \
	VMOVD AX, X10 \
	VCVTPH2PS X10, X10 \
	VBROADCASTSS X10, Y10 \
	VMULPS v8m8<>(SB), X10, X14 \
	VMULPS (R9), X10, X11 \
	VFMADD231PS (R10), X14, X4

// Q80S: d_w (Y10), d_w*d_x (X11).
#define Q80S \
	MOVWLZX (SI), AX \
	VMOVD AX, X10 \
	VCVTPH2PS X10, X10 \
	VBROADCASTSS X10, Y10 \
	VMULPS (R9), X10, X11

// Q41S1, Q40S1, Q80S1: the one-token forms (scalar products in lane 0, no
// broadcasts: a shorter dependency chain per block).
#define Q41S1 \
	MOVL (SI), AX \
	VMOVD AX, X10 \
	VCVTPH2PS X10, X10 \
	VMOVSHDUP X10, X14 \
	VMULSS (R9), X10, X11 \
	VFMADD231SS (R10), X14, X4

#define Q40S1 \
	MOVWLZX (SI), AX \
	VMOVD AX, X10 \
	VCVTPH2PS X10, X10 \
	VMULSS v8m8<>(SB), X10, X14 \
	VMULSS (R9), X10, X11 \
	VFMADD231SS (R10), X14, X4

#define Q80S1 \
	MOVWLZX (SI), AX \
	VMOVD AX, X10 \
	VCVTPH2PS X10, X10 \
	VMULSS (R9), X10, X11

// W4 unpacks the 16 nibble bytes at off(SI) into Y8 (32 u8).
#define W4(off) \
	VBROADCASTI128 off(SI), Y9 \
	VPSRLVQ Y5, Y9, Y9 \
	VPAND Y15, Y9, Y8

// W8: |w| in Y8, w (signs) in Y9.
#define W8 \
	VMOVDQU 2(SI), Y9 \
	VPABSB Y9, Y8

// SCALE puts token k's d_w*d_x in all lanes of Y13.
#define SCALE0 VBROADCASTSS X11, Y13
#define SCALE1 VPERMPS Y11, Y6, Y13
#define SCALE2 VPERMPS Y11, Y7, Y13
#define SCALE3 VPERMPS Y11, Y16, Y13

// T4 accumulates one token of a 4-bit block (q its activations).
#define T4(q, SCALE, acc) \
	VPXOR Y12, Y12, Y12 \
	VPDPBUSD q, Y8, Y12 \
	VCVTDQ2PS Y12, Y12 \
	SCALE \
	VFMADD231PS Y13, Y12, acc

// T8 accumulates one token of a Q8_0 block.
#define T8(q, SCALE, acc) \
	VMOVDQU q, Y12 \
	VPSIGNB Y9, Y12, Y12 \
	VPXOR Y14, Y14, Y14 \
	VPDPBUSD Y12, Y8, Y14 \
	VCVTDQ2PS Y14, Y12 \
	SCALE \
	VFMADD231PS Y13, Y12, acc

#define T4x1 T4((R8), SCALE0, Y0)
#define T4x2 T4x1 \
	T4((R8)(R11*1), SCALE1, Y1)
#define T4x4 T4x2 \
	T4((R8)(R11*2), SCALE2, Y2) \
	T4((R8)(R13*1), SCALE3, Y3)

#define T8x1 T8((R8), SCALE0, Y0)
#define T8x2 T8x1 \
	T8((R8)(R11*1), SCALE1, Y1)
#define T8x4 T8x2 \
	T8((R8)(R11*2), SCALE2, Y2) \
	T8((R8)(R13*1), SCALE3, Y3)

// REDUCE stores the horizontal sum of acc plus offset lane k to off(DI),
// in the AVX2 kernels' order.
#define REDUCE0(acc, accx, off) \
	VEXTRACTF128 $1, acc, X8 \
	VADDPS X8, accx, accx \
	VHADDPS accx, accx, accx \
	VHADDPS accx, accx, accx \
	VADDSS X4, accx, accx \
	MOVSS accx, off(DI)

#define REDUCEK(acc, accx, k, off) \
	VEXTRACTF128 $1, acc, X8 \
	VADDPS X8, accx, accx \
	VHADDPS accx, accx, accx \
	VHADDPS accx, accx, accx \
	VPERMILPS $k, X4, X9 \
	VADDSS X9, accx, accx \
	MOVSS accx, off(DI)

#define STORE1 REDUCE0(Y0, X0, 0)
#define STORE2 STORE1 \
	REDUCEK(Y1, X1, 1, 4)
#define STORE4 STORE2 \
	REDUCEK(Y2, X2, 2, 8) \
	REDUCEK(Y3, X3, 3, 12)

// func dotQ41Q8x1V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ41Q8x1V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
	TESTQ CX, CX
	JZ q41x1vdone
q41x1v:
	Q41S1
	W4(4)
	T4x1
	ADDQ $20, SI
	ADDQ $32, R8
	ADDQ R12, R9
	ADDQ R12, R10
	DECQ CX
	JNZ q41x1v
q41x1vdone:
	STORE1
	VZEROUPPER
	RET

// func dotQ41Q8x2V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ41Q8x2V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
	TESTQ CX, CX
	JZ q41x2vdone
q41x2v:
	Q41S
	W4(4)
	T4x2
	ADDQ $20, SI
	ADDQ $32, R8
	ADDQ R12, R9
	ADDQ R12, R10
	DECQ CX
	JNZ q41x2v
q41x2vdone:
	STORE2
	VZEROUPPER
	RET

// func dotQ41Q8x4V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ41Q8x4V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
	TESTQ CX, CX
	JZ q41x4vdone
q41x4v:
	Q41S
	W4(4)
	T4x4
	ADDQ $20, SI
	ADDQ $32, R8
	ADDQ R12, R9
	ADDQ R12, R10
	DECQ CX
	JNZ q41x4v
q41x4vdone:
	STORE4
	VZEROUPPER
	RET

// func dotQ40Q8x1V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ40Q8x1V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
	TESTQ CX, CX
	JZ q40x1vdone
q40x1v:
	Q40S1
	W4(2)
	T4x1
	ADDQ $18, SI
	ADDQ $32, R8
	ADDQ R12, R9
	ADDQ R12, R10
	DECQ CX
	JNZ q40x1v
q40x1vdone:
	STORE1
	VZEROUPPER
	RET

// func dotQ40Q8x2V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ40Q8x2V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
	TESTQ CX, CX
	JZ q40x2vdone
q40x2v:
	Q40S
	W4(2)
	T4x2
	ADDQ $18, SI
	ADDQ $32, R8
	ADDQ R12, R9
	ADDQ R12, R10
	DECQ CX
	JNZ q40x2v
q40x2vdone:
	STORE2
	VZEROUPPER
	RET

// func dotQ40Q8x4V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ40Q8x4V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
	TESTQ CX, CX
	JZ q40x4vdone
q40x4v:
	Q40S
	W4(2)
	T4x4
	ADDQ $18, SI
	ADDQ $32, R8
	ADDQ R12, R9
	ADDQ R12, R10
	DECQ CX
	JNZ q40x4v
q40x4vdone:
	STORE4
	VZEROUPPER
	RET

// func dotQ80Q8x1V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ80Q8x1V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
	TESTQ CX, CX
	JZ q80x1vdone
q80x1v:
	Q80S1
	W8
	T8x1
	ADDQ $34, SI
	ADDQ $32, R8
	ADDQ R12, R9
	ADDQ R12, R10
	DECQ CX
	JNZ q80x1v
q80x1vdone:
	STORE1
	VZEROUPPER
	RET

// func dotQ80Q8x2V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ80Q8x2V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
	TESTQ CX, CX
	JZ q80x2vdone
q80x2v:
	Q80S
	W8
	T8x2
	ADDQ $34, SI
	ADDQ $32, R8
	ADDQ R12, R9
	ADDQ R12, R10
	DECQ CX
	JNZ q80x2v
q80x2vdone:
	STORE2
	VZEROUPPER
	RET

// func dotQ80Q8x4V(w *byte, nb int, qx *int8, dx, sx *float32, qstride, dstride int, out *float32)
TEXT ·dotQ80Q8x4V(SB), NOSPLIT, $0-64
	ARGS
	ZERO
	TESTQ CX, CX
	JZ q80x4vdone
q80x4v:
	Q80S
	W8
	T8x4
	ADDQ $34, SI
	ADDQ $32, R8
	ADDQ R12, R9
	ADDQ R12, R10
	DECQ CX
	JNZ q80x4v
q80x4vdone:
	STORE4
	VZEROUPPER
	RET

