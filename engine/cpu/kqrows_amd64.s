#include "textflag.h"
#include "vec_amd64.h"
#include "q8rows_amd64.h"

// AVX-512 VNNI row kernels for the K formats Q4_K and Q6_K (layouts in
// kquant.go, canonical sums in dotref.go): 8 weight rows times the Q8_K
// activations of 1, 2, 4 or 8 tokens, the rows in the lanes as in
// q8rows_amd64.s. Per block of 256 the 8 rows' scales are unpacked once
// into per-lane int32 vectors on the stack (shared by the tokens), the
// weights are transposed and unpacked into 4-byte chunks sub-block by
// sub-block, and for each token VPDPBUSD with the activation chunk
// broadcast from memory gives the exact sub-block sums P_j of every row,
// VPMULLD by the row's scale and VPADDD collect I = Σ sc_j·P_j. At the end of
// the block, VPDPWSSD of the rows' mins (Q4_K) or scales (Q6_K) as int16
// pairs with the token's int16 sums gives M (Q4_K) or the Q6_K offset term,
// and the float part is dotref.go's: A = fma(d_w·d_x, float(I), A), then
// for Q4_K A = fma(dmin_w·d_x, -float(M), A) (VFNMADD231PS).
//
// Q6_K's values go in unsigned (q in 0..63, not q-32): P'_k = Σ q·x, and
// I = Σ sc_k·P'_k - 32·Σ sc_k·S16_k, the same integer as Σ sc_k·(q-32)·x.
//
// Arguments as rowKernel (kqrows_amd64.go): w, rstride, nb blocks of 256,
// qx the group's values (block b of token t at (b*G+t)*256), dx the
// group's first Q8_K record (kRec: token t's at t*64, blocks dstride bytes
// apart), sx unused, out, ostride.
//
// Registers: R8..R15 the rows, BX the block offset in a row, SI qx, DX the
// records, DI the next group of rows (prefetch), CX blocks left; Y0..Y7
// loads, transposes and temporaries; Y8..Y23 weight chunks; Y24..Y31 the
// tokens' I (8 tokens), or Y24..Y27 I and Y28..Y31 A (1, 2, 4 tokens: the
// 8-token forms keep A on the stack).

VEC4(kq0f<>, $0x0f0f0f0f0f0f0f0f)

VEC4(kq30<>, $0x3030303030303030)

VEC4(kq3f<>, $0x3f3f3f3f3f3f3f3f)

DATA kqb0<>+0(SB)/8, $0x8080800480808000
DATA kqb0<>+8(SB)/8, $0x8080800c80808008
DATA kqb0<>+16(SB)/8, $0x8080800480808000
DATA kqb0<>+24(SB)/8, $0x8080800c80808008
GLOBL kqb0<>(SB), RODATA|NOPTR, $32

DATA kqb1<>+0(SB)/8, $0x8080800580808001
DATA kqb1<>+8(SB)/8, $0x8080800d80808009
DATA kqb1<>+16(SB)/8, $0x8080800580808001
DATA kqb1<>+24(SB)/8, $0x8080800d80808009
GLOBL kqb1<>(SB), RODATA|NOPTR, $32

DATA kqb2<>+0(SB)/8, $0x8080800680808002
DATA kqb2<>+8(SB)/8, $0x8080800e8080800a
DATA kqb2<>+16(SB)/8, $0x8080800680808002
DATA kqb2<>+24(SB)/8, $0x8080800e8080800a
GLOBL kqb2<>(SB), RODATA|NOPTR, $32

DATA kqb3<>+0(SB)/8, $0x8080800780808003
DATA kqb3<>+8(SB)/8, $0x8080800f8080800b
DATA kqb3<>+16(SB)/8, $0x8080800780808003
DATA kqb3<>+24(SB)/8, $0x8080800f8080800b
GLOBL kqb3<>(SB), RODATA|NOPTR, $32

DATA kqt0<>+0(SB)/8, $0x0480808000808080
DATA kqt0<>+8(SB)/8, $0x0c80808008808080
DATA kqt0<>+16(SB)/8, $0x0480808000808080
DATA kqt0<>+24(SB)/8, $0x0c80808008808080
GLOBL kqt0<>(SB), RODATA|NOPTR, $32

DATA kqt1<>+0(SB)/8, $0x0580808001808080
DATA kqt1<>+8(SB)/8, $0x0d80808009808080
DATA kqt1<>+16(SB)/8, $0x0580808001808080
DATA kqt1<>+24(SB)/8, $0x0d80808009808080
GLOBL kqt1<>(SB), RODATA|NOPTR, $32

DATA kqt2<>+0(SB)/8, $0x0680808002808080
DATA kqt2<>+8(SB)/8, $0x0e8080800a808080
DATA kqt2<>+16(SB)/8, $0x0680808002808080
DATA kqt2<>+24(SB)/8, $0x0e8080800a808080
GLOBL kqt2<>(SB), RODATA|NOPTR, $32

DATA kqt3<>+0(SB)/8, $0x0780808003808080
DATA kqt3<>+8(SB)/8, $0x0f8080800b808080
DATA kqt3<>+16(SB)/8, $0x0780808003808080
DATA kqt3<>+24(SB)/8, $0x0f8080800b808080
GLOBL kqt3<>(SB), RODATA|NOPTR, $32

DATA kqp0<>+0(SB)/8, $0x8005800480018000
DATA kqp0<>+8(SB)/8, $0x800d800c80098008
DATA kqp0<>+16(SB)/8, $0x8005800480018000
DATA kqp0<>+24(SB)/8, $0x800d800c80098008
GLOBL kqp0<>(SB), RODATA|NOPTR, $32

DATA kqp1<>+0(SB)/8, $0x8007800680038002
DATA kqp1<>+8(SB)/8, $0x800f800e800b800a
DATA kqp1<>+16(SB)/8, $0x8007800680038002
DATA kqp1<>+24(SB)/8, $0x800f800e800b800a
GLOBL kqp1<>(SB), RODATA|NOPTR, $32

DATA kqh0<>+0(SB)/8, $0x0580048001800080
DATA kqh0<>+8(SB)/8, $0x0d800c8009800880
DATA kqh0<>+16(SB)/8, $0x0580048001800080
DATA kqh0<>+24(SB)/8, $0x0d800c8009800880
GLOBL kqh0<>(SB), RODATA|NOPTR, $32

DATA kqh1<>+0(SB)/8, $0x0780068003800280
DATA kqh1<>+8(SB)/8, $0x0f800e800b800a80
DATA kqh1<>+16(SB)/8, $0x0780068003800280
DATA kqh1<>+24(SB)/8, $0x0f800e800b800a80
GLOBL kqh1<>(SB), RODATA|NOPTR, $32

// LOADT(off, d0, d1, d2, d3): the 16 bytes at off of the 8 rows' block,
// transposed: dword k of rows 0..7 in dk (rows 0..3 in the low half), with
// Y0..Y7 as temporaries.
#define LOADT(off, d0, d1, d2, d3) \
	LOAD4(off) \
	VPUNPCKLDQ Y1, Y0, Y4 \
	VPUNPCKHDQ Y1, Y0, Y5 \
	VPUNPCKLDQ Y3, Y2, Y6 \
	VPUNPCKHDQ Y3, Y2, Y7 \
	VPUNPCKLQDQ Y6, Y4, d0 \
	VPUNPCKHQDQ Y6, Y4, d1 \
	VPUNPCKLQDQ Y7, Y5, d2 \
	VPUNPCKHQDQ Y7, Y5, d3

