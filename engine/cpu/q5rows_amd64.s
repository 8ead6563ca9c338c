#include "textflag.h"
#include "vec_amd64.h"
#include "q8rows_amd64.h"
#include "q8rowsvnni_amd64.h"

// AVX-512 VNNI row kernels for Q5_0 and Q5_1 (layouts in kquant.go): the
// Q4_0/Q4_1 kernels of q8rows_amd64.s with the fifth bits added to the
// nibble chunks before the dot products, so each lane computes the same
// canonical sum (dotref.go): I_b = Σ q·x - 16Σx (Q5_0, sx = 16Σq) or
// I_b = Σ q·x (Q5_1, then fma(m_w, s_x)), q = nibble | bit << 4 in 0..31,
// |Σ q·x| <= 32*31*127 < 2^24.
//
// The fifth bits: the 8 rows' qh words are gathered into Y4 (a row per
// lane). Chunk k of a row (its elements 4k..4k+3, k = 0..7 over the low
// then the high nibbles) takes qh bits 4k..4k+3, which are nibble k&1 of
// byte k>>1: VPSHUFB copies byte m of each lane into its 4 bytes, VPTESTMB
// against the byte masks 1,2,4,8 (16,32,64,128) picks byte e's bit into a
// mask register, and a masked VPADDB adds 16 (Y28) to those bytes. Registers
// as in q8rows_amd64.s, plus Y28 (0x10 bytes), Y5 and K1, K2.

DATA q5rep0<>+0(SB)/8, $0x0404040400000000
DATA q5rep0<>+8(SB)/8, $0x0c0c0c0c08080808
DATA q5rep0<>+16(SB)/8, $0x0404040400000000
DATA q5rep0<>+24(SB)/8, $0x0c0c0c0c08080808
GLOBL q5rep0<>(SB), RODATA|NOPTR, $32

DATA q5rep1<>+0(SB)/8, $0x0505050501010101
DATA q5rep1<>+8(SB)/8, $0x0d0d0d0d09090909
DATA q5rep1<>+16(SB)/8, $0x0505050501010101
DATA q5rep1<>+24(SB)/8, $0x0d0d0d0d09090909
GLOBL q5rep1<>(SB), RODATA|NOPTR, $32

