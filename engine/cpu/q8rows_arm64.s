#include "textflag.h"
#include "neon_arm64.h"

// Integer row kernels on arm64 (NEON with the dot-product extension): 8
// weight rows (Q4_0, Q4_1 or Q8_0) times the 8-bit activations of 1, 2, 4
// or 8 tokens, with the arguments of the amd64 row kernels
// (q8rows_amd64.s), computing exactly their canonical per-token sum
// (dotQ8Ref):
//   A = fma(d_w*d_x, float(I_b), A), then for Q4_1 A = fma(m_w, s_x, A),
// over the blocks b in order, I_b the exact int32 product of block b.
//
// A call runs the 8 rows as two halves of 4 (a NEON register holds 4
// lanes; four rows times eight tokens of accumulators fit the 32 vector
// registers, eight rows would not). Per block the 4 rows' weights are
// loaded and transposed (TRN1/TRN2: 4x4 words) so that V(k) holds 4-byte
// chunk k of each row, and each chunk of a token's activations is
// multiplied into all 4 rows by one SDOT by element (the counterpart of
// VPDPBUSD with a broadcast): 8 SDOTs make a token's I_b for 4 rows, with
// no horizontal sums. Weights are signed here (SDOT is signed by signed):
// Q8_0 needs no offset; Q4_0's nibbles q are 0..15 and I_b = Σq·x - 8Σx
// starts from -8Σx (the sx argument is Input.qs8); Q4_1 needs none.
// |I_b| < 2^24, so float(I_b) is exact, as on amd64.
//
// Arguments (as q8rows_amd64.s): w the first row's block 0 (rows rstride
// bytes apart), nb blocks, qx the group's activations (block b's 32 bytes
// of token t at (b*G+t)*32), dx the group's first d_x in the block-major
// copy (tokens adjacent, blocks dstride bytes apart, at least 3 readable
// values after the group's last token), sx the same for the second scalar
// (s_x for Q4_1, 8Σq for Q4_0, unused for Q8_0), out the results of token
// 0 for the 8 rows (tokens ostride bytes apart).
//
// Registers: R10..R13 the half's 4 rows (advanced block by block by the
// header loads), R14 qx, R15 dx, R16 sx, R17 blocks left, R19 the block
// size, R20 halves left. V0..V7 the weight chunks, V8..V15 loads,
// transposes, a token's activations (V12, V13) and integer sums (V14),
// V16..V23 the accumulators of tokens 0..7, V24, V25 the second scalars of
// tokens 0..3 and 4..7, V26, V27 their d_x, V28 d_w, V29 m_w, V30 d_w*d_x,
// V31 the nibble mask.

// ARGS loads the arguments; R19 = bs, the bytes per block.
#define ARGS(bs) \
	MOVD w+0(FP), R0 \
	MOVD rstride+8(FP), R1 \
	MOVD nb+16(FP), R2 \
	MOVD qx+24(FP), R3 \
	MOVD dx+32(FP), R4 \
	MOVD sx+40(FP), R5 \
	MOVD dstride+48(FP), R6 \
	MOVD out+56(FP), R7 \
	MOVD ostride+64(FP), R9 \
	MOVD $bs, R19 \
	VMOVI $15, V31.B16 \
	MOVD $2, R20

// HALF starts a half: its 4 rows and the activation pointers.
#define HALF \
	MOVD R0, R10 \
	ADD R1, R10, R11 \
	ADD R1, R11, R12 \
	ADD R1, R12, R13 \
	MOVD R3, R14 \
	MOVD R4, R15 \
	MOVD R5, R16 \
	MOVD R2, R17

// NEXTHALF moves to rows 4..7 and their outputs.
#define NEXTHALF \
	ADD $16, R7, R7 \
	ADD R1<<2, R0, R0 \
	SUBS $1, R20, R20

// LOAD4(off) loads 16 bytes at off of each row's block into V8..V11.
#define LOAD4(off) \
	FMOVQ off(R10), F8 \
	FMOVQ off(R11), F9 \
	FMOVQ off(R12), F10 \
	FMOVQ off(R13), F11

// TRANSPOSE(k) turns V8..V11 (rows 0..3) into chunk k..k+3 of the 4 rows
// in V(k)..V(k+3) (word j of V(k+i) is word i of row j).
#define TRANSPOSE(k) \
	TRN1_4S(12, 8, 9) \
	TRN2_4S(13, 8, 9) \
	TRN1_4S(14, 10, 11) \
	TRN2_4S(15, 10, 11) \
	TRN1_2D(k, 12, 14) \
	TRN1_2D(k+1, 13, 15) \
	TRN2_2D(k+2, 12, 14) \
	TRN2_2D(k+3, 13, 15)