// PFK(i): prefetch line i of the next 8 rows' share of this block.
#define PFK(i) PREFETCHT0 (i*64)(DI)(BX*8)

#define PF18 \
	PFK(0) \
	PFK(1) \
	PFK(2) \
	PFK(3) \
	PFK(4) \
	PFK(5) \
	PFK(6) \
	PFK(7) \
	PFK(8) \
	PFK(9) \
	PFK(10) \
	PFK(11) \
	PFK(12) \
	PFK(13) \
	PFK(14) \
	PFK(15) \
	PFK(16) \
	PFK(17)

#define PF27 \
	PF18 \
	PFK(18) \
	PFK(19) \
	PFK(20) \
	PFK(21) \
	PFK(22) \
	PFK(23) \
	PFK(24) \
	PFK(25) \
	PFK(26)

// ZERO8, ZERO4: clear the 8 tokens' I, or 4 tokens' I and A.
#define ZERO8 \
	VPXORD Y24, Y24, Y24 \
	VPXORD Y25, Y25, Y25 \
	VPXORD Y26, Y26, Y26 \
	VPXORD Y27, Y27, Y27 \
	VPXORD Y28, Y28, Y28 \
	VPXORD Y29, Y29, Y29 \
	VPXORD Y30, Y30, Y30 \
	VPXORD Y31, Y31, Y31

#define ZEROI4 \
	VPXORD Y24, Y24, Y24 \
	VPXORD Y25, Y25, Y25 \
	VPXORD Y26, Y26, Y26 \
	VPXORD Y27, Y27, Y27

// KARGS loads the arguments (ROWS) and clears the accumulators: Y28..Y31
// (A of 1..4 tokens), or the 8-token A at aoff(SP).
#define KARGS ROWS

#define NEXTK(bs, g) \
	ADDQ $bs, BX \
	ADDQ $(g*256), SI \
	ADDQ dstride+48(FP), DX \
	DECQ CX

// OUTK1..OUTK4: A of tokens 0..g-1 (Y28..) to out, tokens ostride apart.
#define OUTK1 \
	MOVQ out+56(FP), DI \
	VMOVUPS Y28, (DI)

#define OUTK2 \
	OUTK1 \
	MOVQ ostride+64(FP), AX \
	VMOVUPS Y29, (DI)(AX*1)

#define OUTK4 \
	OUTK2 \
	VMOVUPS Y30, (DI)(AX*2) \
	LEAQ (AX)(AX*2), BX \
	VMOVUPS Y31, (DI)(BX*1)

// OUTK8(aoff): the 8 tokens' A from aoff(SP) to out.
#define OUTK8(aoff) \
	MOVQ out+56(FP), DI \
	MOVQ ostride+64(FP), AX \
	VMOVUPS (aoff+0)(SP), Y0 \
	VMOVUPS Y0, (DI) \
	ADDQ AX, DI \
	VMOVUPS (aoff+32)(SP), Y0 \
	VMOVUPS Y0, (DI) \
	ADDQ AX, DI \
	VMOVUPS (aoff+64)(SP), Y0 \
	VMOVUPS Y0, (DI) \
	ADDQ AX, DI \
	VMOVUPS (aoff+96)(SP), Y0 \
	VMOVUPS Y0, (DI) \
	ADDQ AX, DI \
	VMOVUPS (aoff+128)(SP), Y0 \
	VMOVUPS Y0, (DI) \
	ADDQ AX, DI \
	VMOVUPS (aoff+160)(SP), Y0 \
	VMOVUPS Y0, (DI) \
	ADDQ AX, DI \
	VMOVUPS (aoff+192)(SP), Y0 \
	VMOVUPS Y0, (DI) \
	ADDQ AX, DI \
	VMOVUPS (aoff+224)(SP), Y0 \
	VMOVUPS Y0, (DI)

// ZEROA8(aoff): clear the 8-token A at aoff(SP).
#define ZEROA8(aoff) \
	VPXORD Y0, Y0, Y0 \
	VMOVUPS Y0, (aoff+0)(SP) \
	VMOVUPS Y0, (aoff+32)(SP) \
	VMOVUPS Y0, (aoff+64)(SP) \
	VMOVUPS Y0, (aoff+96)(SP) \
	VMOVUPS Y0, (aoff+128)(SP) \
	VMOVUPS Y0, (aoff+160)(SP) \
	VMOVUPS Y0, (aoff+192)(SP) \
	VMOVUPS Y0, (aoff+224)(SP)

// ---- Q4_K: d f16 at 0, dmin f16 at 2, 12 bytes of 6-bit scales and mins
// at 4, 128 bytes of nibbles at 16. Frame: sc_j (int32 per lane) at 32j,
// the mins as int16 pairs (m0,m1), (m2,m3), (m4,m5), (m6,m7) at 256.., d_w
// at 384, dmin_w at 416, the 8-token A at 448..703.

// H4K: the header's 16 bytes transposed (d|dmin, s0..3, s4..7, s8..11 in
// Y0..Y3), then d_w, dmin_w, the scales and the min pairs to the frame:
// sc_j = s_j & 63 and m_j = s_{j+4} & 63 for j < 4; sc_j = (s_{j+4} & 15) |
// (s_{j-4} >> 6) << 4 and m_j = (s_{j+4} >> 4) | (s_j >> 6) << 4 for j >= 4.
#define H4K \
	LOADT(0, Y0, Y1, Y2, Y3) \
	VPMOVDW Y0, X4 \
	VCVTPH2PS X4, Y4 \
	VMOVUPS Y4, 384(SP) \
	VPSRLD $16, Y0, Y5 \
	VPMOVDW Y5, X5 \
	VCVTPH2PS X5, Y5 \
	VMOVUPS Y5, 416(SP) \
	VPANDD kq3f<>(SB), Y1, Y4 \
	VPANDD kq3f<>(SB), Y2, Y5 \
	VPSRLW $2, Y1, Y6 \
	VPANDD kq30<>(SB), Y6, Y6 \
	VPANDD kq0f<>(SB), Y3, Y7 \
	VPORD Y6, Y7, Y7 \
	VPSRLW $2, Y2, Y6 \
	VPANDD kq30<>(SB), Y6, Y6 \
	VPSRLW $4, Y3, Y3 \
	VPANDD kq0f<>(SB), Y3, Y3 \
	VPORD Y6, Y3, Y3 \
	VPSHUFB kqb0<>(SB), Y4, Y6 \
	VMOVDQU Y6, 0(SP) \
	VPSHUFB kqb1<>(SB), Y4, Y6 \
	VMOVDQU Y6, 32(SP) \
	VPSHUFB kqb2<>(SB), Y4, Y6 \
	VMOVDQU Y6, 64(SP) \
	VPSHUFB kqb3<>(SB), Y4, Y6 \
	VMOVDQU Y6, 96(SP) \
	VPSHUFB kqb0<>(SB), Y7, Y6 \
	VMOVDQU Y6, 128(SP) \
	VPSHUFB kqb1<>(SB), Y7, Y6 \
	VMOVDQU Y6, 160(SP) \
	VPSHUFB kqb2<>(SB), Y7, Y6 \
	VMOVDQU Y6, 192(SP) \
	VPSHUFB kqb3<>(SB), Y7, Y6 \
	VMOVDQU Y6, 224(SP) \
	VPSHUFB kqp0<>(SB), Y5, Y6 \
	VMOVDQU Y6, 256(SP) \
	VPSHUFB kqp1<>(SB), Y5, Y6 \
	VMOVDQU Y6, 288(SP) \
	VPSHUFB kqp0<>(SB), Y3, Y6 \
	VMOVDQU Y6, 320(SP) \
	VPSHUFB kqp1<>(SB), Y3, Y6 \
	VMOVDQU Y6, 352(SP)

