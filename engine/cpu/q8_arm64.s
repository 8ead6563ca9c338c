#include "textflag.h"
#include "neon_arm64.h"

// quantizeQ8NEON is quantizeQ8 (q8.go) for nb whole blocks with the same
// bits as the Go quantiser and quantizeQ8AVX2 for every input: |x| max by
// FMAX (which, like Go's max, keeps a NaN; the block's d is then the
// canonical NaN 0x7fc00000, as AVX2 writes it), d = amax/127, id = 1/d
// (0 when d is 0), q = FCVTNS(x*id) (to nearest, ties to even) saturated
// to int8 and clamped below at -127, qs = Σq, s = d·qs. Where id is not
// finite (d NaN, or so small that 1/d overflows) every x*id is ±Inf or
// NaN, which the Go quantiser turns into INT_MIN and then -127: the block
// is all -127 (FCVTNS would saturate +Inf to +127 instead). Where amax is
// +Inf, d is +Inf and id 0: x·0 is 0, or NaN (so -127) for x = ±Inf.
//
// Block b's 32 values go to q+b*qstride, its scalars to d, s and qs +
// b*sstride bytes.
//
// NARROW saturates the int32 lanes of V0..V7 to int8 in V12 (elements
// 0..15) and V13 (16..31).
#define NARROW \
	SQXTN_4H(8, 0) \
	SQXTN2_8H(8, 1) \
	SQXTN_4H(9, 2) \
	SQXTN2_8H(9, 3) \
	SQXTN_4H(10, 4) \
	SQXTN2_8H(10, 5) \
	SQXTN_4H(11, 6) \
	SQXTN2_8H(11, 7) \
	SQXTN_8B(12, 8) \
	SQXTN2_16B(12, 9) \
	SQXTN_8B(13, 10) \
	SQXTN2_16B(13, 11)

// func quantizeQ8NEON(x *float32, nb int, q *int8, qstride int, d, s *float32, qs *int32, sstride int)
TEXT ·quantizeQ8NEON(SB), NOSPLIT, $0-64
	MOVD x+0(FP), R0
	MOVD nb+8(FP), R1
	MOVD q+16(FP), R2
	MOVD qstride+24(FP), R3
	MOVD d+32(FP), R4
	MOVD s+40(FP), R5
	MOVD qs+48(FP), R6
	MOVD sstride+56(FP), R7
	FMOVS $127.0, F26
	FMOVS $1.0, F27
	VEOR V28.B16, V28.B16, V28.B16
	MOVW $0x7f800000, R8
	FMOVS R8, F29                 // +Inf
	VMOVI $0x81, V24.B16          // -127 in every byte
	CBZ R1, qzdone
qzloop:
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4]
	FABS_4S(8, 0)
	FABS_4S(9, 1)
	FABS_4S(10, 2)
	FABS_4S(11, 3)
	FABS_4S(12, 4)
	FABS_4S(13, 5)
	FABS_4S(14, 6)
	FABS_4S(15, 7)
	FMAX_4S(8, 8, 9)
	FMAX_4S(10, 10, 11)
	FMAX_4S(12, 12, 13)
	FMAX_4S(14, 14, 15)
	FMAX_4S(8, 8, 10)
	FMAX_4S(12, 12, 14)
	FMAX_4S(8, 8, 12)
	FMAXV_S(16, 8)
	FCMPS F16, F16
	BVC qznonan
	MOVW $0x7fc00000, R8
	FMOVS R8, F16
qznonan:
	FDIVS F26, F16, F18           // d = amax/127
	FDIVS F18, F27, F20           // 1/d
	FCMPS F28, F18
	FCSELS EQ, F28, F20, F20      // id = 0 where d == 0
	FCMPS F29, F16
	BEQ qzinf                     // amax = +Inf: d = +Inf, id = 0
	FABSS F20, F22
	FCMPS F29, F22
	BMI qzfinite                  // |id| < +Inf (false for NaN)
	VMOV V24.B16, V12.B16
	VMOV V24.B16, V13.B16
	B qzsum
qzinf:
	// x·0 is 0 for finite x (q = 0) and NaN for x = ±Inf (q = -127).
	VDUP V29.S[0], V30.S4
	FABS_4S(8, 0)
	FABS_4S(9, 1)
	FABS_4S(10, 2)
	FABS_4S(11, 3)
	FABS_4S(12, 4)
	FABS_4S(13, 5)
	FABS_4S(14, 6)
	FABS_4S(15, 7)
	FCMEQ_4S(0, 8, 30)
	FCMEQ_4S(1, 9, 30)
	FCMEQ_4S(2, 10, 30)
	FCMEQ_4S(3, 11, 30)
	FCMEQ_4S(4, 12, 30)
	FCMEQ_4S(5, 13, 30)
	FCMEQ_4S(6, 14, 30)
	FCMEQ_4S(7, 15, 30)
	NARROW
	AND_16B(12, 12, 24)
	AND_16B(13, 13, 24)
	B qzsum
qzfinite:
	VDUP V20.S[0], V20.S4
	FMUL_4S(0, 0, 20)
	FMUL_4S(1, 1, 20)
	FMUL_4S(2, 2, 20)
	FMUL_4S(3, 3, 20)
	FMUL_4S(4, 4, 20)
	FMUL_4S(5, 5, 20)
	FMUL_4S(6, 6, 20)
	FMUL_4S(7, 7, 20)
	FCVTNS_4S(0, 0)
	FCVTNS_4S(1, 1)
	FCVTNS_4S(2, 2)
	FCVTNS_4S(3, 3)
	FCVTNS_4S(4, 4)
	FCVTNS_4S(5, 5)
	FCVTNS_4S(6, 6)
	FCVTNS_4S(7, 7)
	NARROW
	SMAX_16B(12, 12, 24)
	SMAX_16B(13, 13, 24)
qzsum:
	SADDLV_H(14, 12)
	SADDLV_H(15, 13)
	VMOV V14.H[0], R8
	VMOV V15.H[0], R9
	MOVH R8, R8
	MOVH R9, R9
	ADDW R9, R8, R8
	SCVTFWS R8, F25
	FMULS F25, F18, F25           // s = d·qs
	FSTPQ (F12, F13), (R2)
	FMOVS F18, (R4)
	FMOVS F25, (R5)
	MOVW R8, (R6)
	ADD R3, R2, R2
	ADD R7, R4, R4
	ADD R7, R5, R5
	ADD R7, R6, R6
	SUBS $1, R1, R1
	BNE qzloop
qzdone:
	RET
