#include "textflag.h"
#include "neon_arm64.h"

// Q4_K row kernels on arm64 (NEON with SDOT): 8 weight rows of Q4_K times
// the Q8_K activations of 1, 2, 4 or 8 tokens, with the arguments of the
// amd64 K-format row kernels (kqrows_amd64.go: qx the group's Q8_K values,
// token t's block b at (b*G+t)*256; dx the group's first record, tokens 64
// bytes apart, blocks dstride apart; sx unused), computing exactly the
// canonical sum of dotref.go per row and token:
//   I = Σ_j sc_j·P_j, M = Σ_j m_j·S32_j (8 sub-blocks of 32),
//   A = fma(d_w*d_x, float(I), A), A = fma(dmin_w*d_x, -float(M), A)
// over the blocks in order.
//
// As q8rows_arm64.s, a call runs the 8 rows as two halves of 4 rows (the
// 4 lanes of a vector), and a width of 8 as two passes of 4 tokens over
// the half (the weights come from L1 the second time). Per block, the 4
// rows' 6-bit scales and mins are unpacked at once (TBL, masks and
// shifts), transposed across the rows (ZIP) and widened into the frame:
// sc_j as 4 int32 lanes (one per row) at 16+16j(RSP), the mins as pairs
// (m_2p, m_2p+1) of 4 int16 lanes at 144+16p(RSP). Per sub-block the 32
// nibbles of the 4 rows are loaded and transposed (as Q4_0's) and every
// token's P_j comes from 8 SDOTs by element; I accumulates P_j·sc_j
// (MLA, exact in int32), M the mins times the token's S32 (SMLAL by
// element), both converted once per block. Width 1 takes the sub-blocks
// 2c and 2c+1 of each qs chunk together (K41PAIR, below), loading and
// transposing their weights once.
//
// Registers: R10..R13 the half's 4 rows, R14 the token quad's activations
// (block by block), R15 its records, R17 blocks left, R19 the block size,
// R20 halves left, R22 the quad's outputs, R23 quads left, R24, R25 the
// quad's first activations and records. V0..V7 weight chunks (and the
// scale unpacking), V8..V15 loads, transposes, a token's activations
// (V12, V13), P (V14) and sc_j (V15); V16..V19 the float sums of the
// quad's 4 tokens, V20..V23 their I; V24..V27 the unpacking constants,
// V28 d_w, V29 dmin_w, V30 a product, V31 the nibble mask.

// TBL indexes and masks for the scale unpacking (see KSCALES).
DATA kq4c<>+0(SB)/8, $0x0706050403020100
DATA kq4c<>+8(SB)/8, $0x0B0A09080B0A0908
DATA kq4c<>+16(SB)/8, $0xFFFFFFFFFFFFFFFF
DATA kq4c<>+24(SB)/8, $0x0706050403020100
DATA kq4c<>+32(SB)/8, $0x3F3F3F3F3F3F3F3F
DATA kq4c<>+40(SB)/8, $0xF0F0F0F00F0F0F0F
DATA kq4c<>+48(SB)/8, $0x0000000000000000
DATA kq4c<>+56(SB)/8, $0xFCFCFCFC00000000
GLOBL kq4c<>(SB), RODATA|NOPTR, $64

#define KARGS \
	MOVD w+0(FP), R0 \
	MOVD rstride+8(FP), R1 \
	MOVD nb+16(FP), R2 \
	MOVD qx+24(FP), R3 \
	MOVD dx+32(FP), R4 \
	MOVD dstride+48(FP), R6 \
	MOVD out+56(FP), R7 \
	MOVD ostride+64(FP), R9 \
	MOVD $144, R19 \
	MOVD $2, R20 \
	MOVD $kq4c<>(SB), R21 \
	VLD1 (R21), [V24.B16, V25.B16, V26.B16, V27.B16] \
	VMOVI $15, V31.B16

// LOAD4(off) loads 16 bytes at off of each row's block into V8..V11.
#define LOAD4(off) \
	FMOVQ off(R10), F8 \
	FMOVQ off(R11), F9 \
	FMOVQ off(R12), F10 \
	FMOVQ off(R13), F11

// TRANSPOSE(k): V8..V11 (rows 0..3) to 4-byte chunks k..k+3 of the 4 rows
// in V(k)..V(k+3) (as q8rows_arm64.s).
#define TRANSPOSE(k) \
	TRN1_4S(12, 8, 9) \
	TRN2_4S(13, 8, 9) \
	TRN1_4S(14, 10, 11) \
	TRN2_4S(15, 10, 11) \
	TRN1_2D(k, 12, 14) \
	TRN1_2D(k+1, 13, 15) \
	TRN2_2D(k+2, 12, 14) \
	TRN2_2D(k+3, 13, 15)