// W4K(lo, hi): sub-blocks 2c (the low nibbles of bytes 32c..32c+31 of the
// nibbles, at lo = 16+32c and hi = lo+16) and 2c+1 (their high nibbles):
// chunks 0..7 of 2c in Y8..Y15, of 2c+1 in Y16..Y23.
#define W4K(lo, hi) \
	LOADT(lo, Y8, Y9, Y10, Y11) \
	LOADT(hi, Y12, Y13, Y14, Y15) \
	VPSRLW $4, Y8, Y16 \
	VPSRLW $4, Y9, Y17 \
	VPSRLW $4, Y10, Y18 \
	VPSRLW $4, Y11, Y19 \
	VPSRLW $4, Y12, Y20 \
	VPSRLW $4, Y13, Y21 \
	VPSRLW $4, Y14, Y22 \
	VPSRLW $4, Y15, Y23 \
	VPANDD kq0f<>(SB), Y8, Y8 \
	VPANDD kq0f<>(SB), Y9, Y9 \
	VPANDD kq0f<>(SB), Y10, Y10 \
	VPANDD kq0f<>(SB), Y11, Y11 \
	VPANDD kq0f<>(SB), Y12, Y12 \
	VPANDD kq0f<>(SB), Y13, Y13 \
	VPANDD kq0f<>(SB), Y14, Y14 \
	VPANDD kq0f<>(SB), Y15, Y15 \
	VPANDD kq0f<>(SB), Y16, Y16 \
	VPANDD kq0f<>(SB), Y17, Y17 \
	VPANDD kq0f<>(SB), Y18, Y18 \
	VPANDD kq0f<>(SB), Y19, Y19 \
	VPANDD kq0f<>(SB), Y20, Y20 \
	VPANDD kq0f<>(SB), Y21, Y21 \
	VPANDD kq0f<>(SB), Y22, Y22 \
	VPANDD kq0f<>(SB), Y23, Y23

// P8(a, w0..w7, p): p = Σ of the 8 chunks w0..w7 times the activation
// bytes at a.. (a+4k for chunk k) of SI, in two chains of 4 (p and Y7).
#define P8(a, w0, w1, w2, w3, w4, w5, w6, w7, p) \
	VPXORD p, p, p \
	VPXORD Y7, Y7, Y7 \
	VPDPBUSD.BCST (a+0)(SI), w0, p \
	VPDPBUSD.BCST (a+16)(SI), w4, Y7 \
	VPDPBUSD.BCST (a+4)(SI), w1, p \
	VPDPBUSD.BCST (a+20)(SI), w5, Y7 \
	VPDPBUSD.BCST (a+8)(SI), w2, p \
	VPDPBUSD.BCST (a+12)(SI), w3, p \
	VPDPBUSD.BCST (a+24)(SI), w6, Y7 \
	VPDPBUSD.BCST (a+28)(SI), w7, Y7 \
	VPADDD Y7, p, p

// T4K(t, c, I): token t's sub-blocks 2c and 2c+1 into I.
#define T4K(t, c, I) \
	P8(t*256+64*c, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15, Y0) \
	P8(t*256+64*c+32, Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23, Y1) \
	VPMULLD (64*c)(SP), Y0, Y0 \
	VPMULLD (64*c+32)(SP), Y1, Y1 \
	VPADDD Y0, I, I \
	VPADDD Y1, I, I

// E4K(t, I, A): the end of the block for token t: M from the min pairs
// (Y8..Y11) and the token's S32 pairs, then the two FMAs into A (d_w in
// Y12, dmin_w in Y13).
#define E4K(t, I, A) \
	VPXORD Y0, Y0, Y0 \
	VPDPWSSD.BCST (t*64+16)(DX), Y8, Y0 \
	VPDPWSSD.BCST (t*64+20)(DX), Y9, Y0 \
	VPDPWSSD.BCST (t*64+24)(DX), Y10, Y0 \
	VPDPWSSD.BCST (t*64+28)(DX), Y11, Y0 \
	VCVTDQ2PS I, Y1 \
	VMULPS.BCST (t*64)(DX), Y12, Y2 \
	VFMADD231PS Y1, Y2, A \
	VCVTDQ2PS Y0, Y1 \
	VMULPS.BCST (t*64)(DX), Y13, Y2 \
	VFNMADD231PS Y1, Y2, A

// E4K8(t, I): E4K with token t's A at 448+32t(SP).
#define E4K8(t, I) \
	VMOVUPS (448+32*t)(SP), Y3 \
	E4K(t, I, Y3) \
	VMOVUPS Y3, (448+32*t)(SP)

#define ELOAD4K \
	VMOVDQU 256(SP), Y8 \
	VMOVDQU 288(SP), Y9 \
	VMOVDQU 320(SP), Y10 \
	VMOVDQU 352(SP), Y11 \
	VMOVUPS 384(SP), Y12 \
	VMOVUPS 416(SP), Y13

// ---- Q5_K: as Q4_K (the same header, scales and mins at 0..15), qh[32]
// at 16 (the fifth bit of element l of sub-block j is bit j of qh[l]), the
// nibbles at 48. Frame: Q4_K's, plus the transposed qh chunks at 704..959.

VEC4(kq10<>, $0x1010101010101010)

// QH5K: the qh bytes transposed (chunk k: bytes 4k..4k+3 of each row) to
// 704+32k(SP).
#define QH5K \
	LOADT(16, Y8, Y9, Y10, Y11) \
	LOADT(32, Y12, Y13, Y14, Y15) \
	VMOVDQU Y8, 704(SP) \
	VMOVDQU Y9, 736(SP) \
	VMOVDQU Y10, 768(SP) \
	VMOVDQU Y11, 800(SP) \
	VMOVDQU Y12, 832(SP) \
	VMOVDQU Y13, 864(SP) \
	VMOVDQU Y14, 896(SP) \
	VMOVDQU Y15, 928(SP)

// B5L(sh, k, w), B5R: bit 4-sh (B5L: shifted left by sh) or 4+sh (B5R:
// right) of qh chunk k into bit 4 of chunk w: w |= (qh << sh) & 0x10.
#define B5L(sh, k, w) \
	VPSLLW $sh, (704+32*k)(SP), Y0 \
	VPTERNLOGD $0xf8, kq10<>(SB), Y0, w

#define B5R(sh, k, w) \
	VPSRLW $sh, (704+32*k)(SP), Y0 \
	VPTERNLOGD $0xf8, kq10<>(SB), Y0, w

// ---- Q6_K: ql (low 4 bits) at 0, qh (high 2 bits) at 128, 16 int8
// scales at 192, d f16 at 208. Frame: sc_k (int32 per lane) at 32k, the
// scales as int16 pairs (sc_2m, sc_2m+1) at 512+32m, d_w at 768, the
// 8-token A at 800..1055.

