#include "textflag.h"
#include "vec_amd64.h"
#include "q8rows_amd64.h"

// AVX2 forms of the row kernels of q8rows_amd64.s (CPUs without AVX-512
// VNNI): the same 8 rows in the lanes, the same transposed
// weight chunks, the same canonical per-token sum (dotQ8Ref), so every result
// is the VNNI kernels' bits. Without VPDPBUSD a chunk is VPMADDUBSW (nibble
// weights <= 15 times activations, pairs summed to int16: at most
// 2*15*127 = 3810, so the 8 chunks of a block add up in int16 without
// overflow, 30480 at most) and one VPMADDWD by ones per block makes the int32
// sums (Q8_0 below needs one per chunk). Without embedded broadcasts each activation chunk is VPBROADCASTD
// into a register. With 16 registers the block scales d_w and m_w live on
// the stack, and the 8-token form keeps tokens 4..7's accumulators there.
//
// Arguments and registers as in q8rows_amd64.s; Y8..Y15 the weight chunks,
// Y4..Y7 the accumulators of tokens 0..3, Y0..Y3 temporaries. Frame: d_w at
// 0(SP), m_w at 32(SP), tokens 4..7's accumulators at 64(SP)...

VEC4(a8nib<>, $0x0f0f0f0f0f0f0f0f)

VEC4(a8ones<>, $0x0001000100010001)

#define SETUP2 \
	ROWS \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	VMOVUPS Y4, 64(SP) \
	VMOVUPS Y4, 96(SP) \
	VMOVUPS Y4, 128(SP) \
	VMOVUPS Y4, 160(SP)

// TRANSPOSEA, TRANSPOSEB: the transpose with Y8..Y11 or Y12..Y15 as
// temporaries (W8A's second half, while Y8..Y11 hold the first).
#define TRANSPOSEA TRANSPOSE4(Y8, Y9, Y10, Y11)
#define TRANSPOSEB TRANSPOSE4(Y12, Y13, Y14, Y15)

#define W4A(off) \
	LOAD4(off) \
	TRANSPOSEA \
	VPSRLW $4, Y0, Y12 \
	VPSRLW $4, Y1, Y13 \
	VPSRLW $4, Y2, Y14 \
	VPSRLW $4, Y3, Y15 \
	VPAND a8nib<>(SB), Y0, Y8 \
	VPAND a8nib<>(SB), Y1, Y9 \
	VPAND a8nib<>(SB), Y2, Y10 \
	VPAND a8nib<>(SB), Y3, Y11 \
	VPAND a8nib<>(SB), Y12, Y12 \
	VPAND a8nib<>(SB), Y13, Y13 \
	VPAND a8nib<>(SB), Y14, Y14 \
	VPAND a8nib<>(SB), Y15, Y15

// H41A: the 8 rows' d_w to 0(SP), m_w to 32(SP). The 8 header dwords
// convert as [d0 m0 d1 m1 d2 m2 d3 m3] and [d4 m4 ... d7 m7]; the even and
// odd lanes (VSHUFPS) come out as [d0 d1 d4 d5 | d2 d3 d6 d7], put in order
// by VPERMPD.
#define H41A \
	VMOVD (R8)(BX*1), X0 \
	VPINSRD $1, (R9)(BX*1), X0, X0 \
	VPINSRD $2, (R10)(BX*1), X0, X0 \
	VPINSRD $3, (R11)(BX*1), X0, X0 \
	VMOVD (R12)(BX*1), X1 \
	VPINSRD $1, (R13)(BX*1), X1, X1 \
	VPINSRD $2, (R14)(BX*1), X1, X1 \
	VPINSRD $3, (R15)(BX*1), X1, X1 \
	VCVTPH2PS X0, Y0 \
	VCVTPH2PS X1, Y1 \
	VSHUFPS $0x88, Y1, Y0, Y2 \
	VSHUFPS $0xdd, Y1, Y0, Y3 \
	VPERMPD $0xd8, Y2, Y2 \
	VPERMPD $0xd8, Y3, Y3 \
	VMOVUPS Y2, 0(SP) \
	VMOVUPS Y3, 32(SP)

