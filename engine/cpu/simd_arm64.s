#include "textflag.h"
#include "neon_arm64.h"

// The float kernels on arm64 (NEON), each the bit-for-bit twin of its amd64
// form in simd_amd64.s and dot4_amd64.s: the same 32 lanes of fused
// multiply-adds (lane j takes the elements 32i+j), the same reduction tree,
// the same per-element roundings. Vector operands are register numbers in
// the macros of neon_arm64.h (destination first).
//
// The AVX2 dot product keeps four 8-lane accumulators Y0..Y3 (Yk lane j
// takes element 8k+j of each 32); here eight 4-lane accumulators A0..A7
// (Am lane l takes element 4m+l), so Yk is the pair (A2k, A2k+1). AVX2
// reduces (Y0+Y1)+(Y2+Y3), then low half plus high half, then two
// horizontal adds; in A terms that is REDUCE below.

// REDUCE leaves the canonical sum of the accumulators a0..a7 in lane 0 of
// a0 (S register a0): ((a0+a2)+(a4+a6)) + ((a1+a3)+(a5+a7)) lane by lane,
// then (l0+l1)+(l2+l3).
#define REDUCE(a0, a1, a2, a3, a4, a5, a6, a7) \
	FADD_4S(a0, a0, a2) \
	FADD_4S(a1, a1, a3) \
	FADD_4S(a4, a4, a6) \
	FADD_4S(a5, a5, a7) \
	FADD_4S(a0, a0, a4) \
	FADD_4S(a1, a1, a5) \
	FADD_4S(a0, a0, a1) \
	FADDP_4S(a0, a0, a0) \
	FADDP_S(a0, a0)

#define ZERO8(a0, a1, a2, a3, a4, a5, a6, a7) \
	VEOR a0.B16, a0.B16, a0.B16 \
	VEOR a1.B16, a1.B16, a1.B16 \
	VEOR a2.B16, a2.B16, a2.B16 \
	VEOR a3.B16, a3.B16, a3.B16 \
	VEOR a4.B16, a4.B16, a4.B16 \
	VEOR a5.B16, a5.B16, a5.B16 \
	VEOR a6.B16, a6.B16, a6.B16 \
	VEOR a7.B16, a7.B16, a7.B16

// FMA4 adds the products of V0..V3 (weights) and x0..x0+3 into a..a+3.
#define FMA4(a, x0) \
	FMLA_4S(a, 0, x0) \
	FMLA_4S(a+1, 1, x0+1) \
	FMLA_4S(a+2, 2, x0+2) \
	FMLA_4S(a+3, 3, x0+3)

// The fused float kernels (dot4_amd64.s): 16 weights of a row at a time
// widened into V0..V3 (WF32, WF16, WBF16), multiplied into the
// accumulators of 1 or 2 tokens. R0 the row, R1 token 0's x, R2 token 1's.

#define WF32 \
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]

#define WF16 \
	VLD1.P 32(R0), [V4.H8, V5.H8] \
	FCVTL_4S(0, 4) \
	FCVTL2_4S(1, 4) \
	FCVTL_4S(2, 5) \
	FCVTL2_4S(3, 5)

// A bfloat16 is the top half of a float32: SHLL by 16 is exact, NaN
// payloads included.
#define WBF16 \
	VLD1.P 32(R0), [V4.H8, V5.H8] \
	SHLL_4S(0, 4) \
	SHLL2_4S(1, 4) \
	SHLL_4S(2, 5) \
	SHLL2_4S(3, 5)

// TOK adds 16 elements of the token at ptr times V0..V3 into a..a+3.
#define TOK(ptr, a) \
	VLD1.P 64(ptr), [V8.S4, V9.S4, V10.S4, V11.S4] \
	FMA4(a, 8)

// DOT2 is the 2-token kernel for the widening W: accumulators V16..V23
// (token 0) and V24..V31 (token 1).
#define DOT2(W, name) \
	MOVD w+0(FP), R0 \
	MOVD x+8(FP), R1 \
	MOVD xstride+16(FP), R2 \
	ADD R1, R2, R2 \
	MOVD n+24(FP), R3 \
	MOVD out+32(FP), R4 \
	ZERO8(V16, V17, V18, V19, V20, V21, V22, V23) \
	ZERO8(V24, V25, V26, V27, V28, V29, V30, V31) \
name: \
	W \
	TOK(R1, 16) \
	TOK(R2, 24) \
	W \
	TOK(R1, 20) \
	TOK(R2, 28) \
	SUBS $32, R3, R3 \
	BNE name \
	REDUCE(16, 17, 18, 19, 20, 21, 22, 23) \
	REDUCE(24, 25, 26, 27, 28, 29, 30, 31) \
	FMOVS F16, 0(R4) \
	FMOVS F24, 4(R4) \
	RET

