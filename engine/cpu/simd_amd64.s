#include "textflag.h"
#include "vec_amd64.h"

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
// i < 16 the low nibble of byte i, element i+16 its high nibble), applies
// op to each (FMA40 or MULADD41) and stores them at DI.
#define NIBBLES(off, op) \
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
	op(Y3) \
	op(Y4) \
	op(Y5) \
	op(Y6) \
	VMOVUPS Y3, (DI) \
	VMOVUPS Y4, 32(DI) \
	VMOVUPS Y5, 64(DI) \
	VMOVUPS Y6, 96(DI)

// SUBMUL40: x = (q-8)*d (Q4_0): q-8 is exact (+0 for q = 8, so that a
// negative d gives -0 as the reference does), the product rounds once.
#define SUBMUL40(y) \
	VADDPS Y14, y, y \
	VMULPS Y8, y, y

// MULADD41: x = q*d rounded, then + m rounded (Q4_1): the two roundings of
// the reference dequantiser (the Go loop's float32(d*q) + m).
#define MULADD41(y) \
	VMULPS Y8, y, y \
	VADDPS Y9, y, y

// HALF broadcasts the f16 at off(SI) as float32 into all lanes of Y.
#define HALF(off, X, Y) \
	MOVWLZX off(SI), AX \
	VMOVD AX, X \
	VCVTPH2PS X, X \
	VBROADCASTSS X, Y

// func dequantQ40AVX2(dst *float32, src *byte, nblocks int)
// Q4_0 blocks (f16 d, 16 nibble bytes): x = d*(q-8).
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
	NIBBLES(2, SUBMUL40)
	ADDQ $128, DI
	ADDQ $18, SI
	DECQ CX
	JMP q40loop
q40done:
	VZEROUPPER
	RET

// func dequantQ41AVX2(dst *float32, src *byte, nblocks int)
// Q4_1 blocks (f16 d, f16 m, 16 nibble bytes): x = q*d + m, each rounded.
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
	NIBBLES(4, MULADD41)
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

// siluMulAVX2: g[i] = SiLU(g[i])·u[i], SiLU(x) = x/(1+float32(math.Exp(-x))),
// four at a time, with the exact operations of math.Exp on amd64 with FMA
// (archExp in the Go runtime's math/exp_amd64.s: the same constants, the
// same reduction, Horner steps and scaling, as packed doubles), so every
// result equals the Go expression bit for bit. A group whose exponent
// 2^e falls outside the normal range (|x| > ~708, or not finite) stops the
// kernel: it returns how many elements it did and the caller finishes that
// group with math.Exp.
//
// func siluMulAVX2(gate, u *float32, n int) int   // n a multiple of 4
VEC4(silulog2e<>, $1.4426950408889634073599246810018920)
VEC4(siluln2u<>, $0.69314718055966295651160180568695068359375)
VEC4(siluln2l<>, $0.28235290563031577122588448175013436025525412068e-12)
VEC4(silur16<>, $0.0625)
VEC4(silutwo<>, $2.0)
VEC4(siluone<>, $1.0)
VEC4(siluc8<>, $2.4801587301587301587e-5)
VEC4(siluc7<>, $1.9841269841269841270e-4)
VEC4(siluc6<>, $1.3888888888888888889e-3)
VEC4(siluc5<>, $8.3333333333333333333e-3)
VEC4(siluc4<>, $4.1666666666666666667e-2)
VEC4(siluc3<>, $1.6666666666666666667e-1)
VEC4(siluc2<>, $0.5)
VEC4(siluc1<>, $1.0)
VEC4(silu1023<>, $1023)
DATA siluelo<>+0(SB)/4, $-1022
GLOBL siluelo<>(SB), RODATA|NOPTR, $4
DATA siluehi<>+0(SB)/4, $1023
GLOBL siluehi<>(SB), RODATA|NOPTR, $4
DATA silusign<>+0(SB)/4, $0x80000000
GLOBL silusign<>(SB), RODATA|NOPTR, $4
DATA siluonef<>+0(SB)/4, $0x3f800000
GLOBL siluonef<>(SB), RODATA|NOPTR, $4

// EXPCORE is the body of math.Exp's amd64 FMA path (archExp in the Go
// runtime's math/exp_amd64.s) on packed doubles, for the kernels below: v
// holds x on entry and the mantissa part of e^x on exit, ef = float(e) with
// e = round(x·log2(e)) (VCVTPD2DQ), t a temporary (it may be ef). Y10..Y15
// hold 1, 2, 1/16, LN2L, LN2U, log2(e). EXPSCALE then multiplies v by 2^e
// for e in X3 (int32, in the normal range).
#define EXPCORE(v, ef, t) \
	VFNMADD231PD Y14, ef, v \
	VFNMADD231PD Y13, ef, v \
	VMULPD Y12, v, v \
	VMOVUPD siluc8<>(SB), t \
	VFMADD213PD siluc7<>(SB), v, t \
	VFMADD213PD siluc6<>(SB), v, t \
	VFMADD213PD siluc5<>(SB), v, t \
	VFMADD213PD siluc4<>(SB), v, t \
	VFMADD213PD siluc3<>(SB), v, t \
	VFMADD213PD siluc2<>(SB), v, t \
	VFMADD213PD siluc1<>(SB), v, t \
	VMULPD t, v, v \
	VADDPD Y11, v, t \
	VMULPD t, v, v \
	VADDPD Y11, v, t \
	VMULPD t, v, v \
	VADDPD Y11, v, t \
	VMULPD t, v, v \
	VADDPD Y11, v, t \
	VFMADD213PD Y10, t, v