// H16A: the 8 rows' d_w (Q4_0's 2-byte header) to 0(SP).
#define H16A \
	VPINSRW $0, (R8)(BX*1), X0, X0 \
	VPINSRW $0, (R12)(BX*1), X1, X1 \
	VPINSRW $1, (R9)(BX*1), X0, X0 \
	VPINSRW $1, (R13)(BX*1), X1, X1 \
	VPINSRW $2, (R10)(BX*1), X0, X0 \
	VPINSRW $2, (R14)(BX*1), X1, X1 \
	VPINSRW $3, (R11)(BX*1), X0, X0 \
	VPINSRW $3, (R15)(BX*1), X1, X1 \
	VPUNPCKLQDQ X1, X0, X0 \
	VCVTPH2PS X0, Y0 \
	VMOVUPS Y0, 0(SP)

// DOTA leaves token t's int32 block sums for the 8 rows in Y2.
#define DOTA(t) \
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
	VPBROADCASTD (t*32+16)(SI), Y0 \
	VPMADDUBSW Y0, Y12, Y1 \
	VPADDW Y1, Y2, Y2 \
	VPBROADCASTD (t*32+20)(SI), Y0 \
	VPMADDUBSW Y0, Y13, Y1 \
	VPADDW Y1, Y2, Y2 \
	VPBROADCASTD (t*32+24)(SI), Y0 \
	VPMADDUBSW Y0, Y14, Y1 \
	VPADDW Y1, Y2, Y2 \
	VPBROADCASTD (t*32+28)(SI), Y0 \
	VPMADDUBSW Y0, Y15, Y1 \
	VPADDW Y1, Y2, Y2 \
	VPMADDWD a8ones<>(SB), Y2, Y2

// F41A(t, A): token t's Q4_1 block into the accumulator register A.
#define F41A(t, A) \
	DOTA(t) \
	VCVTDQ2PS Y2, Y2 \
	VBROADCASTSS (4*t)(DX), Y3 \
	VMULPS 0(SP), Y3, Y3 \
	VFMADD231PS Y2, Y3, A \
	VBROADCASTSS (4*t)(DX)(AX*1), Y3 \
	VFMADD231PS 32(SP), Y3, A

// F40A(t, A): token t's Q4_0 block (8Σq at sx).
#define F40A(t, A) \
	DOTA(t) \
	VPBROADCASTD (4*t)(DX)(AX*1), Y3 \
	VPSUBD Y3, Y2, Y2 \
	VCVTDQ2PS Y2, Y2 \
	VBROADCASTSS (4*t)(DX), Y3 \
	VMULPS 0(SP), Y3, Y3 \
	VFMADD231PS Y2, Y3, A

// S41A, S40A: the same for a token whose accumulator is on the stack at
// off(SP).
#define S41A(t, off) \
	DOTA(t) \
	VCVTDQ2PS Y2, Y2 \
	VBROADCASTSS (4*t)(DX), Y3 \
	VMULPS 0(SP), Y3, Y3 \
	VMOVUPS off(SP), Y1 \
	VFMADD231PS Y2, Y3, Y1 \
	VBROADCASTSS (4*t)(DX)(AX*1), Y3 \
	VFMADD231PS 32(SP), Y3, Y1 \
	VMOVUPS Y1, off(SP)

#define S40A(t, off) \
	DOTA(t) \
	VPBROADCASTD (4*t)(DX)(AX*1), Y3 \
	VPSUBD Y3, Y2, Y2 \
	VCVTDQ2PS Y2, Y2 \
	VBROADCASTSS (4*t)(DX), Y3 \
	VMULPS 0(SP), Y3, Y3 \
	VMOVUPS off(SP), Y1 \
	VFMADD231PS Y2, Y3, Y1 \
	VMOVUPS Y1, off(SP)

#define NEXTA(bs, g) \
	ADDQ $bs, BX \
	ADDQ $(g*32), SI \
	ADDQ dstride+48(FP), DX \
	DECQ CX

#define PFA \
	PREFETCHT0 (DI)(BX*8) \
	PREFETCHT0 64(DI)(BX*8) \
	PREFETCHT0 128(DI)(BX*8)

#define OUTA1 \
	MOVQ out+56(FP), DI \
	VMOVUPS Y4, (DI)

#define OUTA2 \
	OUTA1 \
	MOVQ ostride+64(FP), AX \
	VMOVUPS Y5, (DI)(AX*1)