// H6K: d_w and the scales to the frame.
#define H6K \
	VPINSRW $0, 208(R8)(BX*1), X4, X4 \
	VPINSRW $0, 208(R12)(BX*1), X5, X5 \
	VPINSRW $1, 208(R9)(BX*1), X4, X4 \
	VPINSRW $1, 208(R13)(BX*1), X5, X5 \
	VPINSRW $2, 208(R10)(BX*1), X4, X4 \
	VPINSRW $2, 208(R14)(BX*1), X5, X5 \
	VPINSRW $3, 208(R11)(BX*1), X4, X4 \
	VPINSRW $3, 208(R15)(BX*1), X5, X5 \
	VPUNPCKLQDQ X5, X4, X4 \
	VCVTPH2PS X4, Y4 \
	VMOVUPS Y4, 768(SP) \
	LOADT(192, Y8, Y9, Y10, Y11) \
	SC6(Y8, 0) \
	SC6(Y9, 128) \
	SC6(Y10, 256) \
	SC6(Y11, 384) \
	VPSHUFB kqh0<>(SB), Y8, Y4 \
	VPSRAW $8, Y4, Y4 \
	VMOVDQU Y4, 512(SP) \
	VPSHUFB kqh1<>(SB), Y8, Y4 \
	VPSRAW $8, Y4, Y4 \
	VMOVDQU Y4, 544(SP) \
	VPSHUFB kqh0<>(SB), Y9, Y4 \
	VPSRAW $8, Y4, Y4 \
	VMOVDQU Y4, 576(SP) \
	VPSHUFB kqh1<>(SB), Y9, Y4 \
	VPSRAW $8, Y4, Y4 \
	VMOVDQU Y4, 608(SP) \
	VPSHUFB kqh0<>(SB), Y10, Y4 \
	VPSRAW $8, Y4, Y4 \
	VMOVDQU Y4, 640(SP) \
	VPSHUFB kqh1<>(SB), Y10, Y4 \
	VPSRAW $8, Y4, Y4 \
	VMOVDQU Y4, 672(SP) \
	VPSHUFB kqh0<>(SB), Y11, Y4 \
	VPSRAW $8, Y4, Y4 \
	VMOVDQU Y4, 704(SP) \
	VPSHUFB kqh1<>(SB), Y11, Y4 \
	VPSRAW $8, Y4, Y4 \
	VMOVDQU Y4, 736(SP)

// SC6(v, off): the 4 scale bytes of each lane of v, sign-extended, to
// off(SP).. (one vector per scale).
#define SC6(v, off) \
	VPSHUFB kqt0<>(SB), v, Y4 \
	VPSRAD $24, Y4, Y4 \
	VMOVDQU Y4, (off+0)(SP) \
	VPSHUFB kqt1<>(SB), v, Y4 \
	VPSRAD $24, Y4, Y4 \
	VMOVDQU Y4, (off+32)(SP) \
	VPSHUFB kqt2<>(SB), v, Y4 \
	VPSRAD $24, Y4, Y4 \
	VMOVDQU Y4, (off+64)(SP) \
	VPSHUFB kqt3<>(SB), v, Y4 \
	VPSRAD $24, Y4, Y4 \
	VMOVDQU Y4, (off+96)(SP)

// W6LO(ql, qh, sh, w): a chunk of the group whose low bits are ql's low
// nibbles and high bits qh's bits at sh-4.. (sh = 4 - 2s): w = (ql & 15) |
// ((qh << sh) & 0x30).
#define W6LO(ql, qh, sh, w) \
	VPSLLW $sh, qh, Y0 \
	VPANDD kq30<>(SB), Y0, w \
	VPTERNLOGD $0xf8, kq0f<>(SB), ql, w

// W6HI0, W6HI1: the chunk of group s = 2 (qh bits 4..5 in place) or s = 3
// (qh bits 6..7, shifted right 2) from ql's high nibbles.
#define W6HI0(ql, qh, w) \
	VPANDD kq30<>(SB), qh, w \
	VPSRLW $4, ql, Y0 \
	VPTERNLOGD $0xf8, kq0f<>(SB), Y0, w

#define W6HI1(ql, qh, w) \
	VPSRLW $2, qh, Y1 \
	VPANDD kq30<>(SB), Y1, w \
	VPSRLW $4, ql, Y0 \
	VPTERNLOGD $0xf8, kq0f<>(SB), Y0, w

// W6A(qloff, qhoff), W6B: 16 elements of the groups s = par and s = par+2
// (par 0 for W6A, 1 for W6B) of a half h of the block: ql bytes at qloff =
// 64h+32par+16half, qh bytes at qhoff = 128+32h+16half; the chunks of
// sub-block 8h+2par+half in Y16..Y19, of sub-block 8h+2(par+2)+half in
// Y20..Y23.
#define W6A(qloff, qhoff) \
	LOADT(qloff, Y8, Y9, Y10, Y11) \
	LOADT(qhoff, Y12, Y13, Y14, Y15) \
	W6LO(Y8, Y12, 4, Y16) \
	W6LO(Y9, Y13, 4, Y17) \
	W6LO(Y10, Y14, 4, Y18) \
	W6LO(Y11, Y15, 4, Y19) \
	W6HI0(Y8, Y12, Y20) \
	W6HI0(Y9, Y13, Y21) \
	W6HI0(Y10, Y14, Y22) \
	W6HI0(Y11, Y15, Y23)

#define W6B(qloff, qhoff) \
	LOADT(qloff, Y8, Y9, Y10, Y11) \
	LOADT(qhoff, Y12, Y13, Y14, Y15) \
	W6LO(Y8, Y12, 2, Y16) \
	W6LO(Y9, Y13, 2, Y17) \
	W6LO(Y10, Y14, 2, Y18) \
	W6LO(Y11, Y15, 2, Y19) \
	W6HI1(Y8, Y12, Y20) \
	W6HI1(Y9, Y13, Y21) \
	W6HI1(Y10, Y14, Y22) \
	W6HI1(Y11, Y15, Y23)

// P4(a, w0..w3, p): p = Σ of 4 chunks times the activation bytes at a.. of SI.
#define P4(a, w0, w1, w2, w3, p) \
	VPXORD p, p, p \
	VPDPBUSD.BCST (a+0)(SI), w0, p \
	VPDPBUSD.BCST (a+4)(SI), w1, p \
	VPDPBUSD.BCST (a+8)(SI), w2, p \
	VPDPBUSD.BCST (a+12)(SI), w3, p

// T6K(t, ka, kb, I): token t's sub-blocks ka (Y16..Y19) and kb (Y20..Y23) into I.
#define T6K(t, ka, kb, I) \
	P4(t*256+16*ka, Y16, Y17, Y18, Y19, Y0) \
	P4(t*256+16*kb, Y20, Y21, Y22, Y23, Y1) \
	VPMULLD (32*ka)(SP), Y0, Y0 \
	VPMULLD (32*kb)(SP), Y1, Y1 \
	VPADDD Y0, I, I \
	VPADDD Y1, I, I

// E6K(t, I, A): the end of the block for token t: I -= 32·Σ sc_k·S16_k
// (the scale pairs in Y8..Y15 times the token's S16 pairs), then
// A = fma(d_w·d_x, float(I), A) (d_w in Y16).
#define E6K(t, I, A) \
	VPXORD Y0, Y0, Y0 \
	VPDPWSSD.BCST (t*64+32)(DX), Y8, Y0 \
	VPDPWSSD.BCST (t*64+36)(DX), Y9, Y0 \
	VPDPWSSD.BCST (t*64+40)(DX), Y10, Y0 \
	VPDPWSSD.BCST (t*64+44)(DX), Y11, Y0 \
	VPDPWSSD.BCST (t*64+48)(DX), Y12, Y0 \
	VPDPWSSD.BCST (t*64+52)(DX), Y13, Y0 \
	VPDPWSSD.BCST (t*64+56)(DX), Y14, Y0 \
	VPDPWSSD.BCST (t*64+60)(DX), Y15, Y0 \
	VPSLLD $5, Y0, Y0 \
	VPSUBD Y0, I, I \
	VCVTDQ2PS I, Y1 \
	VMULPS.BCST (t*64)(DX), Y16, Y2 \
	VFMADD231PS Y1, Y2, A

