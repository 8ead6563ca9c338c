// Macros of the AVX-512 VNNI row kernels (q8rows_amd64.s for Q4_0, Q4_1,
// Q8_0; q5rows_amd64.s for Q5_0, Q5_1): see q8rows_amd64.s for the design,
// the arguments and the registers. Include after q8rows_amd64.h.

VEC4(r8nib<>, $0x0f0f0f0f0f0f0f0f)

VEC4(r8bias<>, $0x8080808080808080)

#define SETUP \
	ROWS \
	VMOVDQU32 r8nib<>(SB), Y16 \
	VMOVDQU32 r8bias<>(SB), Y17 \
	VPXORD Y20, Y20, Y20 \
	VPXORD Y21, Y21, Y21 \
	VPXORD Y22, Y22, Y22 \
	VPXORD Y23, Y23, Y23 \
	VPXORD Y24, Y24, Y24 \
	VPXORD Y25, Y25, Y25 \
	VPXORD Y26, Y26, Y26 \
	VPXORD Y27, Y27, Y27

#define TRANSPOSE TRANSPOSE4(Y4, Y5, Y6, Y7)

// W4 (Q4_0, Q4_1): the 16 nibble bytes at off give chunks 0..3 (low
// nibbles) in Y8..Y11 and chunks 4..7 (high nibbles) in Y12..Y15.
#define W4(off) \
	LOAD4(off) \
	TRANSPOSE \
	VPSRLW $4, Y0, Y12 \
	VPSRLW $4, Y1, Y13 \
	VPSRLW $4, Y2, Y14 \
	VPSRLW $4, Y3, Y15 \
	VPANDD Y16, Y0, Y8 \
	VPANDD Y16, Y1, Y9 \
	VPANDD Y16, Y2, Y10 \
	VPANDD Y16, Y3, Y11 \
	VPANDD Y16, Y12, Y12 \
	VPANDD Y16, Y13, Y13 \
	VPANDD Y16, Y14, Y14 \
	VPANDD Y16, Y15, Y15

// W8 (Q8_0): the 32 weights at 2 as w+128, chunks 0..7 in Y8..Y15.
#define W8 \
	LOAD4(2) \
	TRANSPOSE \
	VPXORD Y17, Y0, Y8 \
	VPXORD Y17, Y1, Y9 \
	VPXORD Y17, Y2, Y10 \
	VPXORD Y17, Y3, Y11 \
	LOAD4(18) \
	TRANSPOSE \
	VPXORD Y17, Y0, Y12 \
	VPXORD Y17, Y1, Y13 \
	VPXORD Y17, Y2, Y14 \
	VPXORD Y17, Y3, Y15

// H41: the 8 rows' d_w in Y18 and m_w in Y19 (Q4_1's 4-byte header).
#define H41 \
	VMOVD (R8)(BX*1), X4 \
	VPINSRD $1, (R9)(BX*1), X4, X4 \
	VPINSRD $2, (R10)(BX*1), X4, X4 \
	VPINSRD $3, (R11)(BX*1), X4, X4 \
	VMOVD (R12)(BX*1), X5 \
	VPINSRD $1, (R13)(BX*1), X5, X5 \
	VPINSRD $2, (R14)(BX*1), X5, X5 \
	VPINSRD $3, (R15)(BX*1), X5, X5 \
	VINSERTI128 $1, X5, Y4, Y4 \
	VPMOVDW Y4, X5 \
	VPSRLD $16, Y4, Y4 \
	VPMOVDW Y4, X6 \
	VCVTPH2PS X5, Y18 \
	VCVTPH2PS X6, Y19

// H16: the 8 rows' d_w in Y18 (Q4_0's and Q8_0's 2-byte header).
#define H16 \
	VPINSRW $0, (R8)(BX*1), X4, X4 \
	VPINSRW $0, (R12)(BX*1), X5, X5 \
	VPINSRW $1, (R9)(BX*1), X4, X4 \
	VPINSRW $1, (R13)(BX*1), X5, X5 \
	VPINSRW $2, (R10)(BX*1), X4, X4 \
	VPINSRW $2, (R14)(BX*1), X5, X5 \
	VPINSRW $3, (R11)(BX*1), X4, X4 \
	VPINSRW $3, (R15)(BX*1), X5, X5 \
	VPUNPCKLQDQ X5, X4, X4 \
	VCVTPH2PS X4, Y18