#define DOT1(W, name) \
	MOVD w+0(FP), R0 \
	MOVD x+8(FP), R1 \
	MOVD n+24(FP), R3 \
	MOVD out+32(FP), R4 \
	ZERO8(V16, V17, V18, V19, V20, V21, V22, V23) \
name: \
	W \
	TOK(R1, 16) \
	W \
	TOK(R1, 20) \
	SUBS $32, R3, R3 \
	BNE name \
	REDUCE(16, 17, 18, 19, 20, 21, 22, 23) \
	FMOVS F16, 0(R4) \
	RET

// func dotNEON(a, b *float32, n int) float32
// n is a multiple of 32 (at least 32): Dot's SIMD part.
TEXT ·dotNEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	ZERO8(V16, V17, V18, V19, V20, V21, V22, V23)
dotloop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R1), [V12.S4, V13.S4, V14.S4, V15.S4]
	FMLA_4S(16, 0, 8)
	FMLA_4S(17, 1, 9)
	FMLA_4S(18, 2, 10)
	FMLA_4S(19, 3, 11)
	FMLA_4S(20, 4, 12)
	FMLA_4S(21, 5, 13)
	FMLA_4S(22, 6, 14)
	FMLA_4S(23, 7, 15)
	SUBS $32, R2, R2
	BNE dotloop
	REDUCE(16, 17, 18, 19, 20, 21, 22, 23)
	FMOVS F16, ret+24(FP)
	RET

// func dot3NEON(w, x0, x1, x2 *float32, n int, out *[3]float32)
// Three dotNEONs of w, reading w once: token k's accumulators are
// V(8+8k)..V(15+8k).
TEXT ·dot3NEON(SB), NOSPLIT, $0-48
	MOVD w+0(FP), R0
	MOVD x0+8(FP), R1
	MOVD x1+16(FP), R2
	MOVD x2+24(FP), R3
	MOVD n+32(FP), R4
	MOVD out+40(FP), R5
	ZERO8(V8, V9, V10, V11, V12, V13, V14, V15)
	ZERO8(V16, V17, V18, V19, V20, V21, V22, V23)
	ZERO8(V24, V25, V26, V27, V28, V29, V30, V31)
d3loop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMA4(8, 4)
	VLD1.P 64(R2), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMA4(16, 4)
	VLD1.P 64(R3), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMA4(24, 4)
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMA4(12, 4)
	VLD1.P 64(R2), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMA4(20, 4)
	VLD1.P 64(R3), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMA4(28, 4)
	SUBS $32, R4, R4
	BNE d3loop
	REDUCE(8, 9, 10, 11, 12, 13, 14, 15)
	REDUCE(16, 17, 18, 19, 20, 21, 22, 23)
	REDUCE(24, 25, 26, 27, 28, 29, 30, 31)
	FMOVS F8, 0(R5)
	FMOVS F16, 4(R5)
	FMOVS F24, 8(R5)
	RET

// func dot2F32N(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot2F32N(SB), NOSPLIT, $0-40
	DOT2(WF32, d2f32loop)

// func dot2F16N(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot2F16N(SB), NOSPLIT, $0-40
	DOT2(WF16, d2f16loop)

// func dot2BF16N(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot2BF16N(SB), NOSPLIT, $0-40
	DOT2(WBF16, d2bf16loop)

// func dot1F16N(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot1F16N(SB), NOSPLIT, $0-40
	DOT1(WF16, d1f16loop)

// func dot1BF16N(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot1BF16N(SB), NOSPLIT, $0-40
	DOT1(WBF16, d1bf16loop)

// func dotRowsNEON(q, k *float32, kstride, rows, n int, scale float32, out *float32)
// out[r] = dotNEON(q, row r of k, n) * scale (rows kstride bytes apart).
TEXT ·dotRowsNEON(SB), NOSPLIT, $0-56
	MOVD q+0(FP), R0
	MOVD k+8(FP), R1
	MOVD kstride+16(FP), R2
	MOVD rows+24(FP), R3
	MOVD n+32(FP), R4
	FMOVS scale+40(FP), F24
	MOVD out+48(FP), R5
	CBZ R3, drdone
drrow:
	MOVD R0, R6
	MOVD R1, R7
	MOVD R4, R8
	ZERO8(V16, V17, V18, V19, V20, V21, V22, V23)