// W4(off): the 16 nibble bytes at off give chunks 0..3 (low nibbles,
// elements 0..15) in V0..V3 and chunks 4..7 (high nibbles) in V4..V7.
#define W4(off) \
	LOAD4(off) \
	TRANSPOSE(8) \
	AND_16B(0, 8, 31) \
	AND_16B(1, 9, 31) \
	AND_16B(2, 10, 31) \
	AND_16B(3, 11, 31) \
	USHR_16B_4(4, 8) \
	USHR_16B_4(5, 9) \
	USHR_16B_4(6, 10) \
	USHR_16B_4(7, 11)

// W8: the 32 signed weights at 2, chunks 0..7 in V0..V7.
#define W8 \
	LOAD4(2) \
	TRANSPOSE(0) \
	LOAD4(18) \
	TRANSPOSE(4)

// H16: the 4 rows' d_w (a 2-byte header) in V28; each row moves to its
// next block.
#define H16 \
	VLD1.P (R10)(R19), V30.H[0] \
	VLD1.P (R11)(R19), V30.H[1] \
	VLD1.P (R12)(R19), V30.H[2] \
	VLD1.P (R13)(R19), V30.H[3] \
	FCVTL_4S(28, 30)

// H41: d_w in V28 and m_w in V29 (Q4_1's 4-byte header).
#define H41 \
	VLD1.P (R10)(R19), V30.S[0] \
	VLD1.P (R11)(R19), V30.S[1] \
	VLD1.P (R12)(R19), V30.S[2] \
	VLD1.P (R13)(R19), V30.S[3] \
	FCVTL_4S(28, 30) \
	FCVTL2_4S(29, 30) \
	UZP1_4S(30, 28, 29) \
	UZP2_4S(29, 28, 29) \
	VMOV V30.B16, V28.B16

// SCALARS(G): d_x (and sx) of the block's tokens; for G = 8 two vectors.
#define DX4 \
	FMOVQ (R15), F26
#define DX8 \
	FLDPQ (R15), (F26, F27)
#define SF4 \
	FMOVQ (R16), F24
#define SF8 \
	FLDPQ (R16), (F24, F25)
// SN: Q4_0's offsets -8Σx (from 8Σx).
#define SN4 \
	SF4 \
	NEG_4S(24, 24)
#define SN8 \
	SF8 \
	NEG_4S(24, 24) \
	NEG_4S(25, 25)

// DOT8 adds the products of the 8 chunks of the token in V12, V13 into
// V14.
#define DOT8 \
	SDOT_4S_E(14, 0, 12, 0) \
	SDOT_4S_E(14, 1, 12, 1) \
	SDOT_4S_E(14, 2, 12, 2) \
	SDOT_4S_E(14, 3, 12, 3) \
	SDOT_4S_E(14, 4, 13, 0) \
	SDOT_4S_E(14, 5, 13, 1) \
	SDOT_4S_E(14, 6, 13, 2) \
	SDOT_4S_E(14, 7, 13, 3)

// ACC adds token t's block: A(16+t) = fma(d_w*d_x, float(I_b), A); hi,
// lane say where t's scalars are (register 24+hi or 26+hi, lane).
#define ACC(t, hi, lane) \
	SCVTF_4S(14, 14) \
	FMUL_4S_E(30, 28, 26+hi, lane) \
	FMLA_4S(16+t, 14, 30)

// T40, T41, T80 run token t (activations at xo(R14)) for one type.
#define T40(t, xo, hi, lane) \
	FLDPQ xo(R14), (F12, F13) \
	DUP_4S_E(14, 24+hi, lane) \
	DOT8 \
	ACC(t, hi, lane)

#define T80(t, xo, hi, lane) \
	FLDPQ xo(R14), (F12, F13) \
	VEOR V14.B16, V14.B16, V14.B16 \
	DOT8 \
	ACC(t, hi, lane)

#define T41(t, xo, hi, lane) \
	FLDPQ xo(R14), (F12, F13) \
	VEOR V14.B16, V14.B16, V14.B16 \
	DOT8 \
	ACC(t, hi, lane) \
	FMLA_4S_E(16+t, 29, 24+hi, lane)