// DOT adds token t's block (32 bytes at t*32(SI)) times the 8 rows' chunks
// into acc, in two zeroed halves (acc, acc2) so that the chain of dependent
// VPDPBUSD is 4 long, not 8: the sum is the same exact integer.
#define DOT(t, acc, acc2) \
	VPXORD acc, acc, acc \
	VPXORD acc2, acc2, acc2 \
	VPDPBUSD.BCST (t*32+0)(SI), Y8, acc \
	VPDPBUSD.BCST (t*32+16)(SI), Y12, acc2 \
	VPDPBUSD.BCST (t*32+4)(SI), Y9, acc \
	VPDPBUSD.BCST (t*32+20)(SI), Y13, acc2 \
	VPDPBUSD.BCST (t*32+8)(SI), Y10, acc \
	VPDPBUSD.BCST (t*32+24)(SI), Y14, acc2 \
	VPDPBUSD.BCST (t*32+12)(SI), Y11, acc \
	VPDPBUSD.BCST (t*32+28)(SI), Y15, acc2 \
	VPADDD acc2, acc, acc

// F41 accumulates token t's block of Q4_1.
#define F41(t, acc, acc2, A) \
	DOT(t, acc, acc2) \
	VCVTDQ2PS acc, acc \
	VMULPS.BCST (4*t)(DX), Y18, Y29 \
	VFMADD231PS acc, Y29, A \
	VFMADD231PS.BCST (4*t)(DX)(AX*1), Y19, A

// F16 accumulates token t's block of Q4_0 and Q8_0 (offsets in sx).
#define FQ16(t, acc, acc2, A) \
	DOT(t, acc, acc2) \
	VPSUBD.BCST (4*t)(DX)(AX*1), acc, acc \
	VCVTDQ2PS acc, acc \
	VMULPS.BCST (4*t)(DX), Y18, Y29 \
	VFMADD231PS acc, Y29, A

// DOT1 is DOT in one chain (acc only): the 8-token kernels keep their
// accumulators in Y20..Y27 and their integer sums in Y0..Y7, with no room
// for second halves; 8 independent tokens hide the longer chain.
#define DOT1(t, acc) \
	VPXORD acc, acc, acc \
	VPDPBUSD.BCST (t*32+0)(SI), Y8, acc \
	VPDPBUSD.BCST (t*32+4)(SI), Y9, acc \
	VPDPBUSD.BCST (t*32+8)(SI), Y10, acc \
	VPDPBUSD.BCST (t*32+12)(SI), Y11, acc \
	VPDPBUSD.BCST (t*32+16)(SI), Y12, acc \
	VPDPBUSD.BCST (t*32+20)(SI), Y13, acc \
	VPDPBUSD.BCST (t*32+24)(SI), Y14, acc \
	VPDPBUSD.BCST (t*32+28)(SI), Y15, acc

#define F41x8(t, acc, A) \
	DOT1(t, acc) \
	VCVTDQ2PS acc, acc \
	VMULPS.BCST (4*t)(DX), Y18, Y29 \
	VFMADD231PS acc, Y29, A \
	VFMADD231PS.BCST (4*t)(DX)(AX*1), Y19, A

#define FQ16x8(t, acc, A) \
	DOT1(t, acc) \
	VPSUBD.BCST (4*t)(DX)(AX*1), acc, acc \
	VCVTDQ2PS acc, acc \
	VMULPS.BCST (4*t)(DX), Y18, Y29 \
	VFMADD231PS acc, Y29, A

#define NEXT(bs, g) \
	ADDQ $bs, BX \
	ADDQ $(g*32), SI \
	ADDQ dstride+48(FP), DX \
	DECQ CX

// PF3, PF5 prefetch the next 8 rows' share of one block (8*bs bytes at
// DI+8*BX: the next group of rows is fetched while this one computes, as
// the 8 short interleaved row streams of a group are a poor pattern for the
// hardware prefetcher).
#define PF3 \
	PREFETCHT0 (DI)(BX*8) \
	PREFETCHT0 64(DI)(BX*8) \
	PREFETCHT0 128(DI)(BX*8)

#define PF5 \
	PF3 \
	PREFETCHT0 192(DI)(BX*8) \
	PREFETCHT0 256(DI)(BX*8)

#define OUT1 \
	MOVQ out+56(FP), DI \
	VMOVUPS Y24, (DI)

#define OUT2 \
	OUT1 \
	MOVQ ostride+64(FP), AX \
	VMOVUPS Y25, (DI)(AX*1)

#define OUT8 \
	MOVQ out+56(FP), DI \
	MOVQ ostride+64(FP), AX \
	LEAQ (AX)(AX*2), BX \
	VMOVUPS Y20, (DI) \
	VMOVUPS Y21, (DI)(AX*1) \
	VMOVUPS Y22, (DI)(AX*2) \
	VMOVUPS Y23, (DI)(BX*1) \
	LEAQ (DI)(AX*4), DI \
	VMOVUPS Y24, (DI) \
	VMOVUPS Y25, (DI)(AX*1) \
	VMOVUPS Y26, (DI)(AX*2) \
	VMOVUPS Y27, (DI)(BX*1)

#define OUT4 \
	OUT2 \
	VMOVUPS Y26, (DI)(AX*2) \
	LEAQ (DI)(AX*2), DI \
	VMOVUPS Y27, (DI)(AX*1)
