#include "textflag.h"

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