// The tokens of a group of G (TOKS1..TOKS8) for the token macro T.
#define TOKS1(T) \
	T(0, 0, 0, 0)
#define TOKS2(T) \
	TOKS1(T) \
	T(1, 32, 0, 1)
#define TOKS4(T) \
	TOKS2(T) \
	T(2, 64, 0, 2) \
	T(3, 96, 0, 3)
#define TOKS8(T) \
	TOKS4(T) \
	T(4, 128, 1, 0) \
	T(5, 160, 1, 1) \
	T(6, 192, 1, 2) \
	T(7, 224, 1, 3)

#define ZERO1 \
	VEOR V16.B16, V16.B16, V16.B16
#define ZERO2 \
	ZERO1 \
	VEOR V17.B16, V17.B16, V17.B16
#define ZERO4 \
	ZERO2 \
	VEOR V18.B16, V18.B16, V18.B16 \
	VEOR V19.B16, V19.B16, V19.B16
#define ZERO8 \
	ZERO4 \
	VEOR V20.B16, V20.B16, V20.B16 \
	VEOR V21.B16, V21.B16, V21.B16 \
	VEOR V22.B16, V22.B16, V22.B16 \
	VEOR V23.B16, V23.B16, V23.B16

// OUT1..OUT8 store the half's 4 rows for each token (R21 walks the
// tokens).
#define OUT1 \
	MOVD R7, R21 \
	FMOVQ F16, (R21)
#define OUT2 \
	OUT1 \
	ADD R9, R21, R21 \
	FMOVQ F17, (R21)
#define OUT4 \
	OUT2 \
	ADD R9, R21, R21 \
	FMOVQ F18, (R21) \
	ADD R9, R21, R21 \
	FMOVQ F19, (R21)
#define OUT8 \
	OUT4 \
	ADD R9, R21, R21 \
	FMOVQ F20, (R21) \
	ADD R9, R21, R21 \
	FMOVQ F21, (R21) \
	ADD R9, R21, R21 \
	FMOVQ F22, (R21) \
	ADD R9, R21, R21 \
	FMOVQ F23, (R21)

// KERNEL is one row kernel: bs bytes per block, weights W, header H,
// scalars S (the second scalar's load, or nothing), G tokens.
#define KERNEL(bs, W, H, S, DX, ZERO, TOKS, T, OUT, G, lhalf, lblk, lout) \
	ARGS(bs) \
lhalf: \
	HALF \
	ZERO \
	CBZ R17, lout \
lblk: \
	W \
	H \
	DX \
	S \
	TOKS(T) \
	ADD $(G*32), R14, R14 \
	ADD R6, R15, R15 \
	ADD R6, R16, R16 \
	SUBS $1, R17, R17 \
	BNE lblk \
lout: \
	OUT \
	NEXTHALF \
	BNE lhalf \
	RET

#define NOSX

// func rowsQ40x1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x1N(SB), NOSPLIT, $0-72
	KERNEL(18, W4(2), H16, SN4, DX4, ZERO1, TOKS1, T40, OUT1, 1, q40h1, q40b1, q40o1)

// func rowsQ40x2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x2N(SB), NOSPLIT, $0-72
	KERNEL(18, W4(2), H16, SN4, DX4, ZERO2, TOKS2, T40, OUT2, 2, q40h2, q40b2, q40o2)

// func rowsQ40x4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x4N(SB), NOSPLIT, $0-72
	KERNEL(18, W4(2), H16, SN4, DX4, ZERO4, TOKS4, T40, OUT4, 4, q40h4, q40b4, q40o4)

// func rowsQ40x8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ40x8N(SB), NOSPLIT, $0-72
	KERNEL(18, W4(2), H16, SN8, DX8, ZERO8, TOKS8, T40, OUT8, 8, q40h8, q40b8, q40o8)

// func rowsQ41x1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x1N(SB), NOSPLIT, $0-72
	KERNEL(20, W4(4), H41, SF4, DX4, ZERO1, TOKS1, T41, OUT1, 1, q41h1, q41b1, q41o1)

// func rowsQ41x2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x2N(SB), NOSPLIT, $0-72
	KERNEL(20, W4(4), H41, SF4, DX4, ZERO2, TOKS2, T41, OUT2, 2, q41h2, q41b2, q41o2)

// func rowsQ41x4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x4N(SB), NOSPLIT, $0-72
	KERNEL(20, W4(4), H41, SF4, DX4, ZERO4, TOKS4, T41, OUT4, 4, q41h4, q41b4, q41o4)