#define E6K8(t, I) \
	VMOVUPS (800+32*t)(SP), Y3 \
	E6K(t, I, Y3) \
	VMOVUPS Y3, (800+32*t)(SP)

#define ELOAD6K \
	VMOVDQU 512(SP), Y8 \
	VMOVDQU 544(SP), Y9 \
	VMOVDQU 576(SP), Y10 \
	VMOVDQU 608(SP), Y11 \
	VMOVDQU 640(SP), Y12 \
	VMOVDQU 672(SP), Y13 \
	VMOVDQU 704(SP), Y14 \
	VMOVDQU 736(SP), Y15 \
	VMOVUPS 768(SP), Y16

// func rowsQ4Kx1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ4Kx1(SB), 0, $704-72
	KARGS
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VPXORD Y30, Y30, Y30
	VPXORD Y31, Y31, Y31
	TESTQ CX, CX
	JZ rowsq4kx1done
rowsq4kx1loop:
	PF18
	H4K
	ZEROI4
	W4K(16, 32)
	T4K(0, 0, Y24)
	W4K(48, 64)
	T4K(0, 1, Y24)
	W4K(80, 96)
	T4K(0, 2, Y24)
	W4K(112, 128)
	T4K(0, 3, Y24)
	ELOAD4K
	E4K(0, Y24, Y28)
	NEXTK(144, 1)
	JNZ rowsq4kx1loop
rowsq4kx1done:
	OUTK1
	VZEROUPPER
	RET

// func rowsQ4Kx2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ4Kx2(SB), 0, $704-72
	KARGS
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VPXORD Y30, Y30, Y30
	VPXORD Y31, Y31, Y31
	TESTQ CX, CX
	JZ rowsq4kx2done
rowsq4kx2loop:
	PF18
	H4K
	ZEROI4
	W4K(16, 32)
	T4K(0, 0, Y24)
	T4K(1, 0, Y25)
	W4K(48, 64)
	T4K(0, 1, Y24)
	T4K(1, 1, Y25)
	W4K(80, 96)
	T4K(0, 2, Y24)
	T4K(1, 2, Y25)
	W4K(112, 128)
	T4K(0, 3, Y24)
	T4K(1, 3, Y25)
	ELOAD4K
	E4K(0, Y24, Y28)
	E4K(1, Y25, Y29)
	NEXTK(144, 2)
	JNZ rowsq4kx2loop
rowsq4kx2done:
	OUTK2
	VZEROUPPER
	RET

// func rowsQ4Kx4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ4Kx4(SB), 0, $704-72
	KARGS
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VPXORD Y30, Y30, Y30
	VPXORD Y31, Y31, Y31
	TESTQ CX, CX
	JZ rowsq4kx4done
rowsq4kx4loop:
	PF18
	H4K
	ZEROI4
	W4K(16, 32)
	T4K(0, 0, Y24)
	T4K(1, 0, Y25)
	T4K(2, 0, Y26)
	T4K(3, 0, Y27)
	W4K(48, 64)
	T4K(0, 1, Y24)
	T4K(1, 1, Y25)
	T4K(2, 1, Y26)
	T4K(3, 1, Y27)
	W4K(80, 96)
	T4K(0, 2, Y24)
	T4K(1, 2, Y25)
	T4K(2, 2, Y26)
	T4K(3, 2, Y27)
	W4K(112, 128)
	T4K(0, 3, Y24)
	T4K(1, 3, Y25)
	T4K(2, 3, Y26)
	T4K(3, 3, Y27)
	ELOAD4K
	E4K(0, Y24, Y28)
	E4K(1, Y25, Y29)
	E4K(2, Y26, Y30)
	E4K(3, Y27, Y31)
	NEXTK(144, 4)
	JNZ rowsq4kx4loop
rowsq4kx4done:
	OUTK4
	VZEROUPPER
	RET

// func rowsQ4Kx8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ4Kx8(SB), 0, $704-72
	KARGS
	ZEROA8(448)
	TESTQ CX, CX
	JZ rowsq4kx8done
rowsq4kx8loop:
	PF18
	H4K
	ZERO8
	W4K(16, 32)
	T4K(0, 0, Y24)
	T4K(1, 0, Y25)
	T4K(2, 0, Y26)
	T4K(3, 0, Y27)
	T4K(4, 0, Y28)
	T4K(5, 0, Y29)
	T4K(6, 0, Y30)
	T4K(7, 0, Y31)
	W4K(48, 64)
	T4K(0, 1, Y24)
	T4K(1, 1, Y25)
	T4K(2, 1, Y26)
	T4K(3, 1, Y27)
	T4K(4, 1, Y28)
	T4K(5, 1, Y29)
	T4K(6, 1, Y30)
	T4K(7, 1, Y31)
	W4K(80, 96)
	T4K(0, 2, Y24)
	T4K(1, 2, Y25)
	T4K(2, 2, Y26)
	T4K(3, 2, Y27)
	T4K(4, 2, Y28)
	T4K(5, 2, Y29)
	T4K(6, 2, Y30)
	T4K(7, 2, Y31)
	W4K(112, 128)
	T4K(0, 3, Y24)
	T4K(1, 3, Y25)
	T4K(2, 3, Y26)
	T4K(3, 3, Y27)
	T4K(4, 3, Y28)
	T4K(5, 3, Y29)
	T4K(6, 3, Y30)
	T4K(7, 3, Y31)
	ELOAD4K
	E4K8(0, Y24)
	E4K8(1, Y25)
	E4K8(2, Y26)
	E4K8(3, Y27)
	E4K8(4, Y28)
	E4K8(5, Y29)
	E4K8(6, Y30)
	E4K8(7, Y31)
	NEXTK(144, 8)
	JNZ rowsq4kx8loop
rowsq4kx8done:
	OUTK8(448)
	VZEROUPPER
	RET

// func rowsQ5Kx1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ5Kx1(SB), 0, $960-72
	KARGS
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VPXORD Y30, Y30, Y30
	VPXORD Y31, Y31, Y31
	TESTQ CX, CX
	JZ rowsq5kx1done