drloop:
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R7), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R7), [V12.S4, V13.S4, V14.S4, V15.S4]
	FMLA_4S(16, 0, 8)
	FMLA_4S(17, 1, 9)
	FMLA_4S(18, 2, 10)
	FMLA_4S(19, 3, 11)
	FMLA_4S(20, 4, 12)
	FMLA_4S(21, 5, 13)
	FMLA_4S(22, 6, 14)
	FMLA_4S(23, 7, 15)
	SUBS $32, R8, R8
	BNE drloop
	REDUCE(16, 17, 18, 19, 20, 21, 22, 23)
	FMULS F24, F16, F16
	FMOVS.P F16, 4(R5)
	ADD R2, R1, R1
	SUBS $1, R3, R3
	BNE drrow
drdone:
	RET

// func wsumNEON(out, v *float32, vstride int, w *float32, rows, n int)
// out[i] = fma(w[r], v[r][i], out[i]) for r = 0..rows-1 in order (rows
// vstride bytes apart, n a multiple of 32), 32 outputs in V0..V7.
TEXT ·wsumNEON(SB), NOSPLIT, $0-48
	MOVD out+0(FP), R0
	MOVD v+8(FP), R1
	MOVD vstride+16(FP), R2
	MOVD w+24(FP), R3
	MOVD rows+32(FP), R4
	MOVD n+40(FP), R5
	CBZ R4, wsdone
wschunk:
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	ADD $64, R0, R9
	VLD1 (R9), [V4.S4, V5.S4, V6.S4, V7.S4]
	MOVD R1, R6
	MOVD R3, R7
	MOVD R4, R8
wsrow:
	VLD1R.P 4(R7), [V24.S4]
	VLD1 (R6), [V16.S4, V17.S4, V18.S4, V19.S4]
	ADD $64, R6, R9
	VLD1 (R9), [V20.S4, V21.S4, V22.S4, V23.S4]
	FMLA_4S(0, 16, 24)
	FMLA_4S(1, 17, 24)
	FMLA_4S(2, 18, 24)
	FMLA_4S(3, 19, 24)
	FMLA_4S(4, 20, 24)
	FMLA_4S(5, 21, 24)
	FMLA_4S(6, 22, 24)
	FMLA_4S(7, 23, 24)
	ADD R2, R6, R6
	SUBS $1, R8, R8
	BNE wsrow
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	ADD $128, R1, R1
	SUBS $32, R5, R5
	BNE wschunk
wsdone:
	RET

// func axpyNEON(y, x *float32, a float32, n int)   // n multiple of 8
// y[i] = fma(a, x[i], y[i]).
TEXT ·axpyNEON(SB), NOSPLIT, $0-32
	MOVD y+0(FP), R0
	MOVD x+8(FP), R1
	FMOVS a+16(FP), F16
	VDUP V16.S[0], V16.S4
	MOVD n+24(FP), R2
axloop32:
	CMP $32, R2
	BLT axloop8
	VLD1 (R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	ADD $64, R0, R9
	VLD1 (R9), [V4.S4, V5.S4, V6.S4, V7.S4]
	VLD1.P 64(R1), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R1), [V12.S4, V13.S4, V14.S4, V15.S4]
	FMLA_4S(0, 8, 16)
	FMLA_4S(1, 9, 16)
	FMLA_4S(2, 10, 16)
	FMLA_4S(3, 11, 16)
	FMLA_4S(4, 12, 16)
	FMLA_4S(5, 13, 16)
	FMLA_4S(6, 14, 16)
	FMLA_4S(7, 15, 16)
	VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	SUB $32, R2, R2
	B axloop32
axloop8:
	CBZ R2, axdone
	VLD1 (R0), [V0.S4, V1.S4]
	VLD1.P 32(R1), [V8.S4, V9.S4]
	FMLA_4S(0, 8, 16)
	FMLA_4S(1, 9, 16)
	VST1.P [V0.S4, V1.S4], 32(R0)
	SUB $8, R2, R2
	B axloop8
axdone:
	RET

// func f16NEON(dst *float32, src *uint16, n int)   // n multiple of 8
TEXT ·f16NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	CBZ R2, f16done
f16loop:
	VLD1.P 16(R1), [V0.H8]
	FCVTL_4S(1, 0)
	FCVTL2_4S(2, 0)
	VST1.P [V1.S4, V2.S4], 32(R0)
	SUBS $8, R2, R2
	BNE f16loop
f16done:
	RET

// func bf16NEON(dst *float32, src *uint16, n int)   // n multiple of 8
TEXT ·bf16NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	CBZ R2, bf16done
bf16loop:
	VLD1.P 16(R1), [V0.H8]
	SHLL_4S(1, 0)
	SHLL2_4S(2, 0)
	VST1.P [V1.S4, V2.S4], 32(R0)
	SUBS $8, R2, R2
	BNE bf16loop
bf16done:
	RET