#define EXPSCALE(v) \
	VPMOVSXDQ X3, Y4 \
	VPADDQ silu1023<>(SB), Y4, Y4 \
	VPSLLQ $52, Y4, Y4 \
	VMULPD Y4, v, v

TEXT ·siluMulAVX2(SB), NOSPLIT, $0-32
	MOVQ gate+0(FP), DI
	MOVQ u+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	VMOVUPD silulog2e<>(SB), Y15
	VMOVUPD siluln2u<>(SB), Y14
	VMOVUPD siluln2l<>(SB), Y13
	VMOVUPD silur16<>(SB), Y12
	VMOVUPD silutwo<>(SB), Y11
	VMOVUPD siluone<>(SB), Y10
	VPBROADCASTD siluelo<>(SB), X9
	VPBROADCASTD siluehi<>(SB), X8
	VBROADCASTSS silusign<>(SB), X7
	VBROADCASTSS siluonef<>(SB), X6
siluloop:
	CMPQ AX, CX
	JGE siludone
	VMOVUPS (DI)(AX*4), X0
	VXORPS X7, X0, X1
	VCVTPS2PD X1, Y1
	VMULPD Y15, Y1, Y2
	VCVTPD2DQY Y2, X3
	VPCMPGTD X8, X3, X4
	VPCMPGTD X3, X9, X5
	VPOR X5, X4, X4
	VPTEST X4, X4
	JNZ siludone
	VCVTDQ2PD X3, Y2
	EXPCORE(Y1, Y2, Y2)
	EXPSCALE(Y1)
	VCVTPD2PSY Y1, X1
	VADDPS X6, X1, X1
	VDIVPS X1, X0, X0
	VMULPS (SI)(AX*4), X0, X0
	VMOVUPS X0, (DI)(AX*4)
	ADDQ $4, AX
	JMP siluloop
siludone:
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

// expShiftedAVX2: x[i] = float32(math.Exp(float64(x[i]-m))), four at a
// time, with siluMulAVX2's exact copy of math.Exp (same constants and
// steps). Where math.Exp's result is below 2^-1021 (the exponent under
// -1022) the float32 is +0 whatever the double's low bits, so those lanes
// are set to 0; a group with a NaN or an exponent over 1023 stops the
// kernel, which returns how many elements it did.
//
// func expShiftedAVX2(x *float32, m float32, n int) int   // n a multiple of 4
DATA expelo<>+0(SB)/4, $-1022
GLOBL expelo<>(SB), RODATA|NOPTR, $4
DATA expehi<>+0(SB)/4, $1023
GLOBL expehi<>(SB), RODATA|NOPTR, $4

TEXT ·expShiftedAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), DI
	VBROADCASTSS m+8(FP), X7
	MOVQ n+16(FP), CX
	XORQ AX, AX
	VMOVUPD silulog2e<>(SB), Y15
	VMOVUPD siluln2u<>(SB), Y14
	VMOVUPD siluln2l<>(SB), Y13
	VMOVUPD silur16<>(SB), Y12
	VMOVUPD silutwo<>(SB), Y11
	VMOVUPD siluone<>(SB), Y10
	VPBROADCASTD expelo<>(SB), X9
	VPBROADCASTD expehi<>(SB), X8
exploop:
	CMPQ AX, CX
	JGE expdone
	VMOVUPS (DI)(AX*4), X0
	VSUBPS X7, X0, X0
	VCMPPS $3, X0, X0, X4
	VCVTPS2PD X0, Y1
	VMULPD Y15, Y1, Y2
	VCVTPD2DQY Y2, X3
	VPCMPGTD X8, X3, X5
	VPOR X5, X4, X4
	VPTEST X4, X4
	JNZ expdone
	VPCMPGTD X3, X9, X6
	VPMAXSD X9, X3, X3
	VCVTDQ2PD X3, Y2
	EXPCORE(Y1, Y2, Y2)
	EXPSCALE(Y1)
	VCVTPD2PSY Y1, X1
	VPANDN X1, X6, X1
	VMOVUPS X1, (DI)(AX*4)
	ADDQ $4, AX
	JMP exploop
expdone:
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