rowsq5kx1loop:
	PF27
	H4K
	ZEROI4
	QH5K
	W4K(48, 64)
	B5L(4, 0, Y8)
	B5L(3, 0, Y16)
	B5L(4, 1, Y9)
	B5L(3, 1, Y17)
	B5L(4, 2, Y10)
	B5L(3, 2, Y18)
	B5L(4, 3, Y11)
	B5L(3, 3, Y19)
	B5L(4, 4, Y12)
	B5L(3, 4, Y20)
	B5L(4, 5, Y13)
	B5L(3, 5, Y21)
	B5L(4, 6, Y14)
	B5L(3, 6, Y22)
	B5L(4, 7, Y15)
	B5L(3, 7, Y23)
	T4K(0, 0, Y24)
	W4K(80, 96)
	B5L(2, 0, Y8)
	B5L(1, 0, Y16)
	B5L(2, 1, Y9)
	B5L(1, 1, Y17)
	B5L(2, 2, Y10)
	B5L(1, 2, Y18)
	B5L(2, 3, Y11)
	B5L(1, 3, Y19)
	B5L(2, 4, Y12)
	B5L(1, 4, Y20)
	B5L(2, 5, Y13)
	B5L(1, 5, Y21)
	B5L(2, 6, Y14)
	B5L(1, 6, Y22)
	B5L(2, 7, Y15)
	B5L(1, 7, Y23)
	T4K(0, 1, Y24)
	W4K(112, 128)
	B5L(0, 0, Y8)
	B5R(1, 0, Y16)
	B5L(0, 1, Y9)
	B5R(1, 1, Y17)
	B5L(0, 2, Y10)
	B5R(1, 2, Y18)
	B5L(0, 3, Y11)
	B5R(1, 3, Y19)
	B5L(0, 4, Y12)
	B5R(1, 4, Y20)
	B5L(0, 5, Y13)
	B5R(1, 5, Y21)
	B5L(0, 6, Y14)
	B5R(1, 6, Y22)
	B5L(0, 7, Y15)
	B5R(1, 7, Y23)
	T4K(0, 2, Y24)
	W4K(144, 160)
	B5R(2, 0, Y8)
	B5R(3, 0, Y16)
	B5R(2, 1, Y9)
	B5R(3, 1, Y17)
	B5R(2, 2, Y10)
	B5R(3, 2, Y18)
	B5R(2, 3, Y11)
	B5R(3, 3, Y19)
	B5R(2, 4, Y12)
	B5R(3, 4, Y20)
	B5R(2, 5, Y13)
	B5R(3, 5, Y21)
	B5R(2, 6, Y14)
	B5R(3, 6, Y22)
	B5R(2, 7, Y15)
	B5R(3, 7, Y23)
	T4K(0, 3, Y24)
	ELOAD4K
	E4K(0, Y24, Y28)
	NEXTK(176, 1)
	JNZ rowsq5kx1loop
rowsq5kx1done:
	OUTK1
	VZEROUPPER
	RET

// func rowsQ5Kx2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ5Kx2(SB), 0, $960-72
	KARGS
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VPXORD Y30, Y30, Y30
	VPXORD Y31, Y31, Y31
	TESTQ CX, CX
	JZ rowsq5kx2done
rowsq5kx2loop:
	PF27
	H4K
	ZEROI4
	QH5K
	W4K(48, 64)
	B5L(4, 0, Y8)
	B5L(3, 0, Y16)
	B5L(4, 1, Y9)
	B5L(3, 1, Y17)
	B5L(4, 2, Y10)
	B5L(3, 2, Y18)
	B5L(4, 3, Y11)
	B5L(3, 3, Y19)
	B5L(4, 4, Y12)
	B5L(3, 4, Y20)
	B5L(4, 5, Y13)
	B5L(3, 5, Y21)
	B5L(4, 6, Y14)
	B5L(3, 6, Y22)
	B5L(4, 7, Y15)
	B5L(3, 7, Y23)
	T4K(0, 0, Y24)
	T4K(1, 0, Y25)
	W4K(80, 96)
	B5L(2, 0, Y8)
	B5L(1, 0, Y16)
	B5L(2, 1, Y9)
	B5L(1, 1, Y17)
	B5L(2, 2, Y10)
	B5L(1, 2, Y18)
	B5L(2, 3, Y11)
	B5L(1, 3, Y19)
	B5L(2, 4, Y12)
	B5L(1, 4, Y20)
	B5L(2, 5, Y13)
	B5L(1, 5, Y21)
	B5L(2, 6, Y14)
	B5L(1, 6, Y22)
	B5L(2, 7, Y15)
	B5L(1, 7, Y23)
	T4K(0, 1, Y24)
	T4K(1, 1, Y25)
	W4K(112, 128)
	B5L(0, 0, Y8)
	B5R(1, 0, Y16)
	B5L(0, 1, Y9)
	B5R(1, 1, Y17)
	B5L(0, 2, Y10)
	B5R(1, 2, Y18)
	B5L(0, 3, Y11)
	B5R(1, 3, Y19)
	B5L(0, 4, Y12)
	B5R(1, 4, Y20)
	B5L(0, 5, Y13)
	B5R(1, 5, Y21)
	B5L(0, 6, Y14)
	B5R(1, 6, Y22)
	B5L(0, 7, Y15)
	B5R(1, 7, Y23)
	T4K(0, 2, Y24)
	T4K(1, 2, Y25)
	W4K(144, 160)
	B5R(2, 0, Y8)
	B5R(3, 0, Y16)
	B5R(2, 1, Y9)
	B5R(3, 1, Y17)
	B5R(2, 2, Y10)
	B5R(3, 2, Y18)
	B5R(2, 3, Y11)
	B5R(3, 3, Y19)
	B5R(2, 4, Y12)
	B5R(3, 4, Y20)
	B5R(2, 5, Y13)
	B5R(3, 5, Y21)
	B5R(2, 6, Y14)
	B5R(3, 6, Y22)
	B5R(2, 7, Y15)
	B5R(3, 7, Y23)
	T4K(0, 3, Y24)
	T4K(1, 3, Y25)
	ELOAD4K
	E4K(0, Y24, Y28)
	E4K(1, Y25, Y29)
	NEXTK(176, 2)
	JNZ rowsq5kx2loop
rowsq5kx2done:
	OUTK2
	VZEROUPPER
	RET

// func rowsQ5Kx4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ5Kx4(SB), 0, $960-72
	KARGS
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VPXORD Y30, Y30, Y30
	VPXORD Y31, Y31, Y31
	TESTQ CX, CX
	JZ rowsq5kx4done
rowsq5kx4loop:
	PF27
	H4K
	ZEROI4
	QH5K
	W4K(48, 64)
	B5L(4, 0, Y8)
	B5L(3, 0, Y16)
	B5L(4, 1, Y9)
	B5L(3, 1, Y17)
	B5L(4, 2, Y10)
	B5L(3, 2, Y18)
	B5L(4, 3, Y11)
	B5L(3, 3, Y19)
	B5L(4, 4, Y12)
	B5L(3, 4, Y20)
	B5L(4, 5, Y13)
	B5L(3, 5, Y21)
	B5L(4, 6, Y14)
	B5L(3, 6, Y22)
	B5L(4, 7, Y15)
	B5L(3, 7, Y23)
	T4K(0, 0, Y24)
	T4K(1, 0, Y25)
	T4K(2, 0, Y26)
	T4K(3, 0, Y27)
	W4K(80, 96)
	B5L(2, 0, Y8)
	B5L(1, 0, Y16)
	B5L(2, 1, Y9)
	B5L(1, 1, Y17)
	B5L(2, 2, Y10)
	B5L(1, 2, Y18)
	B5L(2, 3, Y11)
	B5L(1, 3, Y19)
	B5L(2, 4, Y12)
	B5L(1, 4, Y20)
	B5L(2, 5, Y13)
	B5L(1, 5, Y21)
	B5L(2, 6, Y14)
	B5L(1, 6, Y22)
	B5L(2, 7, Y15)
	B5L(1, 7, Y23)
	T4K(0, 1, Y24)
	T4K(1, 1, Y25)
	T4K(2, 1, Y26)
	T4K(3, 1, Y27)
	W4K(112, 128)
	B5L(0, 0, Y8)
	B5R(1, 0, Y16)
	B5L(0, 1, Y9)
	B5R(1, 1, Y17)
	B5L(0, 2, Y10)
	B5R(1, 2, Y18)
	B5L(0, 3, Y11)
	B5R(1, 3, Y19)
	B5L(0, 4, Y12)
	B5R(1, 4, Y20)
	B5L(0, 5, Y13)
	B5R(1, 5, Y21)
	B5L(0, 6, Y14)
	B5R(1, 6, Y22)
	B5L(0, 7, Y15)
	B5R(1, 7, Y23)
	T4K(0, 2, Y24)
	T4K(1, 2, Y25)
	T4K(2, 2, Y26)
	T4K(3, 2, Y27)
	W4K(144, 160)
	B5R(2, 0, Y8)
	B5R(3, 0, Y16)
	B5R(2, 1, Y9)
	B5R(3, 1, Y17)
	B5R(2, 2, Y10)
	B5R(3, 2, Y18)
	B5R(2, 3, Y11)
	B5R(3, 3, Y19)
	B5R(2, 4, Y12)
	B5R(3, 4, Y20)
	B5R(2, 5, Y13)
	B5R(3, 5, Y21)
	B5R(2, 6, Y14)
	B5R(3, 6, Y22)
	B5R(2, 7, Y15)
	B5R(3, 7, Y23)
	T4K(0, 3, Y24)
	T4K(1, 3, Y25)
	T4K(2, 3, Y26)
	T4K(3, 3, Y27)
	ELOAD4K
	E4K(0, Y24, Y28)
	E4K(1, Y25, Y29)
	E4K(2, Y26, Y30)
	E4K(3, Y27, Y31)
	NEXTK(176, 4)
	JNZ rowsq5kx4loop
