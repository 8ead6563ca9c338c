#include "textflag.h"
#include "neon_arm64.h"

// Q3_K and Q2_K row kernels on arm64 (NEON with SDOT): 8 weight rows times
// the Q8_K activations of 1, 2, 4 or 8 tokens, with the arguments and the
// loop of the Q6_K kernels of kqrows_arm64.s (the 8 rows as two halves of
// 4 rows, the 4 lanes of a vector; a width of 8 as two passes of 4 tokens
// over the half), computing exactly the canonical sums of dotref.go per
// row and token over the blocks in order (P_k the exact Σ w·q over
// sub-block k of 16 elements):
//   Q3_K  I = Σ_k sc_k·P_k (sc 6-bit minus 32, w -4..3),
//         A = fma(d_w*d_x, float(I), A)
//   Q2_K  I = Σ_k sc_k·P_k (sc the low nibble of scales[k], w 0..3),
//         M = Σ_k m_k·S16_k (m the high nibble),
//         A = fma(d_w*d_x, float(I), A), A = fma(dmin_w*d_x, -float(M), A)
// I and M are int32 sums (exact, in any order), so the sub-blocks run in
// the order their bytes come: element e = 128h + 32s + 16u + l (l < 16) is
// in sub-block k = 8h + 2s + u, its 2 low bits are bits 2s..2s+1 of
// qs[32h+16u+l] and (Q3_K) its high bit is bit 4h+s of hmask[16u+l]. Per
// (h, u) the 16 qs bytes of the 4 rows are loaded once and transposed into
// 4-byte chunks (V4..V7, as Q4_0's), and each s takes bits 2s..2s+1 (Q2_K:
// an AND with 3, then the chunks shift down 2; Q3_K: shifts and inserts
// with the inverted hmask chunks V24..V27, loaded per u, see Q3VAL).
// Every token's P_k comes from 4 SDOTs by element, I += P_k·sc_k (MLA).
//
// Per block, the 16 scales of the 4 rows are unpacked in bytes (one row a
// vector: TBL, masks, USHL), transposed (ZIP) and widened into the frame,
// sc_k as 4 int32 lanes at 16+16k(RSP); Q2_K's mins as pairs (m_2p,
// m_2p+1) of 4 int16 lanes at 272+16p(RSP), which the block's end
// multiplies by the token's S16 (SMLAL by element).
//
// Registers (as kqrows_arm64.s): R10..R13 the half's 4 rows, R14 the
// token quad's activations (block by block), R15 its records, R17 blocks
// left, R19 the block size, R20 halves left, R21 a scratch address, R22
// the quad's outputs, R23 quads left, R24, R25 the quad's first
// activations and records. V0..V3 a sub-block's values, V4..V7 the qs
// chunks, V8..V15 loads, transposes, a token's activations (V12), P (V14)
// and sc_k (V15); V16..V19 the float sums of the quad's 4 tokens, V20..V23
// their I; V24..V27 the inverted hmask chunks (Q3_K), V28 d_w, V29
// dmin_w (Q2_K), V30 a product, V31 3 in every byte (Q2_K).

// Q3_K's scale unpacking, for the 16 bytes at 94 of a block (scales[i] at
// byte 2+i): sc_i = (s[i%8] >> 4(i/8)) & 15 | ((s[8+i%4] >> 2(i/4)) & 3) << 4,
// minus 32 (q3Scales). TBL indexes, masks and shifts of the low 4 bits,
// then of the high 2.
DATA kq3c<>+0(SB)/8, $0x0908070605040302
DATA kq3c<>+8(SB)/8, $0x0908070605040302
DATA kq3c<>+16(SB)/8, $0x0F0F0F0F0F0F0F0F
DATA kq3c<>+24(SB)/8, $0xF0F0F0F0F0F0F0F0
DATA kq3c<>+32(SB)/8, $0x0000000000000000
DATA kq3c<>+40(SB)/8, $0xFCFCFCFCFCFCFCFC
DATA kq3c<>+48(SB)/8, $0x0D0C0B0A0D0C0B0A
DATA kq3c<>+56(SB)/8, $0x0D0C0B0A0D0C0B0A
DATA kq3c<>+64(SB)/8, $0x0C0C0C0C03030303
DATA kq3c<>+72(SB)/8, $0xC0C0C0C030303030
DATA kq3c<>+80(SB)/8, $0x0202020204040404
DATA kq3c<>+88(SB)/8, $0xFEFEFEFE00000000
GLOBL kq3c<>(SB), RODATA|NOPTR, $96