// KROW(r) unpacks row r's 12 scale bytes s (in V8+r) into V12+r: bytes
// 0..3 sc_0..3 = s[0..3]&63, 4..7 m_0..3 = s[4..7]&63, 8..11 sc_4..7 =
// s[8..11]&15 | (s[0..3]>>6)<<4, 12..15 m_4..7 = s[8..11]>>4 |
// (s[4..7]>>6)<<4 (kScaleMin). V2 holds 0xC0 in every byte.
#define KROW(r) \
	TBL_16B(0, 8+r, 24) \
	AND_16B(0, 0, 26) \
	USHL_16B(0, 0, 27) \
	TBL_16B(1, 8+r, 25) \
	AND_16B(1, 1, 2) \
	USHR_16B_2(1, 1) \
	ORR_16B(12+r, 0, 1)

// KSCALES: the block's scales and mins of the 4 rows into the frame.
#define KSCALES \
	LOAD4(4) \
	VMOVI $192, V2.B16 \
	KROW(0) \
	KROW(1) \
	KROW(2) \
	KROW(3) \
	ZIP1_16B(0, 12, 13) \
	ZIP1_16B(1, 14, 15) \
	ZIP2_16B(2, 12, 13) \
	ZIP2_16B(3, 14, 15) \
	ZIP1_8H(4, 0, 1) \
	ZIP2_8H(5, 0, 1) \
	ZIP1_8H(6, 2, 3) \
	ZIP2_8H(7, 2, 3) \
	UXTL_8H(8, 4) \
	UXTL2_8H(9, 4) \
	UXTL_8H(10, 6) \
	UXTL2_8H(11, 6) \
	UXTL_4S(0, 8) \
	UXTL2_4S(1, 8) \
	UXTL_4S(2, 9) \
	UXTL2_4S(3, 9) \
	UXTL_4S(12, 10) \
	UXTL2_4S(13, 10) \
	UXTL_4S(14, 11) \
	UXTL2_4S(15, 11) \
	FSTPQ (F0, F1), 16(RSP) \
	FSTPQ (F2, F3), 48(RSP) \
	FSTPQ (F12, F13), 80(RSP) \
	FSTPQ (F14, F15), 112(RSP) \
	UXTL_8H(8, 5) \
	UXTL2_8H(9, 5) \
	UXTL_8H(10, 7) \
	UXTL2_8H(11, 7) \
	FSTPQ (F8, F9), 144(RSP) \
	FSTPQ (F10, F11), 176(RSP)

// KHEAD: d_w of the 4 rows in V28, dmin_w in V29.
#define KHEAD \
	VLD1 (R10), V30.S[0] \
	VLD1 (R11), V30.S[1] \
	VLD1 (R12), V30.S[2] \
	VLD1 (R13), V30.S[3] \
	FCVTL_4S(28, 30) \
	FCVTL2_4S(29, 30) \
	UZP1_4S(30, 28, 29) \
	UZP2_4S(29, 28, 29) \
	VMOV V30.B16, V28.B16

#define NIBLO \
	AND_16B(0, 0, 31) \
	AND_16B(1, 1, 31) \
	AND_16B(2, 2, 31) \
	AND_16B(3, 3, 31) \
	AND_16B(4, 4, 31) \
	AND_16B(5, 5, 31) \
	AND_16B(6, 6, 31) \
	AND_16B(7, 7, 31)

#define NIBHI \
	USHR_16B_4(0, 0) \
	USHR_16B_4(1, 1) \
	USHR_16B_4(2, 2) \
	USHR_16B_4(3, 3) \
	USHR_16B_4(4, 4) \
	USHR_16B_4(5, 5) \
	USHR_16B_4(6, 6) \
	USHR_16B_4(7, 7)

// KT(t, j): token t's P_j for the 4 rows into V14, I_t += P_j·sc_j.
#define KT(t, j) \
	FLDPQ (t*256+32*j)(R14), (F12, F13) \
	VEOR V14.B16, V14.B16, V14.B16 \
	SDOT_4S_E(14, 0, 12, 0) \
	SDOT_4S_E(14, 1, 12, 1) \
	SDOT_4S_E(14, 2, 12, 2) \
	SDOT_4S_E(14, 3, 12, 3) \
	SDOT_4S_E(14, 4, 13, 0) \
	SDOT_4S_E(14, 5, 13, 1) \
	SDOT_4S_E(14, 6, 13, 2) \
	SDOT_4S_E(14, 7, 13, 3) \
	MLA_4S(20+t, 14, 15)

#define KTOKS1(j) \
	KT(0, j)
#define KTOKS2(j) \
	KTOKS1(j) \
	KT(1, j)
#define KTOKS4(j) \
	KTOKS2(j) \
	KT(2, j) \
	KT(3, j)

// KSUB(c, j, NIB, TOKS): sub-block j = 2c+s, nibble s of qs[32c..32c+31].
#define KSUB(c, j, NIB, TOKS) \
	LOAD4(16+32*c) \
	TRANSPOSE(0) \
	LOAD4(32+32*c) \
	TRANSPOSE(4) \
	NIB \
	FMOVQ (16+16*j)(RSP), F15 \
	TOKS(j)

