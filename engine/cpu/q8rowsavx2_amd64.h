// Macros of the AVX2 row kernels (q8rowsavx2_amd64.s for Q4_0, Q4_1, Q8_0;
// q5rowsavx2_amd64.s for Q5_0, Q5_1): see q8rowsavx2_amd64.s for the
// design, the arguments, the registers and the frame. Include after
// q8rows_amd64.h.

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