// func rowsQ41x8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ41x8N(SB), NOSPLIT, $0-72
	KERNEL(20, W4(4), H41, SF8, DX8, ZERO8, TOKS8, T41, OUT8, 8, q41h8, q41b8, q41o8)

// func rowsQ80x1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x1N(SB), NOSPLIT, $0-72
	KERNEL(34, W8, H16, NOSX, DX4, ZERO1, TOKS1, T80, OUT1, 1, q80h1, q80b1, q80o1)

// func rowsQ80x2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x2N(SB), NOSPLIT, $0-72
	KERNEL(34, W8, H16, NOSX, DX4, ZERO2, TOKS2, T80, OUT2, 2, q80h2, q80b2, q80o2)

// func rowsQ80x4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x4N(SB), NOSPLIT, $0-72
	KERNEL(34, W8, H16, NOSX, DX4, ZERO4, TOKS4, T80, OUT4, 4, q80h4, q80b4, q80o4)

// func rowsQ80x8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ80x8N(SB), NOSPLIT, $0-72
	KERNEL(34, W8, H16, NOSX, DX8, ZERO8, TOKS8, T80, OUT8, 8, q80h8, q80b8, q80o8)

// Q5_0 (22-byte blocks: d, qh (32 bits), 16 nibble bytes) and Q5_1
// (24-byte blocks: d, m, qh, nibbles; as Q4_1, A += m_w*s_x per block):
// Q4_0's and Q4_1's kernels with the fifth bits: q = nibble | bit i of
// qh << 4, and for Q5_0 I_b = Σq·x - 16Σx (sx is Input.qs16, 16Σq; Q5_1's
// sx is s_x). In the transposed layout chunk k of row r
// holds elements 4k..4k+3, whose fifth bits are bits 4k..4k+3 of qh_r, in
// byte k/2 of it: TBL replicates that byte of each row's qh (V29) over the
// lane's 4 bytes, CMTST against the bits (1, 2, 4, 8 for even k; 16, 32,
// 64, 128 for odd) gives 0xFF where set, AND 16, ORR into the nibbles. The
// constants take V20..V23 (TBL indexes) and V25, V27 (bit masks), so a
// pass runs at most 4 tokens (V16..V19) and a width of 8 is two passes.

DATA q5c<>+0(SB)/8, $0x0404040400000000
DATA q5c<>+8(SB)/8, $0x0C0C0C0C08080808
DATA q5c<>+16(SB)/8, $0x0505050501010101
DATA q5c<>+24(SB)/8, $0x0D0D0D0D09090909
DATA q5c<>+32(SB)/8, $0x0606060602020202
DATA q5c<>+40(SB)/8, $0x0E0E0E0E0A0A0A0A
DATA q5c<>+48(SB)/8, $0x0707070703030303
DATA q5c<>+56(SB)/8, $0x0F0F0F0F0B0B0B0B
DATA q5c<>+64(SB)/8, $0x0804020108040201
DATA q5c<>+72(SB)/8, $0x0804020108040201
DATA q5c<>+80(SB)/8, $0x8040201080402010
DATA q5c<>+88(SB)/8, $0x8040201080402010
GLOBL q5c<>(SB), RODATA|NOPTR, $96

// Q5BIT(k): the fifth bits of chunk k into V(k).
#define Q5BIT(k, idx, mask) \
	TBL_16B(12, 29, idx) \
	CMTST_16B(12, 12, mask) \
	AND_16B(12, 12, 30) \
	ORR_16B(k, k, 12)

// W5(nib, qh): the 32 values of the 4 rows' block (nibbles at nib, the
// fifth bits at qh), chunks 0..7 in V0..V7.
#define W5(nib, qh) \
	W4(nib) \
	ADD $qh, R10, R21 \
	VLD1 (R21), V29.S[0] \
	ADD $qh, R11, R21 \
	VLD1 (R21), V29.S[1] \
	ADD $qh, R12, R21 \
	VLD1 (R21), V29.S[2] \
	ADD $qh, R13, R21 \
	VLD1 (R21), V29.S[3] \
	VMOVI $16, V30.B16 \
	Q5BIT(0, 20, 25) \
	Q5BIT(1, 20, 27) \
	Q5BIT(2, 21, 25) \
	Q5BIT(3, 21, 27) \
	Q5BIT(4, 22, 25) \
	Q5BIT(5, 22, 27) \
	Q5BIT(6, 23, 25) \
	Q5BIT(7, 23, 27)