// KSUBS(TOKS): the block's 8 sub-blocks, one at a time (widths 2-8).
#define KSUBS(TOKS) \
	KSUB(0, 0, NIBLO, TOKS) \
	KSUB(0, 1, NIBHI, TOKS) \
	KSUB(1, 2, NIBLO, TOKS) \
	KSUB(1, 3, NIBHI, TOKS) \
	KSUB(2, 4, NIBLO, TOKS) \
	KSUB(2, 5, NIBHI, TOKS) \
	KSUB(3, 6, NIBLO, TOKS) \
	KSUB(3, 7, NIBHI, TOKS)
#define KSUBS2 KSUBS(KTOKS2)
#define KSUBS4 KSUBS(KTOKS4)

// Width 1 (decode) has the registers of the other tokens' sums free
// (V17..V19), so, as Q5_K's (K51PAIR), it takes the two sub-blocks 2c and
// 2c+1 of one qs chunk together: the 4 rows' 32 bytes qs[32c..32c+31]
// are loaded and transposed once (V0..V7), not once per sub-block, and
// per 4-byte chunk k its low nibbles (into V17) go to SDOT with the
// token's values of sub-block 2c (V8, V9) into P_2c (V14), its high
// nibbles (in place) with those of 2c+1 (V10, V11) into P_2c+1 (V15);
// then I += P_2c·sc_2c + P_2c+1·sc_2c+1, the same exact int32 sum as
// KSUB's (P_j and the products are the same integers, and int32 addition
// is associative).

// K41C(k, x, i): chunk k (raw qs bytes in V(k)); the token's values for
// it in lane i of V(x) (sub-block 2c) and V(x+2) (2c+1).
#define K41C(k, x, i) \
	AND_16B(17, k, 31) \
	SDOT_4S_E(14, 17, x, i) \
	USHR_16B_4(k, k) \
	SDOT_4S_E(15, k, x+2, i)

// K41PAIR(c): sub-blocks 2c and 2c+1 at width 1.
#define K41PAIR(c) \
	LOAD4(16+32*c) \
	TRANSPOSE(0) \
	LOAD4(32+32*c) \
	TRANSPOSE(4) \
	FLDPQ (64*c)(R14), (F8, F9) \
	FLDPQ (64*c+32)(R14), (F10, F11) \
	VEOR V14.B16, V14.B16, V14.B16 \
	VEOR V15.B16, V15.B16, V15.B16 \
	K41C(0, 8, 0) \
	K41C(1, 8, 1) \
	K41C(2, 8, 2) \
	K41C(3, 8, 3) \
	K41C(4, 9, 0) \
	K41C(5, 9, 1) \
	K41C(6, 9, 2) \
	K41C(7, 9, 3) \
	FLDPQ (16+32*c)(RSP), (F18, F19) \
	MLA_4S(20, 14, 18) \
	MLA_4S(20, 15, 19)

#define KPAIRS1 \
	K41PAIR(0) \
	K41PAIR(1) \
	K41PAIR(2) \
	K41PAIR(3)

// KE(t): token t's block into its sum: M from the mins (V8..V11) and its
// S32, then A = fma(d_w*d_x, float(I), A), A = fma(dmin_w*d_x, -float(M), A).
#define KE(t) \
	FMOVQ (t*64+16)(R15), F12 \
	FMOVS (t*64)(R15), F13 \
	VEOR V14.B16, V14.B16, V14.B16 \
	SMLAL_4S_E(14, 8, 12, 0) \
	SMLAL2_4S_E(14, 8, 12, 1) \
	SMLAL_4S_E(14, 9, 12, 2) \
	SMLAL2_4S_E(14, 9, 12, 3) \
	SMLAL_4S_E(14, 10, 12, 4) \
	SMLAL2_4S_E(14, 10, 12, 5) \
	SMLAL_4S_E(14, 11, 12, 6) \
	SMLAL2_4S_E(14, 11, 12, 7) \
	SCVTF_4S(20+t, 20+t) \
	FMUL_4S_E(30, 28, 13, 0) \
	FMLA_4S(16+t, 20+t, 30) \
	SCVTF_4S(14, 14) \
	FMUL_4S_E(30, 29, 13, 0) \
	FMLS_4S(16+t, 14, 30) \
	EOR_16B(20+t, 20+t, 20+t)

#define KEND1 \
	KE(0)
#define KEND2 \
	KEND1 \
	KE(1)
#define KEND4 \
	KEND2 \
	KE(2) \
	KE(3)

#define KZERO1 \
	VEOR V16.B16, V16.B16, V16.B16 \
	VEOR V20.B16, V20.B16, V20.B16
#define KZERO2 \
	KZERO1 \
	VEOR V17.B16, V17.B16, V17.B16 \
	VEOR V21.B16, V21.B16, V21.B16
#define KZERO4 \
	KZERO2 \
	VEOR V18.B16, V18.B16, V18.B16 \
	VEOR V19.B16, V19.B16, V19.B16 \
	VEOR V22.B16, V22.B16, V22.B16 \
	VEOR V23.B16, V23.B16, V23.B16

