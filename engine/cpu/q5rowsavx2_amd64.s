#include "textflag.h"
#include "vec_amd64.h"
#include "q8rows_amd64.h"
#include "q8rowsavx2_amd64.h"

// AVX2 forms of the Q5_0 and Q5_1 row kernels of q5rows_amd64.s: the Q4_0
// and Q4_1 AVX2 kernels (q8rowsavx2_amd64.s) with the fifth bits added to
// the nibble chunks, the same canonical sums (dotref.go). The fifth bits
// without mask registers: byte m of each row's qh word is copied into the
// lane's 4 bytes (VPSHUFB), ANDed with the byte masks 1,2,4,8 (16,32,64,128)
// and compared with them (VPCMPEQB), which leaves 0xff where the bit is set,
// then ANDed with 0x10 and ORed into the chunk. The values reach 31, so a
// VPMADDUBSW pair reaches 2*31*127 = 7874 and only 4 chunks add up in int16
// (31496): each half block gets its own VPMADDWD (DOT5A).
//
// Arguments, registers and frame as in q8rowsavx2_amd64.s.

DATA q5arep0<>+0(SB)/8, $0x0404040400000000
DATA q5arep0<>+8(SB)/8, $0x0c0c0c0c08080808
DATA q5arep0<>+16(SB)/8, $0x0404040400000000
DATA q5arep0<>+24(SB)/8, $0x0c0c0c0c08080808
GLOBL q5arep0<>(SB), RODATA|NOPTR, $32

DATA q5arep1<>+0(SB)/8, $0x0505050501010101
DATA q5arep1<>+8(SB)/8, $0x0d0d0d0d09090909
DATA q5arep1<>+16(SB)/8, $0x0505050501010101
DATA q5arep1<>+24(SB)/8, $0x0d0d0d0d09090909
GLOBL q5arep1<>(SB), RODATA|NOPTR, $32