#define KARGS(bsize) \
	MOVD w+0(FP), R0 \
	MOVD rstride+8(FP), R1 \
	MOVD nb+16(FP), R2 \
	MOVD qx+24(FP), R3 \
	MOVD dx+32(FP), R4 \
	MOVD dstride+48(FP), R6 \
	MOVD out+56(FP), R7 \
	MOVD ostride+64(FP), R9 \
	MOVD $bsize, R19 \
	MOVD $2, R20 \
	VMOVI $3, V31.B16

// LOAD4(off) loads 16 bytes at off of each row's block into V8..V11.
#define LOAD4(off) \
	FMOVQ off(R10), F8 \
	FMOVQ off(R11), F9 \
	FMOVQ off(R12), F10 \
	FMOVQ off(R13), F11

// TRANSPOSE(k): V8..V11 (rows 0..3) to 4-byte chunks k..k+3 of the 4 rows
// in V(k)..V(k+3) (V12..V15 scratch).
#define TRANSPOSE(k) \
	TRN1_4S(12, 8, 9) \
	TRN2_4S(13, 8, 9) \
	TRN1_4S(14, 10, 11) \
	TRN2_4S(15, 10, 11) \
	TRN1_2D(k, 12, 14) \
	TRN1_2D(k+1, 13, 15) \
	TRN2_2D(k+2, 12, 14) \
	TRN2_2D(k+3, 13, 15)

// ZIPROWS(a): the 16 bytes of rows 0..3 in V(a)..V(a+3) to V4..V7, byte
// 4k'+r of V(4+k/4) being row r's byte k (k' = k%4); V0..V3 scratch.
#define ZIPROWS(a) \
	ZIP1_16B(0, a, a+1) \
	ZIP1_16B(1, a+2, a+3) \
	ZIP2_16B(2, a, a+1) \
	ZIP2_16B(3, a+2, a+3) \
	ZIP1_8H(4, 0, 1) \
	ZIP2_8H(5, 0, 1) \
	ZIP1_8H(6, 2, 3) \
	ZIP2_8H(7, 2, 3)

// SWIDEN(T, o) and UWIDEN(T, o): the 4 scales (4 rows each) in the word
// lanes of V(T), sign- or zero-extended to int32, at o(RSP) onwards
// (V0..V3 scratch).
#define SWIDEN(T, o) \
	SXTL_8H(0, T) \
	SXTL2_8H(1, T) \
	SXTL_4S(2, 0) \
	SXTL2_4S(3, 0) \
	FSTPQ (F2, F3), o(RSP) \
	SXTL_4S(2, 1) \
	SXTL2_4S(3, 1) \
	FSTPQ (F2, F3), (o+32)(RSP)
#define UWIDEN(T, o) \
	UXTL_8H(0, T) \
	UXTL2_8H(1, T) \
	UXTL_4S(2, 0) \
	UXTL2_4S(3, 0) \
	FSTPQ (F2, F3), o(RSP) \
	UXTL_4S(2, 1) \
	UXTL2_4S(3, 1) \
	FSTPQ (F2, F3), (o+32)(RSP)

// KT(t, k): token t's P_k (16 elements) for the 4 rows, I_t += P_k·sc_k.
#define KT(t, k) \
	FMOVQ ((t)*256+16*(k))(R14), F12 \
	VEOR V14.B16, V14.B16, V14.B16 \
	SDOT_4S_E(14, 0, 12, 0) \
	SDOT_4S_E(14, 1, 12, 1) \
	SDOT_4S_E(14, 2, 12, 2) \
	SDOT_4S_E(14, 3, 12, 3) \
	MLA_4S(20+t, 14, 15)

#define KTOKS1(k) \
	KT(0, k)
#define KTOKS2(k) \
	KTOKS1(k) \
	KT(1, k)
#define KTOKS4(k) \
	KTOKS2(k) \
	KT(2, k) \
	KT(3, k)

// QSHIFT: the qs chunks' next 2 bits down.
#define QSHIFT \
	USHR_16B_2(4, 4) \
	USHR_16B_2(5, 5) \
	USHR_16B_2(6, 6) \
	USHR_16B_2(7, 7)

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

// KLOOP: G tokens per pass, Q passes (G*Q tokens; astr the bytes from one
// block's activations to the next); BLOCK one block of the 4 rows.
#define KLOOP(ARGS, astr, Q, ZERO, BLOCK, OUT, lhalf, lquad, lblk, lout) \
	ARGS \
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
	BLOCK \
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

// ---- Q3_K (110-byte blocks: hmask[32], qs[64], scales[12], d) ----

#define Q3ARGS \
	KARGS(110)