rowsq5kx4done:
	OUTK4
	VZEROUPPER
	RET

// func rowsQ5Kx8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ5Kx8(SB), 0, $960-72
	KARGS
	ZEROA8(448)
	TESTQ CX, CX
	JZ rowsq5kx8done
rowsq5kx8loop:
	PF27
	H4K
	ZERO8
	QH5K
	W4K(48, 64)
	B5L(4, 0, Y8)
	B5L(3, 0, Y16)
	B5L(4, 1, Y9)
	B5L(3, 1, Y17)
	B5L(4, 2, Y10)
	B5L(3, 2, Y18)
	B5L(4, 3, Y11)
	B5L(3, 3, Y19)
	B5L(4, 4, Y12)
	B5L(3, 4, Y20)
	B5L(4, 5, Y13)
	B5L(3, 5, Y21)
	B5L(4, 6, Y14)
	B5L(3, 6, Y22)
	B5L(4, 7, Y15)
	B5L(3, 7, Y23)
	T4K(0, 0, Y24)
	T4K(1, 0, Y25)
	T4K(2, 0, Y26)
	T4K(3, 0, Y27)
	T4K(4, 0, Y28)
	T4K(5, 0, Y29)
	T4K(6, 0, Y30)
	T4K(7, 0, Y31)
	W4K(80, 96)
	B5L(2, 0, Y8)
	B5L(1, 0, Y16)
	B5L(2, 1, Y9)
	B5L(1, 1, Y17)
	B5L(2, 2, Y10)
	B5L(1, 2, Y18)
	B5L(2, 3, Y11)
	B5L(1, 3, Y19)
	B5L(2, 4, Y12)
	B5L(1, 4, Y20)
	B5L(2, 5, Y13)
	B5L(1, 5, Y21)
	B5L(2, 6, Y14)
	B5L(1, 6, Y22)
	B5L(2, 7, Y15)
	B5L(1, 7, Y23)
	T4K(0, 1, Y24)
	T4K(1, 1, Y25)
	T4K(2, 1, Y26)
	T4K(3, 1, Y27)
	T4K(4, 1, Y28)
	T4K(5, 1, Y29)
	T4K(6, 1, Y30)
	T4K(7, 1, Y31)
	W4K(112, 128)
	B5L(0, 0, Y8)
	B5R(1, 0, Y16)
	B5L(0, 1, Y9)
	B5R(1, 1, Y17)
	B5L(0, 2, Y10)
	B5R(1, 2, Y18)
	B5L(0, 3, Y11)
	B5R(1, 3, Y19)
	B5L(0, 4, Y12)
	B5R(1, 4, Y20)
	B5L(0, 5, Y13)
	B5R(1, 5, Y21)
	B5L(0, 6, Y14)
	B5R(1, 6, Y22)
	B5L(0, 7, Y15)
	B5R(1, 7, Y23)
	T4K(0, 2, Y24)
	T4K(1, 2, Y25)
	T4K(2, 2, Y26)
	T4K(3, 2, Y27)
	T4K(4, 2, Y28)
	T4K(5, 2, Y29)
	T4K(6, 2, Y30)
	T4K(7, 2, Y31)
	W4K(144, 160)
	B5R(2, 0, Y8)
	B5R(3, 0, Y16)
	B5R(2, 1, Y9)
	B5R(3, 1, Y17)
	B5R(2, 2, Y10)
	B5R(3, 2, Y18)
	B5R(2, 3, Y11)
	B5R(3, 3, Y19)
	B5R(2, 4, Y12)
	B5R(3, 4, Y20)
	B5R(2, 5, Y13)
	B5R(3, 5, Y21)
	B5R(2, 6, Y14)
	B5R(3, 6, Y22)
	B5R(2, 7, Y15)
	B5R(3, 7, Y23)
	T4K(0, 3, Y24)
	T4K(1, 3, Y25)
	T4K(2, 3, Y26)
	T4K(3, 3, Y27)
	T4K(4, 3, Y28)
	T4K(5, 3, Y29)
	T4K(6, 3, Y30)
	T4K(7, 3, Y31)
	ELOAD4K
	E4K8(0, Y24)
	E4K8(1, Y25)
	E4K8(2, Y26)
	E4K8(3, Y27)
	E4K8(4, Y28)
	E4K8(5, Y29)
	E4K8(6, Y30)
	E4K8(7, Y31)
	NEXTK(176, 8)
	JNZ rowsq5kx8loop
rowsq5kx8done:
	OUTK8(448)
	VZEROUPPER
	RET

// func rowsQ6Kx1(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ6Kx1(SB), 0, $1056-72
	KARGS
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VPXORD Y30, Y30, Y30
	VPXORD Y31, Y31, Y31
	TESTQ CX, CX
	JZ rowsq6kx1done
rowsq6kx1loop:
	PF27
	H6K
	ZEROI4
	W6A(0, 128)
	T6K(0, 0, 4, Y24)
	W6A(16, 144)
	T6K(0, 1, 5, Y24)
	W6B(32, 128)
	T6K(0, 2, 6, Y24)
	W6B(48, 144)
	T6K(0, 3, 7, Y24)
	W6A(64, 160)
	T6K(0, 8, 12, Y24)
	W6A(80, 176)
	T6K(0, 9, 13, Y24)
	W6B(96, 160)
	T6K(0, 10, 14, Y24)
	W6B(112, 176)
	T6K(0, 11, 15, Y24)
	ELOAD6K
	E6K(0, Y24, Y28)
	NEXTK(210, 1)
	JNZ rowsq6kx1loop
rowsq6kx1done:
	OUTK1
	VZEROUPPER
	RET

// func rowsQ6Kx2(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ6Kx2(SB), 0, $1056-72
	KARGS
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VPXORD Y30, Y30, Y30
	VPXORD Y31, Y31, Y31
	TESTQ CX, CX
	JZ rowsq6kx2done