#define KOUT1 \
	MOVD R22, R21 \
	FMOVQ F16, (R21)
#define KOUT2 \
	KOUT1 \
	ADD R9, R21, R21 \
	FMOVQ F17, (R21)
#define KOUT4 \
	KOUT2 \
	ADD R9, R21, R21 \
	FMOVQ F18, (R21) \
	ADD R9, R21, R21 \
	FMOVQ F19, (R21)

// KKERNEL: G tokens per pass, Q passes (G*Q tokens; astr the bytes from
// one block's activations to the next); BODY the block's sub-blocks.
#define KKERNEL(astr, Q, ZERO, BODY, END, OUT, lhalf, lquad, lblk, lout) \
	KARGS \
lhalf: \
	MOVD R3, R24 \
	MOVD R4, R25 \
	MOVD R7, R22 \
	MOVD $Q, R23 \
lquad: \
	MOVD R0, R10 \
	ADD R1, R10, R11 \
	ADD R1, R11, R12 \
	ADD R1, R12, R13 \
	MOVD R24, R14 \
	MOVD R25, R15 \
	MOVD R2, R17 \
	ZERO \
	CBZ R17, lout \
lblk: \
	KSCALES \
	KHEAD \
	BODY \
	FLDPQ 144(RSP), (F8, F9) \
	FLDPQ 176(RSP), (F10, F11) \
	END \
	ADD R19, R10, R10 \
	ADD R19, R11, R11 \
	ADD R19, R12, R12 \
	ADD R19, R13, R13 \
	ADD $astr, R14, R14 \
	ADD R6, R15, R15 \
	SUBS $1, R17, R17 \
	BNE lblk \
lout: \
	OUT \
	ADD $1024, R24, R24 \
	ADD $256, R25, R25 \
	ADD R9<<2, R22, R22 \
	SUBS $1, R23, R23 \
	BNE lquad \
	ADD $16, R7, R7 \
	ADD R1<<2, R0, R0 \
	SUBS $1, R20, R20 \
	BNE lhalf \
	RET

// func rowsQ4Kx1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ4Kx1N(SB), NOSPLIT, $224-72
	KKERNEL(256, 1, KZERO1, KPAIRS1, KEND1, KOUT1, q4kh1, q4kq1, q4kb1, q4ko1)

// func rowsQ4Kx2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ4Kx2N(SB), NOSPLIT, $224-72
	KKERNEL(512, 1, KZERO2, KSUBS2, KEND2, KOUT2, q4kh2, q4kq2, q4kb2, q4ko2)

// func rowsQ4Kx4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ4Kx4N(SB), NOSPLIT, $224-72
	KKERNEL(1024, 1, KZERO4, KSUBS4, KEND4, KOUT4, q4kh4, q4kq4, q4kb4, q4ko4)

// func rowsQ4Kx8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ4Kx8N(SB), NOSPLIT, $224-72
	KKERNEL(2048, 2, KZERO4, KSUBS4, KEND4, KOUT4, q4kh8, q4kq8, q4kb8, q4ko8)

// Q6_K (210-byte blocks: ql[128], qh[64], int8 scales[16], d): the same
// loop over the 4 rows of a half and passes of up to 4 tokens, per
// sub-block k of 16 elements (e = 128h + 32s + l, k = e/16) the values
// w = (nibble s/2 of ql[64h+32(s%2)+l] | bits 2s..2s+1 of qh[32h+l]<<4) - 32
// of the 4 rows built in V0..V3 (chunks of 4 elements, transposed as
// above), then per token P_k by 4 SDOTs and I += P_k·sc_k; per block
// A = fma(d_w*d_x, float(I), A) (dotref.go). The 16 scales of the 4 rows
// are transposed (ZIP) and sign-extended into the frame, sc_k as 4 int32
// lanes at 16+16k(RSP). V24 holds 0x30 in every byte, V25 32.

#define Q6ARGS \
	MOVD w+0(FP), R0 \
	MOVD rstride+8(FP), R1 \
	MOVD nb+16(FP), R2 \
	MOVD qx+24(FP), R3 \
	MOVD dx+32(FP), R4 \
	MOVD dstride+48(FP), R6 \
	MOVD out+56(FP), R7 \
	MOVD ostride+64(FP), R9 \
	MOVD $210, R19 \
	MOVD $2, R20 \
	VMOVI $48, V24.B16 \
	VMOVI $32, V25.B16 \
	VMOVI $15, V31.B16

// Q6WIDEN(T, o): the 4 scales (4 rows each) in word lanes of V(T),
// sign-extended to int32, stored at o(RSP) onwards.
#define Q6WIDEN(T, o) \
	SXTL_8H(8, T) \
	SXTL2_8H(9, T) \
	SXTL_4S(12, 8) \
	SXTL2_4S(13, 8) \
	SXTL_4S(14, 9) \
	SXTL2_4S(15, 9) \
	FSTPQ (F12, F13), o(RSP) \
	FSTPQ (F14, F15), (o+32)(RSP)

