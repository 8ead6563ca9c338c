#include "textflag.h"
#include "neon_arm64.h"

// The activations on arm64, four at a time in packed doubles (two
// registers of two), with exactly the operations of the canonical scalar
// code (canon.go: exp64, tanh64) and of their amd64 twins (simd_amd64.s:
// siluMulAVX2, expShiftedAVX2, geluMulAVX2), so every result is the Go
// expression's bits on both architectures. Go's own math.Exp on arm64 is a
// different algorithm; it is never used here.

// The exponential's constants (each double twice, one 16-byte vector),
// loaded into V17..V31 by EXPCONST.
DATA expc<>+0(SB)/8, $1.4426950408889634073599246810018920	// V17 log2(e)
DATA expc<>+8(SB)/8, $1.4426950408889634073599246810018920
DATA expc<>+16(SB)/8, $0.69314718055966295651160180568695068359375	// V18 ln2, high part
DATA expc<>+24(SB)/8, $0.69314718055966295651160180568695068359375
DATA expc<>+32(SB)/8, $0.28235290563031577122588448175013436025525412068e-12	// V19 ln2, low part
DATA expc<>+40(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA expc<>+48(SB)/8, $0.0625	// V20
DATA expc<>+56(SB)/8, $0.0625
DATA expc<>+64(SB)/8, $2.4801587301587301587e-5	// V21 1/8!
DATA expc<>+72(SB)/8, $2.4801587301587301587e-5
DATA expc<>+80(SB)/8, $1.9841269841269841270e-4	// V22 1/7!
DATA expc<>+88(SB)/8, $1.9841269841269841270e-4
DATA expc<>+96(SB)/8, $1.3888888888888888889e-3	// V23
DATA expc<>+104(SB)/8, $1.3888888888888888889e-3
DATA expc<>+112(SB)/8, $8.3333333333333333333e-3	// V24
DATA expc<>+120(SB)/8, $8.3333333333333333333e-3
DATA expc<>+128(SB)/8, $4.1666666666666666667e-2	// V25
DATA expc<>+136(SB)/8, $4.1666666666666666667e-2
DATA expc<>+144(SB)/8, $1.6666666666666666667e-1	// V26
DATA expc<>+152(SB)/8, $1.6666666666666666667e-1
DATA expc<>+160(SB)/8, $0.5	// V27
DATA expc<>+168(SB)/8, $0.5
DATA expc<>+176(SB)/8, $1.0	// V28 1/1!
DATA expc<>+184(SB)/8, $1.0
DATA expc<>+192(SB)/8, $1.0	// V29 one
DATA expc<>+200(SB)/8, $1.0
DATA expc<>+208(SB)/8, $2.0	// V30 two
DATA expc<>+216(SB)/8, $2.0
DATA expc<>+224(SB)/8, $1023	// V31 the exponent bias (int64)
DATA expc<>+232(SB)/8, $1023
// Limits of the kernels' fast path, and GELU's constants (loaded as needed).
DATA expc<>+240(SB)/8, $1022.0	// |y| below: 2^e is normal
DATA expc<>+248(SB)/8, $1022.0
DATA expc<>+256(SB)/8, $-1022.0
DATA expc<>+264(SB)/8, $-1022.0
DATA expc<>+272(SB)/8, $-1022.5	// y below: e < -1022
DATA expc<>+280(SB)/8, $-1022.5
DATA expc<>+288(SB)/8, $0x3fa6e4e26d4801f7	// 0.044715
DATA expc<>+296(SB)/8, $0x3fa6e4e26d4801f7
DATA expc<>+304(SB)/8, $0x3fe9884533d43651	// sqrt(2/pi)
DATA expc<>+312(SB)/8, $0x3fe9884533d43651
DATA expc<>+320(SB)/8, $0xbfeedc5baafd6f4b	// tanh P0
DATA expc<>+328(SB)/8, $0xbfeedc5baafd6f4b
DATA expc<>+336(SB)/8, $0xc058d26a0e26682d	// P1
DATA expc<>+344(SB)/8, $0xc058d26a0e26682d
DATA expc<>+352(SB)/8, $0xc0993ac030580563	// P2
DATA expc<>+360(SB)/8, $0xc0993ac030580563
DATA expc<>+368(SB)/8, $0x405c33f28a581b86	// Q0
DATA expc<>+376(SB)/8, $0x405c33f28a581b86
DATA expc<>+384(SB)/8, $0x40a176fa0e5535fa	// Q1
DATA expc<>+392(SB)/8, $0x40a176fa0e5535fa
DATA expc<>+400(SB)/8, $0x40b2ec102442040c	// Q2
DATA expc<>+408(SB)/8, $0x40b2ec102442040c
DATA expc<>+416(SB)/8, $0x3fe4000000000000	// 0.625
DATA expc<>+424(SB)/8, $0x3fe4000000000000
DATA expc<>+432(SB)/8, $0x404601e678fc457b	// MAXLOG/2
DATA expc<>+440(SB)/8, $0x404601e678fc457b
DATA expc<>+448(SB)/8, $0x8000000000000000	// sign bit
DATA expc<>+456(SB)/8, $0x8000000000000000
GLOBL expc<>(SB), RODATA|NOPTR, $464

#define C1022 240
#define CM1022 256
#define CM10225 272
#define GK 288
#define GC 304
#define GP0 320
#define GP1 336
#define GP2 352
#define GQ0 368
#define GQ1 384
#define GQ2 400
#define G0625 416
#define GHALFMAX 432
#define GSIGN 448

// EXPCONST loads the constants into V17..V31 and R5 = the table.
#define EXPCONST \
	MOVD $expc<>(SB), R5 \
	VLD1 (R5), [V17.D2, V18.D2, V19.D2, V20.D2] \
	ADD $64, R5, R6 \
	VLD1 (R6), [V21.D2, V22.D2, V23.D2, V24.D2] \
	ADD $128, R5, R6 \
	VLD1 (R6), [V25.D2, V26.D2, V27.D2, V28.D2] \
	ADD $192, R5, R6 \
	VLD1 (R6), [V29.D2, V30.D2, V31.D2]

// CONST(v, off) loads the table's constant at off into V(v) (vr the same
// register by name).
#define CONST(vr, off) \
	FMOVQ off(R5), vr

// EXPCORE is exp64's main path (canon.go; math.Exp's amd64 FMA steps) on
// two doubles: v holds x on entry and e^x/2^e on exit, ef = float(e);
// t1, t2 are temporaries. r = x - ef·ln2 in two fused steps, r/16, the
// Taylor polynomial by fused Horner steps, four squarings q·(q+2), the
// last fused with the final +1.
#define EXPCORE(v, ef, t1, t2) \
	FMLS_2D(v, ef, 18) \
	FMLS_2D(v, ef, 19) \
	FMUL_2D(v, v, 20) \
	MOVV(t1, 22) \
	FMLA_2D(t1, 21, v) \
	MOVV(t2, 23) \
	FMLA_2D(t2, t1, v) \
	MOVV(t1, 24) \
	FMLA_2D(t1, t2, v) \
	MOVV(t2, 25) \
	FMLA_2D(t2, t1, v) \
	MOVV(t1, 26) \
	FMLA_2D(t1, t2, v) \
	MOVV(t2, 27) \
	FMLA_2D(t2, t1, v) \
	MOVV(t1, 28) \
	FMLA_2D(t1, t2, v) \
	FMUL_2D(v, v, t1) \
	FADD_2D(t1, v, 30) \
	FMUL_2D(v, v, t1) \
	FADD_2D(t1, v, 30) \
	FMUL_2D(v, v, t1) \
	FADD_2D(t1, v, 30) \
	FMUL_2D(v, v, t1) \
	FADD_2D(t1, v, 30) \
	MOVV(t2, 29) \
	FMLA_2D(t2, v, t1) \
	MOVV(v, t2)

// EXPSCALE multiplies v by 2^e for the int64 exponents e (in the normal
// range; e is overwritten).
#define EXPSCALE(v, e) \
	ADD_2D(e, e, 31) \
	SHL_2D_52(e, e) \
	FMUL_2D(v, v, e)

// ALLSET branches to bail unless every bit of V(m) is set (R7, R8 scratch).
#define ALLSET(mr, bail) \
	VMOV mr.D[0], R7 \
	VMOV mr.D[1], R8 \
	AND R8, R7, R7 \
	CMN $1, R7 \
	BNE bail

// siluMulNEON: g[i] = SiLU(g[i])·u[i], SiLU(x) = x/(1+float32(exp64(-x))),
// four at a time. A group where some |(-x)·log2(e)| is not below 1022 (so
// 2^e might leave the normal range, or x is NaN) stops the kernel: it
// returns how many elements it did and the caller finishes that group
// with the Go expression (the same bits wherever both apply).
//
// func siluMulNEON(gate, u *float32, n int) int   // n a multiple of 4
TEXT ·siluMulNEON(SB), NOSPLIT, $0-32
	MOVD gate+0(FP), R0
	MOVD u+8(FP), R1
	MOVD n+16(FP), R2
	MOVD ZR, R3
	EXPCONST
	CONST(F16, C1022)
	FMOVS $1.0, F15
	VDUP V15.S[0], V15.S4
siluloop:
	CMP R2, R3
	BGE siludone
	FMOVQ (R0), F0
	FNEG_4S(1, 0)
	FCVTL_2D(2, 1)
	FCVTL2_2D(3, 1)
	FMUL_2D(4, 2, 17)
	FMUL_2D(5, 3, 17)
	FACGT_2D(6, 16, 4)
	FACGT_2D(7, 16, 5)
	AND_16B(6, 6, 7)
	ALLSET(V6, siludone)
	FCVTNS_2D(8, 4)
	FCVTNS_2D(9, 5)
	SCVTF_2D(10, 8)
	SCVTF_2D(11, 9)
	EXPCORE(2, 10, 12, 13)
	EXPCORE(3, 11, 12, 13)
	EXPSCALE(2, 8)
	EXPSCALE(3, 9)
	FCVTN_2S(12, 2)
	FCVTN2_4S(12, 3)
	FADD_4S(12, 12, 15)
	FDIV_4S(0, 0, 12)
	FMOVQ (R1), F13
	FMUL_4S(0, 0, 13)
	FMOVQ F0, (R0)
	ADD $16, R0, R0
	ADD $16, R1, R1
	ADD $4, R3, R3
	B siluloop
siludone:
	MOVD R3, ret+24(FP)
	RET

// expShiftedNEON: x[i] = float32(exp64(float64(x[i]-m))), four at a time.
// Lanes whose exponent e = round((x-m)·log2(e)) is below -1022 are +0 (the
// float32 of anything below 2^-1021), computed with y clamped at -1022 and
// then cleared; a group with a NaN or some y not below 1022 stops the
// kernel, which returns how many elements it did.
//
// func expShiftedNEON(x *float32, m float32, n int) int   // n a multiple of 4
TEXT ·expShiftedNEON(SB), NOSPLIT, $0-32
	MOVD x+0(FP), R0
	FMOVS m+8(FP), F14
	VDUP V14.S[0], V14.S4
	MOVD n+16(FP), R2
	MOVD ZR, R3
	EXPCONST
	CONST(F15, C1022)
	CONST(F16, CM1022)
	CONST(F1, CM10225)
exploop:
	CMP R2, R3
	BGE expdone
	FMOVQ (R0), F0
	FSUB_4S(0, 0, 14)
	FCVTL_2D(2, 0)
	FCVTL2_2D(3, 0)
	FMUL_2D(4, 2, 17)
	FMUL_2D(5, 3, 17)
	FCMGT_2D(6, 15, 4)
	FCMGT_2D(7, 15, 5)
	AND_16B(6, 6, 7)
	ALLSET(V6, expdone)
	FCMGT_2D(6, 1, 4)
	FCMGT_2D(7, 1, 5)
	UZP1_4S(6, 6, 7)
	FMAX_2D(4, 4, 16)
	FMAX_2D(5, 5, 16)
	FCVTNS_2D(8, 4)
	FCVTNS_2D(9, 5)
	SCVTF_2D(10, 8)
	SCVTF_2D(11, 9)
	EXPCORE(2, 10, 12, 13)
	EXPCORE(3, 11, 12, 13)
	EXPSCALE(2, 8)
	EXPSCALE(3, 9)
	FCVTN_2S(12, 2)
	FCVTN2_4S(12, 3)
	BIC_16B(12, 12, 6)
	FMOVQ F12, (R0)
	ADD $16, R0, R0
	ADD $4, R3, R3
	B exploop
expdone:
	MOVD R3, ret+24(FP)
	RET

// GELUHALF computes 0.5·v·(1+tanh64(b)), b = c·(v + 0.044715·v·v·v), for
// the two doubles v in V(v), with exactly GELUTanh's operations: tanh64's
// three ranges are computed for both lanes and blended (the rational
// form, the exponential form where |b| >= 0.625, ±1 where |b| > MAXLOG/2,
// b itself where b is ±0). The result replaces v; V3..V16 are scratch.
#define GELUHALF(v) \
	CONST(F3, GK) \
	FMUL_2D(3, 3, v) \
	FMUL_2D(3, 3, v) \
	FMUL_2D(3, 3, v) \
	FADD_2D(3, v, 3) \
	CONST(F4, GC) \
	FMUL_2D(3, 3, 4) \
	FABS_2D(5, 3) \
	FMUL_2D(6, 3, 3) \
	CONST(F7, GP0) \
	FMUL_2D(7, 6, 7) \
	CONST(F8, GP1) \
	FADD_2D(7, 7, 8) \
	FMUL_2D(7, 7, 6) \
	CONST(F8, GP2) \
	FADD_2D(7, 7, 8) \
	CONST(F8, GQ0) \
	FADD_2D(8, 6, 8) \
	FMUL_2D(8, 8, 6) \
	CONST(F9, GQ1) \
	FADD_2D(8, 8, 9) \
	FMUL_2D(8, 8, 6) \
	CONST(F9, GQ2) \
	FADD_2D(8, 8, 9) \
	FMUL_2D(9, 3, 6) \
	FMUL_2D(9, 9, 7) \
	FDIV_2D(9, 9, 8) \
	FADD_2D(10, 3, 9) \
	FADD_2D(11, 5, 5) \
	FMUL_2D(12, 11, 17) \
	FCVTNS_2D(13, 12) \
	SCVTF_2D(14, 13) \
	EXPCORE(11, 14, 15, 16) \
	EXPSCALE(11, 13) \
	FADD_2D(11, 11, 29) \
	FDIV_2D(11, 30, 11) \
	FSUB_2D(11, 29, 11) \
	CONST(F12, GSIGN) \
	AND_16B(12, 12, 3) \
	EOR_16B(11, 11, 12) \
	CONST(F13, G0625) \
	FCMGE_2D(13, 5, 13) \
	BIT_16B(10, 11, 13) \
	CONST(F13, GHALFMAX) \
	FCMGT_2D(13, 5, 13) \
	ORR_16B(12, 12, 29) \
	BIT_16B(10, 12, 13) \
	VEOR V13.B16, V13.B16, V13.B16 \
	FCMEQ_2D(13, 3, 13) \
	BIT_16B(10, 3, 13) \
	FADD_2D(10, 10, 29) \
	FMUL_2D(v, v, 27) \
	FMUL_2D(v, v, 10)

// geluMulNEON: gate[i] = GELUTanh(gate[i])·u[i], four at a time, for
// every element (no special case leaves the kernel: tanh64's exponential
// is only used where its argument 2|b| is in range, as on amd64).
//
// func geluMulNEON(gate, u *float32, n int)   // n a multiple of 4
TEXT ·geluMulNEON(SB), NOSPLIT, $0-24
	MOVD gate+0(FP), R0
	MOVD u+8(FP), R1
	MOVD n+16(FP), R2
	EXPCONST
	CBZ R2, geludone
geluloop:
	FMOVQ (R0), F0
	FCVTL_2D(1, 0)
	FCVTL2_2D(2, 0)
	GELUHALF(1)
	GELUHALF(2)
	FCVTN_2S(3, 1)
	FCVTN2_4S(3, 2)
	FMOVQ (R1), F4
	FMUL_4S(3, 3, 4)
	FMOVQ F3, (R0)
	ADD $16, R0, R0
	ADD $16, R1, R1
	SUBS $4, R2, R2
	BNE geluloop
geludone:
	RET
