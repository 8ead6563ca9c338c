#include "textflag.h"

// quantizeQ8KAVX2 is quantizeQ8K (q8k.go) for nb blocks of 256, with the
// same result bits for every finite input (and, for a block holding a
// NaN, NaN d and every q -127, as the Go code gives): max|x| by VMAXPS over
// the block (a NaN anywhere, found by VCMPPS unordered, makes it NaN),
// d = amax/127, id = 1/d (0 when d is 0), q = VCVTPS2DQ(x*id) (round to
// nearest even; out of range or NaN gives INT_MIN) clamped to ±127, and
// the sums of q per 16 and per 32 as int16.
//
// Block b's 256 values go to q+b*qstride, its scale and sums to the kRec
// at recs+b*rstride (d at 0, the sums of 32 at 16, the sums of 16 at 32).
//
// func quantizeQ8KAVX2(x *float32, nb int, q *int8, qstride int, recs *kRec, rstride int)
DATA qkabs<>+0(SB)/4, $0x7fffffff
GLOBL qkabs<>(SB), RODATA|NOPTR, $4
DATA qk127f<>+0(SB)/4, $0x42fe0000
GLOBL qk127f<>(SB), RODATA|NOPTR, $4
DATA qknan<>+0(SB)/4, $0x7fc00000
GLOBL qknan<>(SB), RODATA|NOPTR, $4
DATA qkone<>+0(SB)/4, $0x3f800000
GLOBL qkone<>(SB), RODATA|NOPTR, $4
DATA qk127<>+0(SB)/4, $127
GLOBL qk127<>(SB), RODATA|NOPTR, $4
DATA qkm127<>+0(SB)/4, $-127
GLOBL qkm127<>(SB), RODATA|NOPTR, $4
DATA qkperm<>+0(SB)/8, $0x0000000400000000
DATA qkperm<>+8(SB)/8, $0x0000000500000001
DATA qkperm<>+16(SB)/8, $0x0000000600000002
DATA qkperm<>+24(SB)/8, $0x0000000700000003
GLOBL qkperm<>(SB), RODATA|NOPTR, $32

// HSUM16(a, b, r): r (a 32-bit register) = the sum of the 16 int32 lanes
// of a and b (Y4, Y5 temporaries).
#define HSUM16(a, b, r) \
	VPADDD b, a, Y4 \
	VEXTRACTI128 $1, Y4, X5 \
	VPADDD X5, X4, X4 \
	VPSHUFD $0x4e, X4, X5 \
	VPADDD X5, X4, X4 \
	VPSHUFD $0xb1, X4, X5 \
	VPADDD X5, X4, X4 \
	VMOVD X4, r

TEXT ·quantizeQ8KAVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ qstride+24(FP), R11
	MOVQ recs+32(FP), R8
	MOVQ rstride+40(FP), R12
	VBROADCASTSS qkabs<>(SB), Y15
	VMOVSS qk127f<>(SB), X14
	VPBROADCASTD qk127<>(SB), Y13
	VPBROADCASTD qkm127<>(SB), Y12
	VMOVDQU qkperm<>(SB), Y11
	VMOVSS qkone<>(SB), X10
	TESTQ CX, CX
	JZ qkdone
qkblock:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	XORQ AX, AX
qkamax:
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS 32(SI)(AX*1), Y1
	VMOVUPS 64(SI)(AX*1), Y2
	VMOVUPS 96(SI)(AX*1), Y3
	VCMPPS $3, Y1, Y0, Y6
	VCMPPS $3, Y3, Y2, Y7
	VORPS Y6, Y5, Y5
	VORPS Y7, Y5, Y5
	VANDPS Y15, Y0, Y0
	VANDPS Y15, Y1, Y1
	VANDPS Y15, Y2, Y2
	VANDPS Y15, Y3, Y3
	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VMAXPS Y0, Y4, Y4
	ADDQ $128, AX
	CMPQ AX, $1024
	JNE qkamax
	VEXTRACTF128 $1, Y4, X6
	VMAXPS X6, X4, X4
	VPERMILPS $0x4e, X4, X6
	VMAXPS X6, X4, X4
	VPERMILPS $0xb1, X4, X6
	VMAXPS X6, X4, X4
	VPTEST Y5, Y5
	JZ qknonan
	VMOVSS qknan<>(SB), X4
qknonan:
	VDIVSS X14, X4, X8
	VDIVSS X8, X10, X9
	VXORPS X6, X6, X6
	VCMPSS $4, X6, X8, X7
	VANDPS X7, X9, X9
	VBROADCASTSS X9, Y9
	VMOVSS X8, (R8)
	XORQ AX, AX
	XORQ R10, R10
	MOVQ DI, R9
qkconv:
	VMULPS (SI)(AX*1), Y9, Y0
	VMULPS 32(SI)(AX*1), Y9, Y1
	VMULPS 64(SI)(AX*1), Y9, Y2
	VMULPS 96(SI)(AX*1), Y9, Y3
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
	HSUM16(Y0, Y1, BX)
	HSUM16(Y2, Y3, DX)
	MOVW BX, 32(R8)(R10*4)
	MOVW DX, 34(R8)(R10*4)
	ADDL DX, BX
	MOVW BX, 16(R8)(R10*2)
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD Y0, Y11, Y0
	VMOVDQU Y0, (R9)
	ADDQ $32, R9
	ADDQ $128, AX
	INCQ R10
	CMPQ R10, $8
	JNE qkconv
	ADDQ $1024, SI
	ADDQ R11, DI
	ADDQ R12, R8
	DECQ CX
	JNZ qkblock
qkdone:
	VZEROUPPER
	RET