#define Q6SCALES \
	LOAD4(192) \
	ZIP1_16B(0, 8, 9) \
	ZIP1_16B(1, 10, 11) \
	ZIP2_16B(2, 8, 9) \
	ZIP2_16B(3, 10, 11) \
	ZIP1_8H(4, 0, 1) \
	ZIP2_8H(5, 0, 1) \
	ZIP1_8H(6, 2, 3) \
	ZIP2_8H(7, 2, 3) \
	Q6WIDEN(4, 16) \
	Q6WIDEN(5, 80) \
	Q6WIDEN(6, 144) \
	Q6WIDEN(7, 208)

// Q6HEAD: d_w of the 4 rows in V28.
#define Q6HEAD \
	ADD $208, R10, R21 \
	VLD1 (R21), V30.H[0] \
	ADD $208, R11, R21 \
	VLD1 (R21), V30.H[1] \
	ADD $208, R12, R21 \
	VLD1 (R21), V30.H[2] \
	ADD $208, R13, R21 \
	VLD1 (R21), V30.H[3] \
	FCVTL_4S(28, 30)

#define Q6LO \
	AND_16B(0, 0, 31) \
	AND_16B(1, 1, 31) \
	AND_16B(2, 2, 31) \
	AND_16B(3, 3, 31)
#define Q6HI \
	USHR_16B_4(0, 0) \
	USHR_16B_4(1, 1) \
	USHR_16B_4(2, 2) \
	USHR_16B_4(3, 3)

// Q6H0..Q6H3: bits 2s..2s+1 of the qh chunks (V4..V7) to bits 4..5.
#define Q6H0 \
	SHL_16B_4(4, 4) \
	SHL_16B_4(5, 5) \
	SHL_16B_4(6, 6) \
	SHL_16B_4(7, 7)
#define Q6H1 \
	SHL_16B_2(4, 4) \
	SHL_16B_2(5, 5) \
	SHL_16B_2(6, 6) \
	SHL_16B_2(7, 7)
#define Q6H2
#define Q6H3 \
	USHR_16B_2(4, 4) \
	USHR_16B_2(5, 5) \
	USHR_16B_2(6, 6) \
	USHR_16B_2(7, 7)

// Q6T(t, k): token t's P_k (16 elements) for the 4 rows, I_t += P_k·sc_k.
#define Q6T(t, k) \
	FMOVQ ((t)*256+16*(k))(R14), F12 \
	VEOR V14.B16, V14.B16, V14.B16 \
	SDOT_4S_E(14, 0, 12, 0) \
	SDOT_4S_E(14, 1, 12, 1) \
	SDOT_4S_E(14, 2, 12, 2) \
	SDOT_4S_E(14, 3, 12, 3) \
	MLA_4S(20+t, 14, 15)

#define Q6TOKS1(k) \
	Q6T(0, k)
#define Q6TOKS2(k) \
	Q6TOKS1(k) \
	Q6T(1, k)
#define Q6TOKS4(k) \
	Q6TOKS2(k) \
	Q6T(2, k) \
	Q6T(3, k)

// Q6SUB(k, qlo, qho, NIB, QH, TOKS): sub-block k, its ql bytes at qlo
// (nibble NIB), its qh bytes at qho (shift QH).
#define Q6SUB(k, qlo, qho, NIB, QH, TOKS) \
	LOAD4(qlo) \
	TRANSPOSE(0) \
	NIB \
	LOAD4(qho) \
	TRANSPOSE(4) \
	QH \
	AND_16B(4, 4, 24) \
	AND_16B(5, 5, 24) \
	AND_16B(6, 6, 24) \
	AND_16B(7, 7, 24) \
	ORR_16B(0, 0, 4) \
	ORR_16B(1, 1, 5) \
	ORR_16B(2, 2, 6) \
	ORR_16B(3, 3, 7) \
	SUB_16B(0, 0, 25) \
	SUB_16B(1, 1, 25) \
	SUB_16B(2, 2, 25) \
	SUB_16B(3, 3, 25) \
	FMOVQ (16+16*(k))(RSP), F15 \
	TOKS(k)

// Q6H(h, TOKS): the 8 sub-blocks of half h of the block (s = 0..3, two
// sub-blocks of 16 each).
#define Q6H(h, TOKS) \
	Q6SUB(8*h+0, 64*h+0, 128+32*h, Q6LO, Q6H0, TOKS) \
	Q6SUB(8*h+1, 64*h+16, 144+32*h, Q6LO, Q6H0, TOKS) \
	Q6SUB(8*h+2, 64*h+32, 128+32*h, Q6LO, Q6H1, TOKS) \
	Q6SUB(8*h+3, 64*h+48, 144+32*h, Q6LO, Q6H1, TOKS) \
	Q6SUB(8*h+4, 64*h+0, 128+32*h, Q6HI, Q6H2, TOKS) \
	Q6SUB(8*h+5, 64*h+16, 144+32*h, Q6HI, Q6H2, TOKS) \
	Q6SUB(8*h+6, 64*h+32, 128+32*h, Q6HI, Q6H3, TOKS) \
	Q6SUB(8*h+7, 64*h+48, 144+32*h, Q6HI, Q6H3, TOKS)