// P5OUT1..P5OUT4 store a pass's tokens from R22 (tokens ostride apart).
#define P5OUT1 \
	MOVD R22, R21 \
	FMOVQ F16, (R21)
#define P5OUT2 \
	P5OUT1 \
	ADD R9, R21, R21 \
	FMOVQ F17, (R21)
#define P5OUT4 \
	P5OUT2 \
	ADD R9, R21, R21 \
	FMOVQ F18, (R21) \
	ADD R9, R21, R21 \
	FMOVQ F19, (R21)

// Q5KERNEL: G tokens per pass (at most 4), Q passes; astr the bytes from
// one block's activations to the next. R22 the pass's outputs, R23 passes
// left, R24, R25, R8 the pass's first activations, d_x and sx.
#define Q5KERNEL(bs, W, H, S, T, astr, Q, ZERO, TOKS, OUT, lhalf, lquad, lblk, lout) \
	ARGS(bs) \
	MOVD $q5c<>(SB), R21 \
	VLD1 (R21), [V20.B16, V21.B16, V22.B16, V23.B16] \
	ADD $64, R21, R21 \
	VLD1 (R21), [V25.B16, V26.B16] \
	VMOV V26.B16, V27.B16 \
lhalf: \
	MOVD R3, R24 \
	MOVD R4, R25 \
	MOVD R5, R8 \
	MOVD R7, R22 \
	MOVD $Q, R23 \
lquad: \
	MOVD R0, R10 \
	ADD R1, R10, R11 \
	ADD R1, R11, R12 \
	ADD R1, R12, R13 \
	MOVD R24, R14 \
	MOVD R25, R15 \
	MOVD R8, R16 \
	MOVD R2, R17 \
	ZERO \
	CBZ R17, lout \
lblk: \
	W \
	H \
	DX4 \
	S \
	TOKS(T) \
	ADD $astr, R14, R14 \
	ADD R6, R15, R15 \
	ADD R6, R16, R16 \
	SUBS $1, R17, R17 \
	BNE lblk \
lout: \
	OUT \
	ADD $128, R24, R24 \
	ADD $16, R25, R25 \
	ADD $16, R8, R8 \
	ADD R9<<2, R22, R22 \
	SUBS $1, R23, R23 \
	BNE lquad \
	NEXTHALF \
	BNE lhalf \
	RET

// func rowsQ50x1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x1N(SB), NOSPLIT, $0-72
	Q5KERNEL(22, W5(6, 2), H16, SN4, T40, 32, 1, ZERO1, TOKS1, P5OUT1, q50h1, q50q1, q50b1, q50o1)

// func rowsQ50x2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x2N(SB), NOSPLIT, $0-72
	Q5KERNEL(22, W5(6, 2), H16, SN4, T40, 64, 1, ZERO2, TOKS2, P5OUT2, q50h2, q50q2, q50b2, q50o2)

// func rowsQ50x4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x4N(SB), NOSPLIT, $0-72
	Q5KERNEL(22, W5(6, 2), H16, SN4, T40, 128, 1, ZERO4, TOKS4, P5OUT4, q50h4, q50q4, q50b4, q50o4)

// func rowsQ50x8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ50x8N(SB), NOSPLIT, $0-72
	Q5KERNEL(22, W5(6, 2), H16, SN4, T40, 256, 2, ZERO4, TOKS4, P5OUT4, q50h8, q50q8, q50b8, q50o8)

// func rowsQ51x1N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x1N(SB), NOSPLIT, $0-72
	Q5KERNEL(24, W5(8, 4), H41, SF4, T41, 32, 1, ZERO1, TOKS1, P5OUT1, q51h1, q51q1, q51b1, q51o1)

// func rowsQ51x2N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x2N(SB), NOSPLIT, $0-72
	Q5KERNEL(24, W5(8, 4), H41, SF4, T41, 64, 1, ZERO2, TOKS2, P5OUT2, q51h2, q51q2, q51b2, q51o2)

// func rowsQ51x4N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x4N(SB), NOSPLIT, $0-72
	Q5KERNEL(24, W5(8, 4), H41, SF4, T41, 128, 1, ZERO4, TOKS4, P5OUT4, q51h4, q51q4, q51b4, q51o4)

// func rowsQ51x8N(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ51x8N(SB), NOSPLIT, $0-72
	Q5KERNEL(24, W5(8, 4), H41, SF4, T41, 256, 2, ZERO4, TOKS4, P5OUT4, q51h8, q51q8, q51b8, q51o8)