#define OUTA4 \
	OUTA2 \
	VMOVUPS Y6, (DI)(AX*2) \
	LEAQ (AX)(AX*2), BX \
	VMOVUPS Y7, (DI)(BX*1)

#define OUTA8 \
	OUTA4 \
	LEAQ (DI)(AX*4), DI \
	VMOVUPS 64(SP), Y0 \
	VMOVUPS Y0, (DI) \
	VMOVUPS 96(SP), Y0 \
	VMOVUPS Y0, (DI)(AX*1) \
	VMOVUPS 128(SP), Y0 \
	VMOVUPS Y0, (DI)(AX*2) \
	VMOVUPS 160(SP), Y0 \
	VMOVUPS Y0, (DI)(BX*1)

// Q8_0 (signed weights): VPMADDUBSW takes |w| as the unsigned operand and
// the activations with w's sign (VPSIGNB), so a pair is at most
// 2*128*127 = 32512 and fits int16, but two chunks may not: each chunk
// goes to int32 (VPMADDWD) before it is added. The signed chunks wait on
// the stack at 192(SP)...

// W8A: |w| of chunks 0..7 in Y8..Y15, w at 192(SP)..
#define W8A \
	LOAD4(2) \
	TRANSPOSEA \
	VMOVDQU Y0, 192(SP) \
	VMOVDQU Y1, 224(SP) \
	VMOVDQU Y2, 256(SP) \
	VMOVDQU Y3, 288(SP) \
	VPABSB Y0, Y8 \
	VPABSB Y1, Y9 \
	VPABSB Y2, Y10 \
	VPABSB Y3, Y11 \
	LOAD4(18) \
	TRANSPOSEB \
	VMOVDQU Y0, 320(SP) \
	VMOVDQU Y1, 352(SP) \
	VMOVDQU Y2, 384(SP) \
	VMOVDQU Y3, 416(SP) \
	VPABSB Y0, Y12 \
	VPABSB Y1, Y13 \
	VPABSB Y2, Y14 \
	VPABSB Y3, Y15

#define CH8(t, c, wreg) \
	VPBROADCASTD (t*32+4*c)(SI), Y0 \
	VPSIGNB (192+32*c)(SP), Y0, Y0 \
	VPMADDUBSW Y0, wreg, Y1 \
	VPMADDWD a8ones<>(SB), Y1, Y1 \
	VPADDD Y1, Y2, Y2

// DOT8A leaves token t's int32 block sums for the 8 rows in Y2.
#define DOT8A(t) \
	VPBROADCASTD (t*32)(SI), Y0 \
	VPSIGNB 192(SP), Y0, Y0 \
	VPMADDUBSW Y0, Y8, Y2 \
	VPMADDWD a8ones<>(SB), Y2, Y2 \
	CH8(t, 1, Y9) \
	CH8(t, 2, Y10) \
	CH8(t, 3, Y11) \
	CH8(t, 4, Y12) \
	CH8(t, 5, Y13) \
	CH8(t, 6, Y14) \
	CH8(t, 7, Y15)

#define F80A(t, A) \
	DOT8A(t) \
	VCVTDQ2PS Y2, Y2 \
	VBROADCASTSS (4*t)(DX), Y3 \
	VMULPS 0(SP), Y3, Y3 \
	VFMADD231PS Y2, Y3, A

#define S80A(t, off) \
	DOT8A(t) \
	VCVTDQ2PS Y2, Y2 \
	VBROADCASTSS (4*t)(DX), Y3 \
	VMULPS 0(SP), Y3, Y3 \
	VMOVUPS off(SP), Y1 \
	VFMADD231PS Y2, Y3, Y1 \
	VMOVUPS Y1, off(SP)

#define PF5A \
	PFA \
	PREFETCHT0 192(DI)(BX*8) \
	PREFETCHT0 256(DI)(BX*8)

// func rowsQ41x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x1A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ q41a1done
q41a1loop:
	PFA
	H41A
	W4A(4)
	F41A(0, Y4)
	NEXTA(20, 1)
	JNZ q41a1loop
q41a1done:
	OUTA1
	VZEROUPPER
	RET

// func rowsQ41x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x2A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ q41a2done
q41a2loop:
	PFA
	H41A
	W4A(4)
	F41A(0, Y4)
	F41A(1, Y5)
	NEXTA(20, 2)
	JNZ q41a2loop