// Q6E(t): A = fma(d_w*d_x, float(I), A) for token t; I starts again.
#define Q6E(t) \
	FMOVS (t*64)(R15), F13 \
	SCVTF_4S(20+t, 20+t) \
	FMUL_4S_E(30, 28, 13, 0) \
	FMLA_4S(16+t, 20+t, 30) \
	EOR_16B(20+t, 20+t, 20+t)

#define Q6END1 \
	Q6E(0)
#define Q6END2 \
	Q6END1 \
	Q6E(1)
#define Q6END4 \
	Q6END2 \
	Q6E(2) \
	Q6E(3)

#define Q6KERNEL(astr, Q, ZERO, TOKS, END, OUT, lhalf, lquad, lblk, lout) \
	Q6ARGS \
lhalf: \
	MOVD R3, R24 \
	MOVD R4, R25 \
	MOVD R7, R22 \
	MOVD $Q, R23 \
lquad: \
	MOVD R0, R10 \
	ADD R1, R10, R11 \
	ADD R1, R11, R12 \
	ADD R1, R12, R13 \
	MOVD R24, R14 \
	MOVD R25, R15 \
	MOVD R2, R17 \
	ZERO \
	CBZ R17, lout \
lblk: \
	Q6SCALES \
	Q6HEAD \
	Q6H(0, TOKS) \
	Q6H(1, TOKS) \
	END \
	ADD R19, R10, R10 \
	ADD R19, R11, R11 \
	ADD R19, R12, R12 \
	ADD R19, R13, R13 \
	ADD $astr, R14, R14 \
	ADD R6, R15, R15 \
	SUBS $1, R17, R17 \
	BNE lblk \
lout: \
	OUT \
	ADD $1024, R24, R24 \
	ADD $256, R25, R25 \
	ADD R9<<2, R22, R22 \
	SUBS $1, R23, R23 \
	BNE lquad \
	ADD $16, R7, R7 \
	ADD R1<<2, R0, R0 \
	SUBS $1, R20, R20 \
	BNE lhalf \
	RET

// func rowsQ6Kx1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ6Kx1N(SB), NOSPLIT, $288-72
	Q6KERNEL(256, 1, KZERO1, Q6TOKS1, Q6END1, KOUT1, q6kh1, q6kq1, q6kb1, q6ko1)

// func rowsQ6Kx2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ6Kx2N(SB), NOSPLIT, $288-72
	Q6KERNEL(512, 1, KZERO2, Q6TOKS2, Q6END2, KOUT2, q6kh2, q6kq2, q6kb2, q6ko2)

// func rowsQ6Kx4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ6Kx4N(SB), NOSPLIT, $288-72
	Q6KERNEL(1024, 1, KZERO4, Q6TOKS4, Q6END4, KOUT4, q6kh4, q6kq4, q6kb4, q6ko4)

// func rowsQ6Kx8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ6Kx8N(SB), NOSPLIT, $288-72
	Q6KERNEL(2048, 2, KZERO4, Q6TOKS4, Q6END4, KOUT4, q6kh8, q6kq8, q6kb8, q6ko8)

// Q5_K (176-byte blocks: d, dmin, scales[12], qh[32], qs[128]): Q4_K's
// loop, scales, mins and sums, with w = nibble s of qs[32c+l] | (bit j of
// qh[l])<<4 for sub-block j = 2c+s (q5kValues), 0..31. Per block the 4
// rows' qh bytes are transposed as the nibbles are (4-byte chunk k of the
// 4 rows in one vector) and kept in the frame at 208+16k(RSP) (K5QHF); per
// sub-block j each chunk is shifted so that bit j lands on bit 4 and
// inserted there (BIT, V30 = 0x10 in every byte) into the nibbles, whose
// bit 4 is clear. Width 1 takes the sub-blocks in pairs (K51PAIR, below).

// SHL_16B_N / USHR_16B_N: shl / ushr vd.16b, vn.16b, #s (1 <= s <= 7).
#define SHL_16B_N(d, n, s) WORD $(0x4F005400 | (8+(s))<<16 | (n)<<5 | (d))
#define USHR_16B_N(d, n, s) WORD $(0x6F000400 | (16-(s))<<16 | (n)<<5 | (d))

// K5ARGS: KARGS with Q5_K's block size in R19.
#define K5ARGS \
	KARGS \
	MOVD $176, R19

// K5QHF: the frame offset of the transposed qh (8 chunks of 16 bytes;
// named, since go vet's asmdecl reads a literal offset in these macros,
// which follow rowsQ6Kx8N's TEXT, against that function's frame).
#define K5QHF 208