// Q3ROW(r): row r's loaded scale bytes (V8+r) to its 16 sc_k in V8+r.
#define Q3ROW(r) \
	TBL_16B(7, 8+r, 0) \
	AND_16B(7, 7, 1) \
	USHL_16B(7, 7, 2) \
	TBL_16B(24, 8+r, 3) \
	AND_16B(24, 24, 4) \
	USHL_16B(24, 24, 5) \
	ORR_16B(8+r, 7, 24) \
	SUB_16B(8+r, 8+r, 6)

#define Q3SCALES \
	LOAD4(94) \
	MOVD $kq3c<>(SB), R21 \
	VLD1.P 64(R21), [V0.B16, V1.B16, V2.B16, V3.B16] \
	VLD1 (R21), [V4.B16, V5.B16] \
	VMOVI $32, V6.B16 \
	Q3ROW(0) \
	Q3ROW(1) \
	Q3ROW(2) \
	Q3ROW(3) \
	ZIPROWS(8) \
	SWIDEN(4, 16) \
	SWIDEN(5, 80) \
	SWIDEN(6, 144) \
	SWIDEN(7, 208)

// Q3HEAD: d_w of the 4 rows in V28.
#define Q3HEAD \
	ADD $108, R10, R21 \
	VLD1 (R21), V30.H[0] \
	ADD $108, R11, R21 \
	VLD1 (R21), V30.H[1] \
	ADD $108, R12, R21 \
	VLD1 (R21), V30.H[2] \
	ADD $108, R13, R21 \
	VLD1 (R21), V30.H[3] \
	FCVTL_4S(28, 30)

// Q3VAL(i, HSH, QSH, src): chunk i's values w into V(i). The inverted
// hmask chunk (V24+i) shifted left by HSH puts the clear-bit flag of
// element bit 4h+s at bit 7, the qs chunk (V4+i) shifted left by QSH (into
// V(i); none for s = 3, src 4: the chunk itself) its 2 low bits at bits
// 6..7; SRI by 1 inserts them below the flag, and the arithmetic shift by
// 5 takes the 3-bit field (flag, lo) as signed: lo where the hmask bit is
// set, lo - 4 where it is clear (q3Values).
#define Q3VAL(i, HSH, QSH, src) \
	HSH(8+i, 24+i) \
	QSH(i, 4+i) \
	SRI_16B_1(8+i, src+i) \
	SSHR_16B_5(i, 8+i)

#define Q3NOSHIFT(d, n)

// Q3SUB(k, HSH, QSH, src, TOKS): sub-block k (see Q3VAL).
#define Q3SUB(k, HSH, QSH, src, TOKS) \
	Q3VAL(0, HSH, QSH, src) \
	Q3VAL(1, HSH, QSH, src) \
	Q3VAL(2, HSH, QSH, src) \
	Q3VAL(3, HSH, QSH, src) \
	FMOVQ (16+16*(k))(RSP), F15 \
	TOKS(k)

// Q3H0 and Q3H1 (u, TOKS): the 4 sub-blocks 8h+2s+u (s = 0..3) of
// qs[32h+16u..], their high bits hmask bits 4h+s.
#define Q3H0(u, TOKS) \
	LOAD4(32+16*(u)) \
	TRANSPOSE(4) \
	Q3SUB((u), SHL_16B_7, SHL_16B_6, 0, TOKS) \
	Q3SUB(2+(u), SHL_16B_6, SHL_16B_4, 0, TOKS) \
	Q3SUB(4+(u), SHL_16B_5, SHL_16B_2, 0, TOKS) \
	Q3SUB(6+(u), SHL_16B_4, Q3NOSHIFT, 4, TOKS)
#define Q3H1(u, TOKS) \
	LOAD4(64+16*(u)) \
	TRANSPOSE(4) \
	Q3SUB(8+(u), SHL_16B_3, SHL_16B_6, 0, TOKS) \
	Q3SUB(10+(u), SHL_16B_2, SHL_16B_4, 0, TOKS) \
	Q3SUB(12+(u), SHL_16B_1, SHL_16B_2, 0, TOKS) \
	Q3SUB(14+(u), MOVV, Q3NOSHIFT, 4, TOKS)

// Q3U(u, TOKS): the 8 sub-blocks whose high bits are in hmask[16u..]
// (inverted once: V24..V27).
#define Q3U(u, TOKS) \
	LOAD4(16*(u)) \
	TRANSPOSE(24) \
	NOT_16B(24, 24) \
	NOT_16B(25, 25) \
	NOT_16B(26, 26) \
	NOT_16B(27, 27) \
	Q3H0(u, TOKS) \
	Q3H1(u, TOKS)

