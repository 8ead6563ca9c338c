#include "textflag.h"

// func dotAVX2(a, b *float32, n int) float32
// n is a multiple of 32. Four 8-lane FMA accumulators, lane j of accumulator
// k taking elements 32i+8k+j; reduced in a fixed tree.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
dotloop:
	CMPQ CX, $32
	JL dotdone
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP dotloop
dotdone:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

DATA nibmask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nibmask<>(SB), RODATA|NOPTR, $16

DATA minus8<>+0(SB)/4, $0xc1000000
GLOBL minus8<>(SB), RODATA|NOPTR, $4

// NIBBLES expands the 16 bytes at off(SI) into 32 floats in Y3..Y6 (element
// i < 16 the low nibble of byte i, element i+16 its high nibble) and applies
// x = q*Y8 + Y9 with one rounding (FMA).
#define NIBBLES(off) \
	VMOVDQU off(SI), X0 \
	VPAND X15, X0, X1 \
	VPSRLW $4, X0, X2 \
	VPAND X15, X2, X2 \
	VPMOVZXBD X1, Y3 \
	VPSRLDQ $8, X1, X1 \
	VPMOVZXBD X1, Y4 \
	VPMOVZXBD X2, Y5 \
	VPSRLDQ $8, X2, X2 \
	VPMOVZXBD X2, Y6 \
	VCVTDQ2PS Y3, Y3 \
	VCVTDQ2PS Y4, Y4 \
	VCVTDQ2PS Y5, Y5 \
	VCVTDQ2PS Y6, Y6 \
	VFMADD213PS Y9, Y8, Y3 \
	VFMADD213PS Y9, Y8, Y4 \
	VFMADD213PS Y9, Y8, Y5 \
	VFMADD213PS Y9, Y8, Y6 \
	VMOVUPS Y3, (DI) \
	VMOVUPS Y4, 32(DI) \
	VMOVUPS Y5, 64(DI) \
	VMOVUPS Y6, 96(DI)

// HALF broadcasts the f16 at off(SI) as float32 into all lanes of Y.
#define HALF(off, X, Y) \
	MOVWLZX off(SI), AX \
	VMOVD AX, X \
	VCVTPH2PS X, X \
	VBROADCASTSS X, Y

// func dequantQ40AVX2(dst *float32, src *byte, nblocks int)
// Q4_0 blocks (f16 d, 16 nibble bytes): x = q*d + (-8d), which equals the
// rounded d*(q-8) exactly (-8d is exact, the FMA rounds once).
TEXT ·dequantQ40AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nblocks+16(FP), CX
	VMOVDQU nibmask<>(SB), X15
	VBROADCASTSS minus8<>(SB), Y14
q40loop:
	TESTQ CX, CX
	JZ q40done
	HALF(0, X8, Y8)
	VMULPS Y14, Y8, Y9
	NIBBLES(2)
	ADDQ $128, DI
	ADDQ $18, SI
	DECQ CX
	JMP q40loop
q40done:
	VZEROUPPER
	RET

// func dequantQ41AVX2(dst *float32, src *byte, nblocks int)
// Q4_1 blocks (f16 d, f16 m, 16 nibble bytes): x = q*d + m.
TEXT ·dequantQ41AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nblocks+16(FP), CX
	VMOVDQU nibmask<>(SB), X15
q41loop:
	TESTQ CX, CX
	JZ q41done
	HALF(0, X8, Y8)
	HALF(2, X9, Y9)
	NIBBLES(4)
	ADDQ $128, DI
	ADDQ $20, SI
	DECQ CX
	JMP q41loop
q41done:
	VZEROUPPER
	RET

// func dequantQ80AVX2(dst *float32, src *byte, nblocks int)
// Q8_0 blocks (f16 d, 32 int8): x = q*d.
TEXT ·dequantQ80AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nblocks+16(FP), CX
q80loop:
	TESTQ CX, CX
	JZ q80done
	HALF(0, X8, Y8)
	VPMOVSXBD 2(SI), Y3
	VPMOVSXBD 10(SI), Y4
	VPMOVSXBD 18(SI), Y5
	VPMOVSXBD 26(SI), Y6
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VMULPS Y8, Y3, Y3
	VMULPS Y8, Y4, Y4
	VMULPS Y8, Y5, Y5
	VMULPS Y8, Y6, Y6
	VMOVUPS Y3, (DI)
	VMOVUPS Y4, 32(DI)
	VMOVUPS Y5, 64(DI)
	VMOVUPS Y6, 96(DI)
	ADDQ $128, DI
	ADDQ $34, SI
	DECQ CX
	JMP q80loop
q80done:
	VZEROUPPER
	RET