DATA q5rep2<>+0(SB)/8, $0x0606060602020202
DATA q5rep2<>+8(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA q5rep2<>+16(SB)/8, $0x0606060602020202
DATA q5rep2<>+24(SB)/8, $0x0e0e0e0e0a0a0a0a
GLOBL q5rep2<>(SB), RODATA|NOPTR, $32

DATA q5rep3<>+0(SB)/8, $0x0707070703030303
DATA q5rep3<>+8(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA q5rep3<>+16(SB)/8, $0x0707070703030303
DATA q5rep3<>+24(SB)/8, $0x0f0f0f0f0b0b0b0b
GLOBL q5rep3<>(SB), RODATA|NOPTR, $32

VEC4(q5lo<>, $0x0804020108040201)

VEC4(q5hi<>, $0x8040201080402010)

VEC4(q5six<>, $0x1010101010101010)

// QH5(off): the 8 rows' qh words at off into Y4 (rows 0..3 in the low
// half, as the transposed chunks have them).
#define QH5(off) \
	VMOVD off(R8)(BX*1), X4 \
	VPINSRD $1, off(R9)(BX*1), X4, X4 \
	VPINSRD $2, off(R10)(BX*1), X4, X4 \
	VPINSRD $3, off(R11)(BX*1), X4, X4 \
	VMOVD off(R12)(BX*1), X5 \
	VPINSRD $1, off(R13)(BX*1), X5, X5 \
	VPINSRD $2, off(R14)(BX*1), X5, X5 \
	VPINSRD $3, off(R15)(BX*1), X5, X5 \
	VINSERTI128 $1, X5, Y4, Y4

// HI5(rep, lo, hi): chunks 2m (register lo) and 2m+1 (hi) get their fifth
// bits, rep the shuffle that copies byte m.
#define HI5(rep, lo, hi) \
	VPSHUFB rep, Y4, Y5 \
	VPTESTMB q5lo<>(SB), Y5, K1 \
	VPTESTMB q5hi<>(SB), Y5, K2 \
	VPADDB Y28, lo, K1, lo \
	VPADDB Y28, hi, K2, hi

// W5(qhoff, qsoff): the 32 5-bit values of the 8 rows' block, chunks 0..7
// in Y8..Y15.
#define W5(qhoff, qsoff) \
	W4(qsoff) \
	QH5(qhoff) \
	HI5(q5rep0<>(SB), Y8, Y9) \
	HI5(q5rep1<>(SB), Y10, Y11) \
	HI5(q5rep2<>(SB), Y12, Y13) \
	HI5(q5rep3<>(SB), Y14, Y15)

#define SETUP5 \
	SETUP \
	VMOVDQU32 q5six<>(SB), Y28

// func rowsQ50x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x1(SB), NOSPLIT, $0-72
	SETUP5
	TESTQ CX, CX
	JZ q50r1done
q50r1loop:
	PF3
	H16
	W5(2, 6)
	FQ16(0, Y20, Y0, Y24)
	NEXT(22, 1)
	JNZ q50r1loop
q50r1done:
	OUT1
	VZEROUPPER
	RET

// func rowsQ50x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x2(SB), NOSPLIT, $0-72
	SETUP5
	TESTQ CX, CX
	JZ q50r2done
q50r2loop:
	PF3
	H16
	W5(2, 6)
	FQ16(0, Y20, Y0, Y24)
	FQ16(1, Y21, Y1, Y25)
	NEXT(22, 2)
	JNZ q50r2loop
q50r2done:
	OUT2
	VZEROUPPER
	RET

// func rowsQ50x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x4(SB), NOSPLIT, $0-72
	SETUP5
	TESTQ CX, CX
	JZ q50r4done
q50r4loop:
	PF3
	H16
	W5(2, 6)
	FQ16(0, Y20, Y0, Y24)
	FQ16(1, Y21, Y1, Y25)
	FQ16(2, Y22, Y2, Y26)
	FQ16(3, Y23, Y3, Y27)
	NEXT(22, 4)
	JNZ q50r4loop
q50r4done:
	OUT4
	VZEROUPPER
	RET

// func rowsQ50x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x8(SB), NOSPLIT, $0-72
	SETUP5
	TESTQ CX, CX
	JZ q50r8done
q50r8loop:
	PF3
	H16
	W5(2, 6)
	FQ16x8(0, Y0, Y20)
	FQ16x8(1, Y1, Y21)
	FQ16x8(2, Y2, Y22)
	FQ16x8(3, Y3, Y23)
	FQ16x8(4, Y4, Y24)
	FQ16x8(5, Y5, Y25)
	FQ16x8(6, Y6, Y26)
	FQ16x8(7, Y7, Y27)
	NEXT(22, 8)
	JNZ q50r8loop
q50r8done:
	OUT8
	VZEROUPPER
	RET

// func rowsQ51x1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x1(SB), NOSPLIT, $0-72
	SETUP5
	TESTQ CX, CX
	JZ q51r1done
q51r1loop:
	PF3
	H41
	W5(4, 8)
	F41(0, Y20, Y0, Y24)
	NEXT(24, 1)
	JNZ q51r1loop
q51r1done:
	OUT1
	VZEROUPPER
	RET

// func rowsQ51x2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x2(SB), NOSPLIT, $0-72
	SETUP5
	TESTQ CX, CX
	JZ q51r2done
q51r2loop:
	PF3
	H41
	W5(4, 8)
	F41(0, Y20, Y0, Y24)
	F41(1, Y21, Y1, Y25)
	NEXT(24, 2)
	JNZ q51r2loop
q51r2done:
	OUT2
	VZEROUPPER
	RET

// func rowsQ51x4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x4(SB), NOSPLIT, $0-72
	SETUP5
	TESTQ CX, CX
	JZ q51r4done
q51r4loop:
	PF3
	H41
	W5(4, 8)
	F41(0, Y20, Y0, Y24)
	F41(1, Y21, Y1, Y25)
	F41(2, Y22, Y2, Y26)
	F41(3, Y23, Y3, Y27)
	NEXT(24, 4)
	JNZ q51r4loop
q51r4done:
	OUT4
	VZEROUPPER
	RET

// func rowsQ51x8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x8(SB), NOSPLIT, $0-72
	SETUP5
	TESTQ CX, CX
	JZ q51r8done
q51r8loop:
	PF3
	H41
	W5(4, 8)
	F41x8(0, Y0, Y20)
	F41x8(1, Y1, Y21)
	F41x8(2, Y2, Y22)
	F41x8(3, Y3, Y23)
	F41x8(4, Y4, Y24)
	F41x8(5, Y5, Y25)
	F41x8(6, Y6, Y26)
	F41x8(7, Y7, Y27)
	NEXT(24, 8)
	JNZ q51r8loop
q51r8done:
	OUT8
	VZEROUPPER
	RET