// Q3E(t): A = fma(d_w*d_x, float(I), A) for token t; I starts again.
#define Q3E(t) \
	FMOVS (t*64)(R15), F13 \
	SCVTF_4S(20+t, 20+t) \
	FMUL_4S_E(30, 28, 13, 0) \
	FMLA_4S(16+t, 20+t, 30) \
	EOR_16B(20+t, 20+t, 20+t)

#define Q3END1 \
	Q3E(0)
#define Q3END2 \
	Q3END1 \
	Q3E(1)
#define Q3END4 \
	Q3END2 \
	Q3E(2) \
	Q3E(3)

#define Q3BLOCK1 Q3SCALES; Q3HEAD; Q3U(0, KTOKS1); Q3U(1, KTOKS1); Q3END1
#define Q3BLOCK2 Q3SCALES; Q3HEAD; Q3U(0, KTOKS2); Q3U(1, KTOKS2); Q3END2
#define Q3BLOCK4 Q3SCALES; Q3HEAD; Q3U(0, KTOKS4); Q3U(1, KTOKS4); Q3END4

// ---- Q2_K (84-byte blocks: scales[16], qs[64], d, dmin) ----

#define Q2ARGS \
	KARGS(84)

// Q2SCALES: sc_k (low nibbles) and the mins (high nibbles) of the 4 rows
// into the frame.
#define Q2SCALES \
	LOAD4(0) \
	VMOVI $15, V0.B16 \
	AND_16B(12, 8, 0) \
	AND_16B(13, 9, 0) \
	AND_16B(14, 10, 0) \
	AND_16B(15, 11, 0) \
	USHR_16B_4(8, 8) \
	USHR_16B_4(9, 9) \
	USHR_16B_4(10, 10) \
	USHR_16B_4(11, 11) \
	ZIPROWS(12) \
	UWIDEN(4, 16) \
	UWIDEN(5, 80) \
	UWIDEN(6, 144) \
	UWIDEN(7, 208) \
	ZIPROWS(8) \
	UXTL_8H(0, 4) \
	UXTL2_8H(1, 4) \
	UXTL_8H(2, 5) \
	UXTL2_8H(3, 5) \
	FSTPQ (F0, F1), 272(RSP) \
	FSTPQ (F2, F3), 304(RSP) \
	UXTL_8H(0, 6) \
	UXTL2_8H(1, 6) \
	UXTL_8H(2, 7) \
	UXTL2_8H(3, 7) \
	FSTPQ (F0, F1), 336(RSP) \
	FSTPQ (F2, F3), 368(RSP)

// Q2HEAD: d_w of the 4 rows in V28, dmin_w in V29.
#define Q2HEAD \
	ADD $80, R10, R21 \
	VLD1 (R21), V30.S[0] \
	ADD $80, R11, R21 \
	VLD1 (R21), V30.S[1] \
	ADD $80, R12, R21 \
	VLD1 (R21), V30.S[2] \
	ADD $80, R13, R21 \
	VLD1 (R21), V30.S[3] \
	FCVTL_4S(28, 30) \
	FCVTL2_4S(29, 30) \
	UZP1_4S(30, 28, 29) \
	UZP2_4S(29, 28, 29) \
	VMOV V30.B16, V28.B16

// Q2SUB(k, TOKS): sub-block k from the current qs bits.
#define Q2SUB(k, TOKS) \
	AND_16B(0, 4, 31) \
	AND_16B(1, 5, 31) \
	AND_16B(2, 6, 31) \
	AND_16B(3, 7, 31) \
	FMOVQ (16+16*(k))(RSP), F15 \
	TOKS(k)

// Q2H(h, u, TOKS): the 4 sub-blocks 8h+2s+u (s = 0..3) of qs[32h+16u..].
#define Q2H(h, u, TOKS) \
	LOAD4(16+32*(h)+16*(u)) \
	TRANSPOSE(4) \
	Q2SUB(8*(h)+(u), TOKS) \
	QSHIFT \
	Q2SUB(8*(h)+2+(u), TOKS) \
	QSHIFT \
	Q2SUB(8*(h)+4+(u), TOKS) \
	QSHIFT \
	Q2SUB(8*(h)+6+(u), TOKS)