// func dot3AVX2(w, x0, x1, x2 *float32, n int, out *[3]float32)
// Three dot products of w with x0, x1, x2 (n a multiple of 32), each with
// exactly the accumulation of dotAVX2: reading w once serves three tokens.
TEXT ·dot3AVX2(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ x0+8(FP), R8
	MOVQ x1+16(FP), R9
	MOVQ x2+24(FP), R10
	MOVQ n+32(FP), CX
	MOVQ out+40(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
d3loop:
	CMPQ CX, $32
	JL d3done
	VMOVUPS (SI), Y12
	VFMADD231PS (R8), Y12, Y0
	VFMADD231PS (R9), Y12, Y4
	VFMADD231PS (R10), Y12, Y8
	VMOVUPS 32(SI), Y12
	VFMADD231PS 32(R8), Y12, Y1
	VFMADD231PS 32(R9), Y12, Y5
	VFMADD231PS 32(R10), Y12, Y9
	VMOVUPS 64(SI), Y12
	VFMADD231PS 64(R8), Y12, Y2
	VFMADD231PS 64(R9), Y12, Y6
	VFMADD231PS 64(R10), Y12, Y10
	VMOVUPS 96(SI), Y12
	VFMADD231PS 96(R8), Y12, Y3
	VFMADD231PS 96(R9), Y12, Y7
	VFMADD231PS 96(R10), Y12, Y11
	ADDQ $128, SI
	ADDQ $128, R8
	ADDQ $128, R9
	ADDQ $128, R10
	SUBQ $32, CX
	JMP d3loop
d3done:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	MOVSS X0, (DI)
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	VADDPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS X5, X4, X4
	VHADDPS X4, X4, X4
	VHADDPS X4, X4, X4
	MOVSS X4, 4(DI)
	VADDPS Y9, Y8, Y8
	VADDPS Y11, Y10, Y10
	VADDPS Y10, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VADDPS X9, X8, X8
	VHADDPS X8, X8, X8
	VHADDPS X8, X8, X8
	MOVSS X8, 8(DI)
	VZEROUPPER
	RET

// func f16AVX2(dst *float32, src *uint16, n int)   // n multiple of 8
TEXT ·f16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
f16loop:
	CMPQ CX, $8
	JL f16done
	VCVTPH2PS (SI), Y0
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP f16loop
f16done:
	VZEROUPPER
	RET

// func bf16AVX2(dst *float32, src *uint16, n int)   // n multiple of 8
// A bfloat16 is the top half of a float32: zero-extend each to 32 bits and
// shift left by 16 (exact, NaN payloads included).
TEXT ·bf16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
bf16loop32:
	CMPQ CX, $32
	JL bf16loop8
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPMOVZXWD 32(SI), Y2
	VPMOVZXWD 48(SI), Y3
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VPSLLD $16, Y2, Y2
	VPSLLD $16, Y3, Y3
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP bf16loop32
bf16loop8:
	CMPQ CX, $8
	JL bf16done
	VPMOVZXWD (SI), Y0
	VPSLLD $16, Y0, Y0
	VMOVDQU Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP bf16loop8
bf16done:
	VZEROUPPER
	RET

// func axpyAVX2(y, x *float32, a float32, n int)   // n multiple of 8
// y[i] = fma(a, x[i], y[i]) (one rounding).
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	VBROADCASTSS a+16(FP), Y0
	MOVQ n+24(FP), CX
axloop32:
	CMPQ CX, $32
	JL axloop8
	VMOVUPS (DI), Y1
	VMOVUPS 32(DI), Y2
	VMOVUPS 64(DI), Y3
	VMOVUPS 96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $128, DI
	ADDQ $128, SI
	SUBQ $32, CX
	JMP axloop32
axloop8:
	CMPQ CX, $8
	JL axdone
	VMOVUPS (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, DI
	ADDQ $32, SI
	SUBQ $8, CX
	JMP axloop8
axdone:
	VZEROUPPER
	RET

// func dotRowsAVX2(q, k *float32, kstride, rows, n int, scale float32, out *float32)
// out[r] = dotAVX2(q, k + r*kstride bytes, n) * scale for r < rows (n a
// multiple of 32): each row is exactly Dot's computation followed by one
// multiply, as Attend does it, without a call per row.
TEXT ·dotRowsAVX2(SB), NOSPLIT, $0-56
	MOVQ q+0(FP), R8
	MOVQ k+8(FP), DI
	MOVQ kstride+16(FP), R9
	MOVQ rows+24(FP), R10
	MOVQ n+32(FP), R11
	VMOVSS scale+40(FP), X15
	MOVQ out+48(FP), DX
	TESTQ R10, R10
	JZ drdone
drrow:
	MOVQ R8, SI
	MOVQ DI, BX
	MOVQ R11, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
drloop:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (BX), Y4, Y0
	VFMADD231PS 32(BX), Y5, Y1
	VFMADD231PS 64(BX), Y6, Y2
	VFMADD231PS 96(BX), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, BX
	SUBQ $32, CX
	JNZ drloop
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VMULSS X15, X0, X0
	VMOVSS X0, (DX)
	ADDQ $4, DX
	ADDQ R9, DI
	DECQ R10
	JNZ drrow
drdone:
	VZEROUPPER
	RET

// func wsumAVX2(out, v *float32, vstride int, w *float32, rows, n int)
// out[i] = fma(w[r], v[r][i], out[i]) for r = 0..rows-1 in order (v's rows
// vstride bytes apart, n a multiple of 32): exactly rows successive Axpy
// calls, with 32 outputs at a time held in registers.
TEXT ·wsumAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ v+8(FP), R8
	MOVQ vstride+16(FP), R9
	MOVQ w+24(FP), R10
	MOVQ rows+32(FP), R11
	MOVQ n+40(FP), CX
	TESTQ R11, R11
	JZ wsdone
wschunk:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	MOVQ R8, SI
	MOVQ R10, BX
	MOVQ R11, DX
wsrow:
	VBROADCASTSS (BX), Y4
	VFMADD231PS (SI), Y4, Y0
	VFMADD231PS 32(SI), Y4, Y1
	VFMADD231PS 64(SI), Y4, Y2
	VFMADD231PS 96(SI), Y4, Y3
	ADDQ $4, BX
	ADDQ R9, SI
	DECQ DX
	JNZ wsrow
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, R8
	SUBQ $32, CX
	JNZ wschunk
wsdone:
	VZEROUPPER
	RET