// K5QH: the block's qh of the 4 rows, transposed, into the frame; V30 the
// bit-4 mask (KHEAD used V30 before; KE uses it after the sub-blocks).
#define K5QH \
	LOAD4(16) \
	TRANSPOSE(0) \
	LOAD4(32) \
	TRANSPOSE(4) \
	FSTPQ (F0, F1), K5QHF(RSP) \
	FSTPQ (F2, F3), (K5QHF+32)(RSP) \
	FSTPQ (F4, F5), (K5QHF+64)(RSP) \
	FSTPQ (F6, F7), (K5QHF+96)(RSP) \
	VMOVI $16, V30.B16

// K5B0..K5B7: bit j of V8..V11 to bit 4.
#define K5SH(SH, s) \
	SH(8, 8, s) \
	SH(9, 9, s) \
	SH(10, 10, s) \
	SH(11, 11, s)
#define K5B0 K5SH(SHL_16B_N, 4)
#define K5B1 K5SH(SHL_16B_N, 3)
#define K5B2 K5SH(SHL_16B_N, 2)
#define K5B3 K5SH(SHL_16B_N, 1)
#define K5B4
#define K5B5 K5SH(USHR_16B_N, 1)
#define K5B6 K5SH(USHR_16B_N, 2)
#define K5B7 K5SH(USHR_16B_N, 3)

// K5HI(k, o, B): qh chunks k..k+3 (frame offset o) shifted by B, their
// bit 4 inserted into V(k)..V(k+3).
#define K5HI(k, o, B) \
	FLDPQ o(RSP), (F8, F9) \
	FLDPQ (o+32)(RSP), (F10, F11) \
	B \
	BIT_16B(k, 8, 30) \
	BIT_16B(k+1, 9, 30) \
	BIT_16B(k+2, 10, 30) \
	BIT_16B(k+3, 11, 30)

// K5SUB(c, j, NIB, B, TOKS): sub-block j = 2c+s, nibble s of
// qs[32c..32c+31], bit j of qh.
#define K5SUB(c, j, NIB, B, TOKS) \
	LOAD4(48+32*c) \
	TRANSPOSE(0) \
	LOAD4(64+32*c) \
	TRANSPOSE(4) \
	NIB \
	K5HI(0, K5QHF, B) \
	K5HI(4, (K5QHF+64), B) \
	FMOVQ (16+16*j)(RSP), F15 \
	TOKS(j)

// K5SUBS(TOKS): the block's 8 sub-blocks, one at a time (widths 2-8).
#define K5SUBS(TOKS) \
	K5SUB(0, 0, NIBLO, K5B0, TOKS) \
	K5SUB(0, 1, NIBHI, K5B1, TOKS) \
	K5SUB(1, 2, NIBLO, K5B2, TOKS) \
	K5SUB(1, 3, NIBHI, K5B3, TOKS) \
	K5SUB(2, 4, NIBLO, K5B4, TOKS) \
	K5SUB(2, 5, NIBHI, K5B5, TOKS) \
	K5SUB(3, 6, NIBLO, K5B6, TOKS) \
	K5SUB(3, 7, NIBHI, K5B7, TOKS)
#define K5SUBS2 K5SUBS(KTOKS2)
#define K5SUBS4 K5SUBS(KTOKS4)

// Width 1 (decode) has the registers of the other tokens' sums free
// (V17..V19), so it takes the two sub-blocks 2c and 2c+1 of one qs chunk
// together: the 4 rows' 32 bytes qs[32c..32c+31] are loaded and
// transposed once (V0..V7), and per 4-byte chunk k its low nibbles (into
// V17) and then its high nibbles (in place) get their fifth bits from qh
// chunk k (V12 or V13; shifted into V18 and V19) and go to SDOT with the token's
// values of sub-block 2c (V8, V9) and 2c+1 (V10, V11), P_2c in V14 and
// P_2c+1 in V15; then I += P_2c·sc_2c + P_2c+1·sc_2c+1 (the same exact
// int32 sum as K5SUB's).

// K5V0..K5V7(d, n): qh chunk V(n) with bit j moved to bit 4, into V(d)
// (nothing for j = 4); K5R0..K5R7(d, n): the register that then holds it.
#define K5V0(d, n) SHL_16B_N(d, n, 4)
#define K5V1(d, n) SHL_16B_N(d, n, 3)
#define K5V2(d, n) SHL_16B_N(d, n, 2)
#define K5V3(d, n) SHL_16B_N(d, n, 1)
#define K5V4(d, n)
#define K5V5(d, n) USHR_16B_N(d, n, 1)
#define K5V6(d, n) USHR_16B_N(d, n, 2)
#define K5V7(d, n) USHR_16B_N(d, n, 3)
#define K5R0(d, n) d
#define K5R1(d, n) d
#define K5R2(d, n) d
#define K5R3(d, n) d
#define K5R4(d, n) n
#define K5R5(d, n) d
#define K5R6(d, n) d
#define K5R7(d, n) d