rowsq6kx2loop:
	PF27
	H6K
	ZEROI4
	W6A(0, 128)
	T6K(0, 0, 4, Y24)
	T6K(1, 0, 4, Y25)
	W6A(16, 144)
	T6K(0, 1, 5, Y24)
	T6K(1, 1, 5, Y25)
	W6B(32, 128)
	T6K(0, 2, 6, Y24)
	T6K(1, 2, 6, Y25)
	W6B(48, 144)
	T6K(0, 3, 7, Y24)
	T6K(1, 3, 7, Y25)
	W6A(64, 160)
	T6K(0, 8, 12, Y24)
	T6K(1, 8, 12, Y25)
	W6A(80, 176)
	T6K(0, 9, 13, Y24)
	T6K(1, 9, 13, Y25)
	W6B(96, 160)
	T6K(0, 10, 14, Y24)
	T6K(1, 10, 14, Y25)
	W6B(112, 176)
	T6K(0, 11, 15, Y24)
	T6K(1, 11, 15, Y25)
	ELOAD6K
	E6K(0, Y24, Y28)
	E6K(1, Y25, Y29)
	NEXTK(210, 2)
	JNZ rowsq6kx2loop
rowsq6kx2done:
	OUTK2
	VZEROUPPER
	RET

// func rowsQ6Kx4(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ6Kx4(SB), 0, $1056-72
	KARGS
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VPXORD Y30, Y30, Y30
	VPXORD Y31, Y31, Y31
	TESTQ CX, CX
	JZ rowsq6kx4done
rowsq6kx4loop:
	PF27
	H6K
	ZEROI4
	W6A(0, 128)
	T6K(0, 0, 4, Y24)
	T6K(1, 0, 4, Y25)
	T6K(2, 0, 4, Y26)
	T6K(3, 0, 4, Y27)
	W6A(16, 144)
	T6K(0, 1, 5, Y24)
	T6K(1, 1, 5, Y25)
	T6K(2, 1, 5, Y26)
	T6K(3, 1, 5, Y27)
	W6B(32, 128)
	T6K(0, 2, 6, Y24)
	T6K(1, 2, 6, Y25)
	T6K(2, 2, 6, Y26)
	T6K(3, 2, 6, Y27)
	W6B(48, 144)
	T6K(0, 3, 7, Y24)
	T6K(1, 3, 7, Y25)
	T6K(2, 3, 7, Y26)
	T6K(3, 3, 7, Y27)
	W6A(64, 160)
	T6K(0, 8, 12, Y24)
	T6K(1, 8, 12, Y25)
	T6K(2, 8, 12, Y26)
	T6K(3, 8, 12, Y27)
	W6A(80, 176)
	T6K(0, 9, 13, Y24)
	T6K(1, 9, 13, Y25)
	T6K(2, 9, 13, Y26)
	T6K(3, 9, 13, Y27)
	W6B(96, 160)
	T6K(0, 10, 14, Y24)
	T6K(1, 10, 14, Y25)
	T6K(2, 10, 14, Y26)
	T6K(3, 10, 14, Y27)
	W6B(112, 176)
	T6K(0, 11, 15, Y24)
	T6K(1, 11, 15, Y25)
	T6K(2, 11, 15, Y26)
	T6K(3, 11, 15, Y27)
	ELOAD6K
	E6K(0, Y24, Y28)
	E6K(1, Y25, Y29)
	E6K(2, Y26, Y30)
	E6K(3, Y27, Y31)
	NEXTK(210, 4)
	JNZ rowsq6kx4loop
rowsq6kx4done:
	OUTK4
	VZEROUPPER
	RET

// func rowsQ6Kx8(w *byte, rstride, nb int, qx *int8, dx *float32, sx unsafe.Pointer, dstride int, out *float32, ostride int)
TEXT ·rowsQ6Kx8(SB), 0, $1056-72
	KARGS
	ZEROA8(800)
	TESTQ CX, CX
	JZ rowsq6kx8done
rowsq6kx8loop:
	PF27
	H6K
	ZERO8
	W6A(0, 128)
	T6K(0, 0, 4, Y24)
	T6K(1, 0, 4, Y25)
	T6K(2, 0, 4, Y26)
	T6K(3, 0, 4, Y27)
	T6K(4, 0, 4, Y28)
	T6K(5, 0, 4, Y29)
	T6K(6, 0, 4, Y30)
	T6K(7, 0, 4, Y31)
	W6A(16, 144)
	T6K(0, 1, 5, Y24)
	T6K(1, 1, 5, Y25)
	T6K(2, 1, 5, Y26)
	T6K(3, 1, 5, Y27)
	T6K(4, 1, 5, Y28)
	T6K(5, 1, 5, Y29)
	T6K(6, 1, 5, Y30)
	T6K(7, 1, 5, Y31)
	W6B(32, 128)
	T6K(0, 2, 6, Y24)
	T6K(1, 2, 6, Y25)
	T6K(2, 2, 6, Y26)
	T6K(3, 2, 6, Y27)
	T6K(4, 2, 6, Y28)
	T6K(5, 2, 6, Y29)
	T6K(6, 2, 6, Y30)
	T6K(7, 2, 6, Y31)
	W6B(48, 144)
	T6K(0, 3, 7, Y24)
	T6K(1, 3, 7, Y25)
	T6K(2, 3, 7, Y26)
	T6K(3, 3, 7, Y27)
	T6K(4, 3, 7, Y28)
	T6K(5, 3, 7, Y29)
	T6K(6, 3, 7, Y30)
	T6K(7, 3, 7, Y31)
	W6A(64, 160)
	T6K(0, 8, 12, Y24)
	T6K(1, 8, 12, Y25)
	T6K(2, 8, 12, Y26)
	T6K(3, 8, 12, Y27)
	T6K(4, 8, 12, Y28)
	T6K(5, 8, 12, Y29)
	T6K(6, 8, 12, Y30)
	T6K(7, 8, 12, Y31)
	W6A(80, 176)
	T6K(0, 9, 13, Y24)
	T6K(1, 9, 13, Y25)
	T6K(2, 9, 13, Y26)
	T6K(3, 9, 13, Y27)
	T6K(4, 9, 13, Y28)
	T6K(5, 9, 13, Y29)
	T6K(6, 9, 13, Y30)
	T6K(7, 9, 13, Y31)
	W6B(96, 160)
	T6K(0, 10, 14, Y24)
	T6K(1, 10, 14, Y25)
	T6K(2, 10, 14, Y26)
	T6K(3, 10, 14, Y27)
	T6K(4, 10, 14, Y28)
	T6K(5, 10, 14, Y29)
	T6K(6, 10, 14, Y30)
	T6K(7, 10, 14, Y31)
	W6B(112, 176)
	T6K(0, 11, 15, Y24)
	T6K(1, 11, 15, Y25)
	T6K(2, 11, 15, Y26)
	T6K(3, 11, 15, Y27)
	T6K(4, 11, 15, Y28)
	T6K(5, 11, 15, Y29)
	T6K(6, 11, 15, Y30)
	T6K(7, 11, 15, Y31)
	ELOAD6K
	E6K8(0, Y24)
	E6K8(1, Y25)
	E6K8(2, Y26)
	E6K8(3, Y27)
	E6K8(4, Y28)
	E6K8(5, Y29)
	E6K8(6, Y30)
	E6K8(7, Y31)
	NEXTK(210, 8)
	JNZ rowsq6kx8loop
rowsq6kx8done:
	OUTK8(800)
	VZEROUPPER
	RET