q41a2done:
	OUTA2
	VZEROUPPER
	RET

// func rowsQ41x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x4A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ q41a4done
q41a4loop:
	PFA
	H41A
	W4A(4)
	F41A(0, Y4)
	F41A(1, Y5)
	F41A(2, Y6)
	F41A(3, Y7)
	NEXTA(20, 4)
	JNZ q41a4loop
q41a4done:
	OUTA4
	VZEROUPPER
	RET

// func rowsQ41x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x8A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ q41a8done
q41a8loop:
	PFA
	H41A
	W4A(4)
	F41A(0, Y4)
	F41A(1, Y5)
	F41A(2, Y6)
	F41A(3, Y7)
	S41A(4, 64)
	S41A(5, 96)
	S41A(6, 128)
	S41A(7, 160)
	NEXTA(20, 8)
	JNZ q41a8loop
q41a8done:
	OUTA8
	VZEROUPPER
	RET

// func rowsQ40x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x1A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ q40a1done
q40a1loop:
	PFA
	H16A
	W4A(2)
	F40A(0, Y4)
	NEXTA(18, 1)
	JNZ q40a1loop
q40a1done:
	OUTA1
	VZEROUPPER
	RET

// func rowsQ40x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x2A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ q40a2done
q40a2loop:
	PFA
	H16A
	W4A(2)
	F40A(0, Y4)
	F40A(1, Y5)
	NEXTA(18, 2)
	JNZ q40a2loop
q40a2done:
	OUTA2
	VZEROUPPER
	RET

// func rowsQ40x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x4A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ q40a4done
q40a4loop:
	PFA
	H16A
	W4A(2)
	F40A(0, Y4)
	F40A(1, Y5)
	F40A(2, Y6)
	F40A(3, Y7)
	NEXTA(18, 4)
	JNZ q40a4loop
q40a4done:
	OUTA4
	VZEROUPPER
	RET

// func rowsQ40x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x8A(SB), NOSPLIT, $192-72
	SETUP2
	TESTQ CX, CX
	JZ q40a8done
q40a8loop:
	PFA
	H16A
	W4A(2)
	F40A(0, Y4)
	F40A(1, Y5)
	F40A(2, Y6)
	F40A(3, Y7)
	S40A(4, 64)
	S40A(5, 96)
	S40A(6, 128)
	S40A(7, 160)
	NEXTA(18, 8)
	JNZ q40a8loop
q40a8done:
	OUTA8
	VZEROUPPER
	RET

// func rowsQ80x1A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x1A(SB), NOSPLIT, $448-72
	SETUP2
	TESTQ CX, CX
	JZ q80a1done
q80a1loop:
	PF5A
	H16A
	W8A
	F80A(0, Y4)
	NEXTA(34, 1)
	JNZ q80a1loop
q80a1done:
	OUTA1
	VZEROUPPER
	RET

// func rowsQ80x2A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x2A(SB), NOSPLIT, $448-72
	SETUP2
	TESTQ CX, CX
	JZ q80a2done
q80a2loop:
	PF5A
	H16A
	W8A
	F80A(0, Y4)
	F80A(1, Y5)
	NEXTA(34, 2)
	JNZ q80a2loop
q80a2done:
	OUTA2
	VZEROUPPER
	RET

// func rowsQ80x4A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x4A(SB), NOSPLIT, $448-72
	SETUP2
	TESTQ CX, CX
	JZ q80a4done
q80a4loop:
	PF5A
	H16A
	W8A
	F80A(0, Y4)
	F80A(1, Y5)
	F80A(2, Y6)
	F80A(3, Y7)
	NEXTA(34, 4)
	JNZ q80a4loop
q80a4done:
	OUTA4
	VZEROUPPER
	RET

// func rowsQ80x8A(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x8A(SB), NOSPLIT, $448-72
	SETUP2
	TESTQ CX, CX
	JZ q80a8done
q80a8loop:
	PF5A
	H16A
	W8A
	F80A(0, Y4)
	F80A(1, Y5)
	F80A(2, Y6)
	F80A(3, Y7)
	S80A(4, 64)
	S80A(5, 96)
	S80A(6, 128)
	S80A(7, 160)
	NEXTA(34, 8)
	JNZ q80a8loop
q80a8done:
	OUTA8
	VZEROUPPER
	RET