// Q2E(t): token t's block into its sum: M from the mins (V0..V7) and its
// S16, then A = fma(d_w*d_x, float(I), A), A = fma(dmin_w*d_x, -float(M), A).
#define Q2E(t) \
	FLDPQ (t*64+32)(R15), (F12, F13) \
	FMOVS (t*64)(R15), F11 \
	VEOR V14.B16, V14.B16, V14.B16 \
	SMLAL_4S_E(14, 0, 12, 0) \
	SMLAL2_4S_E(14, 0, 12, 1) \
	SMLAL_4S_E(14, 1, 12, 2) \
	SMLAL2_4S_E(14, 1, 12, 3) \
	SMLAL_4S_E(14, 2, 12, 4) \
	SMLAL2_4S_E(14, 2, 12, 5) \
	SMLAL_4S_E(14, 3, 12, 6) \
	SMLAL2_4S_E(14, 3, 12, 7) \
	SMLAL_4S_E(14, 4, 13, 0) \
	SMLAL2_4S_E(14, 4, 13, 1) \
	SMLAL_4S_E(14, 5, 13, 2) \
	SMLAL2_4S_E(14, 5, 13, 3) \
	SMLAL_4S_E(14, 6, 13, 4) \
	SMLAL2_4S_E(14, 6, 13, 5) \
	SMLAL_4S_E(14, 7, 13, 6) \
	SMLAL2_4S_E(14, 7, 13, 7) \
	SCVTF_4S(20+t, 20+t) \
	FMUL_4S_E(30, 28, 11, 0) \
	FMLA_4S(16+t, 20+t, 30) \
	SCVTF_4S(14, 14) \
	FMUL_4S_E(30, 29, 11, 0) \
	FMLS_4S(16+t, 14, 30) \
	EOR_16B(20+t, 20+t, 20+t)

// Q2MINS: the mins of the block into V0..V7.
#define Q2MINS \
	FLDPQ 272(RSP), (F0, F1) \
	FLDPQ 304(RSP), (F2, F3) \
	FLDPQ 336(RSP), (F4, F5) \
	FLDPQ 368(RSP), (F6, F7)

#define Q2END1 \
	Q2MINS \
	Q2E(0)
#define Q2END2 \
	Q2END1 \
	Q2E(1)
#define Q2END4 \
	Q2END2 \
	Q2E(2) \
	Q2E(3)

#define Q2BODY(TOKS) \
	Q2H(0, 0, TOKS) \
	Q2H(0, 1, TOKS) \
	Q2H(1, 0, TOKS) \
	Q2H(1, 1, TOKS)

#define Q2BLOCK1 Q2SCALES; Q2HEAD; Q2BODY(KTOKS1); Q2END1
#define Q2BLOCK2 Q2SCALES; Q2HEAD; Q2BODY(KTOKS2); Q2END2
#define Q2BLOCK4 Q2SCALES; Q2HEAD; Q2BODY(KTOKS4); Q2END4

// func rowsQ3Kx1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ3Kx1N(SB), NOSPLIT, $288-72
	KLOOP(Q3ARGS, 256, 1, KZERO1, Q3BLOCK1, KOUT1, q3kh1, q3kq1, q3kb1, q3ko1)

// func rowsQ3Kx2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ3Kx2N(SB), NOSPLIT, $288-72
	KLOOP(Q3ARGS, 512, 1, KZERO2, Q3BLOCK2, KOUT2, q3kh2, q3kq2, q3kb2, q3ko2)

// func rowsQ3Kx4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ3Kx4N(SB), NOSPLIT, $288-72
	KLOOP(Q3ARGS, 1024, 1, KZERO4, Q3BLOCK4, KOUT4, q3kh4, q3kq4, q3kb4, q3ko4)

// func rowsQ3Kx8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ3Kx8N(SB), NOSPLIT, $288-72
	KLOOP(Q3ARGS, 2048, 2, KZERO4, Q3BLOCK4, KOUT4, q3kh8, q3kq8, q3kb8, q3ko8)

// func rowsQ2Kx1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ2Kx1N(SB), NOSPLIT, $416-72
	KLOOP(Q2ARGS, 256, 1, KZERO1, Q2BLOCK1, KOUT1, q2kh1, q2kq1, q2kb1, q2ko1)

// func rowsQ2Kx2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ2Kx2N(SB), NOSPLIT, $416-72
	KLOOP(Q2ARGS, 512, 1, KZERO2, Q2BLOCK2, KOUT2, q2kh2, q2kq2, q2kb2, q2ko2)

// func rowsQ2Kx4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ2Kx4N(SB), NOSPLIT, $416-72
	KLOOP(Q2ARGS, 1024, 1, KZERO4, Q2BLOCK4, KOUT4, q2kh4, q2kq4, q2kb4, q2ko4)

// func rowsQ2Kx8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ2Kx8N(SB), NOSPLIT, $416-72
	KLOOP(Q2ARGS, 2048, 2, KZERO4, Q2BLOCK4, KOUT4, q2kh8, q2kq8, q2kb8, q2ko8)
