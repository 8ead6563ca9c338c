#include "textflag.h"
#include "neon_arm64.h"

// quantizeQ8KNEON is quantizeQ8K (q8k.go) for nb blocks of 256 with the
// same bits as the Go quantiser and quantizeQ8KAVX2 for every input, by
// the rules of quantizeQ8NEON (q8_arm64.s) applied per block of 256:
// max|x| by FMAX over the block (keeping a NaN; d is then the canonical
// NaN 0x7fc00000, as AVX2 writes it), d = amax/127, id = 1/d (0 when d is
// 0), q = FCVTNS(x*id) (to nearest, ties to even) saturated to int8 and
// clamped below at -127. Where id is not finite (d NaN, or so small that
// 1/d overflows) the Go quantiser's x*id is ±Inf or NaN for every x,
// hence INT_MIN and -127: the block is all -127. Where amax is +Inf, d is
// +Inf and id 0: q is 0 for finite x and -127 (NaN) for x = ±Inf. Then
// the sums of q per 16 (SADDLV) and per 32 as int16.
//
// Block b's 256 values go to q+b*qstride, its scale and sums to the kRec
// at recs+b*rstride (d at 0, the sums of 32 at 16, the sums of 16 at 32).
//
// Registers: R0 x, R1 blocks left, R2 q, R3 qstride, R4 the record, R5
// rstride; per block R6 the chunk's x, R7 chunks left, R9 its q, R10 its
// S32, R11 its S16, R12 the mode (0 finite, 1 amax +Inf, 2 all -127: the
// last two in a loop of their own, off the common path).

// KNARROW saturates the int32 lanes of V0..V7 to int8 in V12 (elements
// 0..15) and V13 (16..31).
#define KNARROW \
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

// KABS: |V0..V7| into V8..V15.
#define KABS \
	FABS_4S(8, 0) \
	FABS_4S(9, 1) \
	FABS_4S(10, 2) \
	FABS_4S(11, 3) \
	FABS_4S(12, 4) \
	FABS_4S(13, 5) \
	FABS_4S(14, 6) \
	FABS_4S(15, 7)

// KSTORE: the chunk's 32 values (V12, V13) to q, their two sums of 16
// and their sum of 32 to the record; the chunk pointers on.
#define KSTORE \
	FSTPQ (F12, F13), (R9) \
	SADDLV_H(14, 12) \
	SADDLV_H(15, 13) \
	VMOV V14.H[0], R13 \
	VMOV V15.H[0], R14 \
	MOVH R13, (R11) \
	MOVH R14, 2(R11) \
	ADD R14, R13, R13 \
	MOVH R13, (R10) \
	ADD $32, R9, R9 \
	ADD $4, R11, R11 \
	ADD $2, R10, R10

// func quantizeQ8KNEON(x *float32, nb int, q *int8, qstride int, recs *kRec, rstride int)
TEXT ·quantizeQ8KNEON(SB), NOSPLIT, $0-48
	MOVD x+0(FP), R0
	MOVD nb+8(FP), R1
	MOVD q+16(FP), R2
	MOVD qstride+24(FP), R3
	MOVD recs+32(FP), R4
	MOVD rstride+40(FP), R5
	FMOVS $127.0, F26
	FMOVS $1.0, F27
	VEOR V28.B16, V28.B16, V28.B16
	MOVW $0x7f800000, R8
	FMOVS R8, F29                 // +Inf
	VDUP V29.S[0], V30.S4         // +Inf in every lane
	VMOVI $0x81, V24.B16          // -127 in every byte
	CBZ R1, qkdone
qkblock:
	// amax over the block's 256 values, 32 at a time.
	MOVD R0, R6
	MOVD $8, R7
	VEOR V16.B16, V16.B16, V16.B16
qkamax:
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]
	KABS
	FMAX_4S(8, 8, 9)
	FMAX_4S(10, 10, 11)
	FMAX_4S(12, 12, 13)
	FMAX_4S(14, 14, 15)
	FMAX_4S(8, 8, 10)
	FMAX_4S(12, 12, 14)
	FMAX_4S(8, 8, 12)
	FMAX_4S(16, 16, 8)
	SUBS $1, R7, R7
	BNE qkamax
	FMAXV_S(16, 16)
	FCMPS F16, F16
	BVC qknonan
	MOVW $0x7fc00000, R8
	FMOVS R8, F16
qknonan:
	FDIVS F26, F16, F18           // d = amax/127
	FDIVS F18, F27, F20           // 1/d
	FCMPS F28, F18
	FCSELS EQ, F28, F20, F20      // id = 0 where d == 0
	FMOVS F18, (R4)
	MOVD $1, R12
	FCMPS F29, F16
	BEQ qkmode                    // amax = +Inf: d = +Inf, id = 0
	MOVD $2, R12
	FABSS F20, F22
	FCMPS F29, F22
	BPL qkmode                    // id ±Inf or NaN: all -127
	MOVD $0, R12
qkmode:
	VDUP V20.S[0], V20.S4
	MOVD R0, R6
	MOVD $8, R7
	MOVD R2, R9
	ADD $16, R4, R10
	ADD $32, R4, R11
	CBNZ R12, qkspecial
qkfinite:
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]
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
	KNARROW
	SMAX_16B(12, 12, 24)
	SMAX_16B(13, 13, 24)
	KSTORE
	SUBS $1, R7, R7
	BNE qkfinite
	B qknext
qkspecial:
	VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]
	CMP $1, R12
	BEQ qkinf
	VMOV V24.B16, V12.B16
	VMOV V24.B16, V13.B16
	B qkstore
qkinf:
	// x·0 is 0 for finite x (q = 0) and NaN for x = ±Inf (q = -127).
	KABS
	FCMEQ_4S(0, 8, 30)
	FCMEQ_4S(1, 9, 30)
	FCMEQ_4S(2, 10, 30)
	FCMEQ_4S(3, 11, 30)
	FCMEQ_4S(4, 12, 30)
	FCMEQ_4S(5, 13, 30)
	FCMEQ_4S(6, 14, 30)
	FCMEQ_4S(7, 15, 30)
	KNARROW
	AND_16B(12, 12, 24)
	AND_16B(13, 13, 24)
qkstore:
	KSTORE
	SUBS $1, R7, R7
	BNE qkspecial
qknext:
	ADD $1024, R0, R0
	ADD R3, R2, R2
	ADD R5, R4, R4
	SUBS $1, R1, R1
	BNE qkblock
qkdone:
	RET