DATA q5arep2<>+0(SB)/8, $0x0606060602020202
DATA q5arep2<>+8(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA q5arep2<>+16(SB)/8, $0x0606060602020202
DATA q5arep2<>+24(SB)/8, $0x0e0e0e0e0a0a0a0a
GLOBL q5arep2<>(SB), RODATA|NOPTR, $32

DATA q5arep3<>+0(SB)/8, $0x0707070703030303
DATA q5arep3<>+8(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA q5arep3<>+16(SB)/8, $0x0707070703030303
DATA q5arep3<>+24(SB)/8, $0x0f0f0f0f0b0b0b0b
GLOBL q5arep3<>(SB), RODATA|NOPTR, $32

VEC4(q5alo<>, $0x0804020108040201)

VEC4(q5ahi<>, $0x8040201080402010)

VEC4(q5asix<>, $0x1010101010101010)

// QH5A(off): the 8 rows' qh words at off into Y0 (rows 0..3 low).
#define QH5A(off) \
	VMOVD off(R8)(BX*1), X0 \
	VPINSRD $1, off(R9)(BX*1), X0, X0 \
	VPINSRD $2, off(R10)(BX*1), X0, X0 \
	VPINSRD $3, off(R11)(BX*1), X0, X0 \
	VMOVD off(R12)(BX*1), X1 \
	VPINSRD $1, off(R13)(BX*1), X1, X1 \
	VPINSRD $2, off(R14)(BX*1), X1, X1 \
	VPINSRD $3, off(R15)(BX*1), X1, X1 \
	VINSERTI128 $1, X1, Y0, Y0

// BIT5A(mask, w): 16 into the bytes of w whose bit (mask) is set in Y1.
#define BIT5A(mask, w) \
	VPAND mask, Y1, Y2 \
	VPCMPEQB mask, Y2, Y2 \
	VPAND q5asix<>(SB), Y2, Y2 \
	VPOR Y2, w, w

// HI5A(rep, lo, hi): chunks 2m (lo) and 2m+1 (hi) get their fifth bits.
#define HI5A(rep, lo, hi) \
	VPSHUFB rep, Y0, Y1 \
	BIT5A(q5alo<>(SB), lo) \
	BIT5A(q5ahi<>(SB), hi)

#define W5A(qhoff, qsoff) \
	W4A(qsoff) \
	QH5A(qhoff) \
	HI5A(q5arep0<>(SB), Y8, Y9) \
	HI5A(q5arep1<>(SB), Y10, Y11) \
	HI5A(q5arep2<>(SB), Y12, Y13) \
	HI5A(q5arep3<>(SB), Y14, Y15)

// DOT5A leaves token t's int32 block sums for the 8 rows in Y2.
#define DOT5A(t) \
	VPBROADCASTD (t*32+0)(SI), Y0 \
	VPMADDUBSW Y0, Y8, Y2 \
	VPBROADCASTD (t*32+4)(SI), Y0 \
	VPMADDUBSW Y0, Y9, Y1 \
	VPADDW Y1, Y2, Y2 \
	VPBROADCASTD (t*32+8)(SI), Y0 \
	VPMADDUBSW Y0, Y10, Y1 \
	VPADDW Y1, Y2, Y2 \
	VPBROADCASTD (t*32+12)(SI), Y0 \
	VPMADDUBSW Y0, Y11, Y1 \
	VPADDW Y1, Y2, Y2 \
	VPMADDWD a8ones<>(SB), Y2, Y2 \
	VPBROADCASTD (t*32+16)(SI), Y0 \
	VPMADDUBSW Y0, Y12, Y3 \
	VPBROADCASTD (t*32+20)(SI), Y0 \
	VPMADDUBSW Y0, Y13, Y1 \
	VPADDW Y1, Y3, Y3 \
	VPBROADCASTD (t*32+24)(SI), Y0 \
	VPMADDUBSW Y0, Y14, Y1 \
	VPADDW Y1, Y3, Y3 \
	VPBROADCASTD (t*32+28)(SI), Y0 \
	VPMADDUBSW Y0, Y15, Y1 \
	VPADDW Y1, Y3, Y3 \
	VPMADDWD a8ones<>(SB), Y3, Y3 \
	VPADDD Y3, Y2, Y2

// F51A, F50A, S51A, S50A: F41A, F40A, S41A, S40A with DOT5A (Q5_0's
// offset 16Σq at sx).
#define F51A(t, A) \
	DOT5A(t) \
	VCVTDQ2PS Y2, Y2 \
	VBROADCASTSS (4*t)(DX), Y3 \
	VMULPS 0(SP), Y3, Y3 \
	VFMADD231PS Y2, Y3, A \
	VBROADCASTSS (4*t)(DX)(AX*1), Y3 \
	VFMADD231PS 32(SP), Y3, A

#define F50A(t, A) \
	DOT5A(t) \
	VPBROADCASTD (4*t)(DX)(AX*1), Y3 \
	VPSUBD Y3, Y2, Y2 \
	VCVTDQ2PS Y2, Y2 \
	VBROADCASTSS (4*t)(DX), Y3 \
	VMULPS 0(SP), Y3, Y3 \
	VFMADD231PS Y2, Y3, A

#define S51A(t, off) \
	DOT5A(t) \
	VCVTDQ2PS Y2, Y2 \
	VBROADCASTSS (4*t)(DX), Y3 \
	VMULPS 0(SP), Y3, Y3 \
	VMOVUPS off(SP), Y1 \
	VFMADD231PS Y2, Y3, Y1 \
	VBROADCASTSS (4*t)(DX)(AX*1), Y3 \
	VFMADD231PS 32(SP), Y3, Y1 \
	VMOVUPS Y1, off(SP)

#define S50A(t, off) \
	DOT5A(t) \
	VPBROADCASTD (4*t)(DX)(AX*1), Y3 \
	VPSUBD Y3, Y2, Y2 \
	VCVTDQ2PS Y2, Y2 \
	VBROADCASTSS (4*t)(DX), Y3 \
	VMULPS 0(SP), Y3, Y3 \
	VMOVUPS off(SP), Y1 \
	VFMADD231PS Y2, Y3, Y1 \
	VMOVUPS Y1, off(SP)

// func rowsQ50x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x1A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ rowsq50x1adone
rowsq50x1aloop:
	PFA
	H16A
	W5A(2, 6)
	F50A(0, Y4)
	NEXTA(22, 1)
	JNZ rowsq50x1aloop
rowsq50x1adone:
	OUTA1
	VZEROUPPER
	RET

// func rowsQ50x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x2A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ rowsq50x2adone
rowsq50x2aloop:
	PFA
	H16A
	W5A(2, 6)
	F50A(0, Y4)
	F50A(1, Y5)
	NEXTA(22, 2)
	JNZ rowsq50x2aloop
rowsq50x2adone:
	OUTA2
	VZEROUPPER
	RET

// func rowsQ50x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x4A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ rowsq50x4adone
rowsq50x4aloop:
	PFA
	H16A
	W5A(2, 6)
	F50A(0, Y4)
	F50A(1, Y5)
	F50A(2, Y6)
	F50A(3, Y7)
	NEXTA(22, 4)
	JNZ rowsq50x4aloop
rowsq50x4adone:
	OUTA4
	VZEROUPPER
	RET

// func rowsQ50x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x8A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ rowsq50x8adone
rowsq50x8aloop:
	PFA
	H16A
	W5A(2, 6)
	F50A(0, Y4)
	F50A(1, Y5)
	F50A(2, Y6)
	F50A(3, Y7)
	S50A(4, 64)
	S50A(5, 96)
	S50A(6, 128)
	S50A(7, 160)
	NEXTA(22, 8)
	JNZ rowsq50x8aloop
rowsq50x8adone:
	OUTA8
	VZEROUPPER
	RET

// func rowsQ51x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x1A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ rowsq51x1adone
rowsq51x1aloop:
	PFA
	H41A
	W5A(4, 8)
	F51A(0, Y4)
	NEXTA(24, 1)
	JNZ rowsq51x1aloop
rowsq51x1adone:
	OUTA1
	VZEROUPPER
	RET

// func rowsQ51x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x2A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ rowsq51x2adone
rowsq51x2aloop:
	PFA
	H41A
	W5A(4, 8)
	F51A(0, Y4)
	F51A(1, Y5)
	NEXTA(24, 2)
	JNZ rowsq51x2aloop
rowsq51x2adone:
	OUTA2
	VZEROUPPER
	RET

// func rowsQ51x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x4A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ rowsq51x4adone
rowsq51x4aloop:
	PFA
	H41A
	W5A(4, 8)
	F51A(0, Y4)
	F51A(1, Y5)
	F51A(2, Y6)
	F51A(3, Y7)
	NEXTA(24, 4)
	JNZ rowsq51x4aloop
rowsq51x4adone:
	OUTA4
	VZEROUPPER
	RET

// func rowsQ51x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x8A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ rowsq51x8adone
rowsq51x8aloop:
	PFA
	H41A
	W5A(4, 8)
	F51A(0, Y4)
	F51A(1, Y5)
	F51A(2, Y6)
	F51A(3, Y7)
	S51A(4, 64)
	S51A(5, 96)
	S51A(6, 128)
	S51A(7, 160)
	NEXTA(24, 8)
	JNZ rowsq51x8aloop
rowsq51x8adone:
	OUTA8
	VZEROUPPER
	RET