// HALFD broadcasts the f16 at (ptr) as float32 into the 4 lanes of vr
// (register number v).
#define HALFD(ptr, vr, v) \
	VLD1R (ptr), [vr.H8] \
	FCVTL_4S(v, v)

// STORE8 writes V16..V23 (32 floats) to R0 and advances it.
#define STORE8 \
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R0) \
	VST1.P [V20.S4, V21.S4, V22.S4, V23.S4], 64(R0)

// WIDEN32 turns the 32 int8 values in V2 (elements 0..15) and V3 (16..31)
// into floats in V16..V23, through int16 and int32 (exact).
#define WIDEN32 \
	SXTL_8H(4, 2) \
	SXTL2_8H(5, 2) \
	SXTL_8H(6, 3) \
	SXTL2_8H(7, 3) \
	SXTL_4S(16, 4) \
	SXTL2_4S(17, 4) \
	SXTL_4S(18, 5) \
	SXTL2_4S(19, 5) \
	SXTL_4S(20, 6) \
	SXTL2_4S(21, 6) \
	SXTL_4S(22, 7) \
	SXTL2_4S(23, 7) \
	SCVTF_4S(16, 16) \
	SCVTF_4S(17, 17) \
	SCVTF_4S(18, 18) \
	SCVTF_4S(19, 19) \
	SCVTF_4S(20, 20) \
	SCVTF_4S(21, 21) \
	SCVTF_4S(22, 22) \
	SCVTF_4S(23, 23)

// NIB splits the 16 nibble bytes at off(R1) into V2 (low nibbles:
// elements 0..15) and V3 (high nibbles: 16..31); V31 holds 0x0f bytes.
#define NIB(off) \
	FMOVQ off(R1), F1 \
	AND_16B(2, 1, 31) \
	USHR_16B_4(3, 1)

// MUL8(d): V16..V23 *= V(d).
#define MUL8(d) \
	FMUL_4S(16, 16, d) \
	FMUL_4S(17, 17, d) \
	FMUL_4S(18, 18, d) \
	FMUL_4S(19, 19, d) \
	FMUL_4S(20, 20, d) \
	FMUL_4S(21, 21, d) \
	FMUL_4S(22, 22, d) \
	FMUL_4S(23, 23, d)

// MULADD8 stores q·d rounded, then + m rounded, for the 32 values q in
// V16..V23, d in V8 and m in V9: the reference dequantiser's two roundings
// (Q4_1; MULADD41 in simd_amd64.s).
#define MULADD8 \
	MUL8(8) \
	FADD_4S(16, 16, 9) \
	FADD_4S(17, 17, 9) \
	FADD_4S(18, 18, 9) \
	FADD_4S(19, 19, 9) \
	FADD_4S(20, 20, 9) \
	FADD_4S(21, 21, 9) \
	FADD_4S(22, 22, 9) \
	FADD_4S(23, 23, 9) \
	STORE8

// func dequantQ40NEON(dst *float32, src *byte, nblocks int)
// Q4_0 blocks: x = (q-8)·d, q-8 exact in the integers (so +0 for q = 8,
// and a negative d gives -0, as the reference does), one rounding.
TEXT ·dequantQ40NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD nblocks+16(FP), R2
	VMOVI $15, V31.B16
	VMOVI $8, V30.B16
	CBZ R2, q40done
q40loop:
	HALFD(R1, V8, 8)
	NIB(2)
	VSUB V30.B16, V2.B16, V2.B16
	VSUB V30.B16, V3.B16, V3.B16
	WIDEN32
	MUL8(8)
	STORE8
	ADD $18, R1, R1
	SUBS $1, R2, R2
	BNE q40loop
q40done:
	RET

// func dequantQ41NEON(dst *float32, src *byte, nblocks int)
// Q4_1 blocks: x = q·d + m, each rounded (as the AVX2 form).
TEXT ·dequantQ41NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD nblocks+16(FP), R2
	VMOVI $15, V31.B16
	CBZ R2, q41done
q41loop:
	HALFD(R1, V8, 8)
	ADD $2, R1, R3
	HALFD(R3, V9, 9)
	NIB(4)
	WIDEN32
	MULADD8
	ADD $20, R1, R1
	SUBS $1, R2, R2
	BNE q41loop
q41done:
	RET

// func dequantQ80NEON(dst *float32, src *byte, nblocks int)
// Q8_0 blocks: x = d·q.
TEXT ·dequantQ80NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD nblocks+16(FP), R2
	CBZ R2, q80done
q80loop:
	HALFD(R1, V8, 8)
	FMOVQ 2(R1), F2
	FMOVQ 18(R1), F3
	WIDEN32
	MUL8(8)
	STORE8
	ADD $34, R1, R1
	SUBS $1, R2, R2
	BNE q80loop
q80done:
	RET