// K51C(k, q, xa, xb, i, V0, R0, V1, R1): chunk k (raw qs bytes in V(k)),
// its qh in V(q), the token's values for it in lane i of V(xa) (sub-block
// 2c) and V(xb) (2c+1); V0, R0 and V1, R1 the K5V, K5R of bits 2c, 2c+1.
#define K51C(k, q, xa, xb, i, V0, R0, V1, R1) \
	AND_16B(17, k, 31) \
	V0(18, q) \
	BIT_16B(17, R0(18, q), 30) \
	SDOT_4S_E(14, 17, xa, i) \
	USHR_16B_4(k, k) \
	V1(19, q) \
	BIT_16B(k, R1(19, q), 30) \
	SDOT_4S_E(15, k, xb, i)

// K51Q(k, o, xa, xb, i, V0, R0, V1, R1): chunks k, k+1 (qh from the frame
// at o).
#define K51Q(k, o, xa, xb, i, V0, R0, V1, R1) \
	FLDPQ o(RSP), (F12, F13) \
	K51C(k, 12, xa, xb, i, V0, R0, V1, R1) \
	K51C(k+1, 13, xa, xb, i+1, V0, R0, V1, R1)

// K51PAIR(c, V0, R0, V1, R1): sub-blocks 2c and 2c+1 at width 1.
#define K51PAIR(c, V0, R0, V1, R1) \
	LOAD4(48+32*c) \
	TRANSPOSE(0) \
	LOAD4(64+32*c) \
	TRANSPOSE(4) \
	FLDPQ (64*c)(R14), (F8, F9) \
	FLDPQ (64*c+32)(R14), (F10, F11) \
	VEOR V14.B16, V14.B16, V14.B16 \
	VEOR V15.B16, V15.B16, V15.B16 \
	K51Q(0, K5QHF, 8, 10, 0, V0, R0, V1, R1) \
	K51Q(2, (K5QHF+32), 8, 10, 2, V0, R0, V1, R1) \
	K51Q(4, (K5QHF+64), 9, 11, 0, V0, R0, V1, R1) \
	K51Q(6, (K5QHF+96), 9, 11, 2, V0, R0, V1, R1) \
	FLDPQ (16+32*c)(RSP), (F18, F19) \
	MLA_4S(20, 14, 18) \
	MLA_4S(20, 15, 19)

#define K5PAIRS1 \
	K51PAIR(0, K5V0, K5R0, K5V1, K5R1) \
	K51PAIR(1, K5V2, K5R2, K5V3, K5R3) \
	K51PAIR(2, K5V4, K5R4, K5V5, K5R5) \
	K51PAIR(3, K5V6, K5R6, K5V7, K5R7)

#define K5KERNEL(astr, Q, ZERO, BODY, END, OUT, lhalf, lquad, lblk, lout) \
	K5ARGS \
lhalf: \
	MOVD R3, R24 \
	MOVD R4, R25 \
	MOVD R7, R22 \
	MOVD $Q, R23 \
lquad: \
	MOVD R0, R10 \
	ADD R1, R10, R11 \
	ADD R1, R11, R12 \
	ADD R1, R12, R13 \
	MOVD R24, R14 \
	MOVD R25, R15 \
	MOVD R2, R17 \
	ZERO \
	CBZ R17, lout \
lblk: \
	KSCALES \
	KHEAD \
	K5QH \
	BODY \
	FLDPQ 144(RSP), (F8, F9) \
	FLDPQ 176(RSP), (F10, F11) \
	END \
	ADD R19, R10, R10 \
	ADD R19, R11, R11 \
	ADD R19, R12, R12 \
	ADD R19, R13, R13 \
	ADD $astr, R14, R14 \
	ADD R6, R15, R15 \
	SUBS $1, R17, R17 \
	BNE lblk \
lout: \
	OUT \
	ADD $1024, R24, R24 \
	ADD $256, R25, R25 \
	ADD R9<<2, R22, R22 \
	SUBS $1, R23, R23 \
	BNE lquad \
	ADD $16, R7, R7 \
	ADD R1<<2, R0, R0 \
	SUBS $1, R20, R20 \
	BNE lhalf \
	RET

// func rowsQ5Kx1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ5Kx1N(SB), NOSPLIT, $352-72
	K5KERNEL(256, 1, KZERO1, K5PAIRS1, KEND1, KOUT1, q5kh1, q5kq1, q5kb1, q5ko1)

// func rowsQ5Kx2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ5Kx2N(SB), NOSPLIT, $352-72
	K5KERNEL(512, 1, KZERO2, K5SUBS2, KEND2, KOUT2, q5kh2, q5kq2, q5kb2, q5ko2)

// func rowsQ5Kx4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ5Kx4N(SB), NOSPLIT, $352-72
	K5KERNEL(1024, 1, KZERO4, K5SUBS4, KEND4, KOUT4, q5kh4, q5kq4, q5kb4, q5ko4)

// func rowsQ5Kx8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ5Kx8N(SB), NOSPLIT, $352-72
	K5KERNEL(2048, 2, KZERO4, K5SUBS4, KEND4, KOUT4, q5kh8, q5kq8, q5kb8, q5ko8)