// geluMulAVX2: gate[i] = GELUTanh(gate[i])·u[i], four at a time in packed
// doubles with exactly the Go operations of GELUTanh and of math.Tanh (the
// pure-Go tanh: its three ranges computed for every lane and blended, the
// exponential by the same exact copy of math.Exp as siluMulAVX2, whose
// argument 2|x| is in range wherever it is used), so every result is the Go
// expression's bits as Go compiles it by default: with GOAMD64 v1 or v2 it
// does not fuse a*b+c, and neither does this (with v3 the compiler may, and
// the two could differ; geluMulRange then still sends every element here).
//
// func geluMulAVX2(gate, u *float32, n int)   // n a multiple of 4
DATA gelu0x3<>+0(SB)/4, $-1022
DATA gelu0x3<>+4(SB)/4, $-1022
DATA gelu0x3<>+8(SB)/4, $-1022
DATA gelu0x3<>+12(SB)/4, $-1022
GLOBL gelu0x3<>(SB), RODATA|NOPTR, $16
VEC4(geluhalfmaxlog<>, $0x404601e678fc457b)
VEC4(gelup0<>, $0xbfeedc5baafd6f4b)
VEC4(gelup1<>, $0xc058d26a0e26682d)
VEC4(gelup2<>, $0xc0993ac030580563)
VEC4(geluq0<>, $0x405c33f28a581b86)
VEC4(geluq1<>, $0x40a176fa0e5535fa)
VEC4(geluq2<>, $0x40b2ec102442040c)
VEC4(geluc<>, $0x3fe9884533d43651)
VEC4(geluk<>, $0x3fa6e4e26d4801f7)
VEC4(geluhalf<>, $0x3fe0000000000000)
VEC4(gelut625<>, $0x3fe4000000000000)
VEC4(geluabsmask<>, $0x7fffffffffffffff)
VEC4(gelusignmask<>, $0x8000000000000000)

TEXT ·geluMulAVX2(SB), NOSPLIT, $0-24
	MOVQ gate+0(FP), DI
	MOVQ u+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	VMOVUPD silulog2e<>(SB), Y15
	VMOVUPD siluln2u<>(SB), Y14
	VMOVUPD siluln2l<>(SB), Y13
	VMOVUPD silur16<>(SB), Y12
	VMOVUPD silutwo<>(SB), Y11
	VMOVUPD siluone<>(SB), Y10
geluloop:
	CMPQ AX, CX
	JGE geludone
	// v and b = c*(v + 0.044715*v*v*v)
	VCVTPS2PD (DI)(AX*4), Y9
	VMOVUPD geluk<>(SB), Y0
	VMULPD Y9, Y0, Y0
	VMULPD Y9, Y0, Y0
	VMULPD Y9, Y0, Y0
	VADDPD Y0, Y9, Y0
	VMULPD geluc<>(SB), Y0, Y0
	// z = |b|; the rational range: s = b*b, b + b*s*num/den
	VANDPD geluabsmask<>(SB), Y0, Y1
	VMULPD Y0, Y0, Y2
	VMULPD gelup0<>(SB), Y2, Y3
	VADDPD gelup1<>(SB), Y3, Y3
	VMULPD Y2, Y3, Y3
	VADDPD gelup2<>(SB), Y3, Y3
	VADDPD geluq0<>(SB), Y2, Y4
	VMULPD Y2, Y4, Y4
	VADDPD geluq1<>(SB), Y4, Y4
	VMULPD Y2, Y4, Y4
	VADDPD geluq2<>(SB), Y4, Y4
	VMULPD Y2, Y0, Y5
	VMULPD Y3, Y5, Y5
	VDIVPD Y4, Y5, Y5
	VADDPD Y5, Y0, Y8
	// the exponential range: 1 - 2/(Exp(2z)+1), with b's sign
	VADDPD Y1, Y1, Y2
	VMULPD Y15, Y2, Y3
	VCVTPD2DQY Y3, X3
	VCVTDQ2PD X3, Y4
	EXPCORE(Y2, Y4, Y5)
	VPMAXSD gelu0x3<>(SB), X3, X3
	EXPSCALE(Y2)
	VADDPD Y10, Y2, Y2
	VDIVPD Y2, Y11, Y2
	VSUBPD Y2, Y10, Y2
	VANDPD gelusignmask<>(SB), Y0, Y6
	VXORPD Y6, Y2, Y2
	// blend: exponential range where z >= 0.625, ±1 where z > MAXLOG/2,
	// b itself where b == 0
	VCMPPD $0x1d, gelut625<>(SB), Y1, Y7
	VBLENDVPD Y7, Y2, Y8, Y8
	VCMPPD $0x1e, geluhalfmaxlog<>(SB), Y1, Y7
	VORPD Y6, Y10, Y2
	VBLENDVPD Y7, Y2, Y8, Y8
	VXORPD Y7, Y7, Y7
	VCMPPD $0x00, Y7, Y0, Y7
	VBLENDVPD Y7, Y0, Y8, Y8
	// 0.5*v*(1+t), then times u
	VADDPD Y10, Y8, Y8
	VMULPD geluhalf<>(SB), Y9, Y9
	VMULPD Y8, Y9, Y9
	VCVTPD2PSY Y9, X0
	VMULPS (SI)(AX*4), X0, X0
	VMOVUPS X0, (DI)(AX*4)
	ADDQ $4, AX
	JMP geluloop
geludone:
	VZEROUPPER
	RET
