#include "textflag.h"

// Four dot products of one weight row (F32, F16 or BF16, widened as it is
// read) with four tokens, with AVX-512 (VL) registers so that each token has
// the four 8-lane accumulators of dotAVX2: every token's result is exactly
// Dot's, bit for bit (lane j of accumulator k takes elements 32i+8k+j, the
// same FMAs in the same order, the same reduction tree). Reading the row
// once for four tokens, straight from the weights (no widened copy of the
// row, so the loads of the weight stream overlap the FMAs), is what makes a
// 4-token call cost little more than a 1-token one on memory-bound models.
//
// func dot4F32(w *byte, x *float32, xstride, n int, out *[4]float32)
// w the row, x token 0 (tokens xstride bytes apart), n a multiple of 32.
//
// Registers: SI w, R8 x, R11 xstride, R13 3*xstride, CX elements left, DI
// out; Y0..Y3 the row's 32 elements, Y16..Y31 the accumulators (token t's
// accumulator k in Y(16+4t+k)).

#define SETUP4 \
	MOVQ w+0(FP), SI \
	MOVQ x+8(FP), R8 \
	MOVQ xstride+16(FP), R11 \
	MOVQ n+24(FP), CX \
	MOVQ out+32(FP), DI \
	LEAQ (R11)(R11*2), R13 \
	VPXORD Y16, Y16, Y16 \
	VPXORD Y17, Y17, Y17 \
	VPXORD Y18, Y18, Y18 \
	VPXORD Y19, Y19, Y19 \
	VPXORD Y20, Y20, Y20 \
	VPXORD Y21, Y21, Y21 \
	VPXORD Y22, Y22, Y22 \
	VPXORD Y23, Y23, Y23 \
	VPXORD Y24, Y24, Y24 \
	VPXORD Y25, Y25, Y25 \
	VPXORD Y26, Y26, Y26 \
	VPXORD Y27, Y27, Y27 \
	VPXORD Y28, Y28, Y28 \
	VPXORD Y29, Y29, Y29 \
	VPXORD Y30, Y30, Y30 \
	VPXORD Y31, Y31, Y31

// FMA4 adds the 32 elements in Y0..Y3 times the 4 tokens' elements.
#define FMA4 \
	VFMADD231PS (R8), Y0, Y16 \
	VFMADD231PS 32(R8), Y1, Y17 \
	VFMADD231PS 64(R8), Y2, Y18 \
	VFMADD231PS 96(R8), Y3, Y19 \
	VFMADD231PS (R8)(R11*1), Y0, Y20 \
	VFMADD231PS 32(R8)(R11*1), Y1, Y21 \
	VFMADD231PS 64(R8)(R11*1), Y2, Y22 \
	VFMADD231PS 96(R8)(R11*1), Y3, Y23 \
	VFMADD231PS (R8)(R11*2), Y0, Y24 \
	VFMADD231PS 32(R8)(R11*2), Y1, Y25 \
	VFMADD231PS 64(R8)(R11*2), Y2, Y26 \
	VFMADD231PS 96(R8)(R11*2), Y3, Y27 \
	VFMADD231PS (R8)(R13*1), Y0, Y28 \
	VFMADD231PS 32(R8)(R13*1), Y1, Y29 \
	VFMADD231PS 64(R8)(R13*1), Y2, Y30 \
	VFMADD231PS 96(R8)(R13*1), Y3, Y31 \
	ADDQ $128, R8

// RED4 reduces token t's accumulators a0..a3 like dotAVX2 and stores the
// sum at off(DI).
#define RED4(a0, a1, a2, a3, off) \
	VADDPS a1, a0, Y0 \
	VADDPS a3, a2, Y2 \
	VADDPS Y2, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VHADDPS X0, X0, X0 \
	VHADDPS X0, X0, X0 \
	VMOVSS X0, off(DI)

#define STORE4 \
	RED4(Y16, Y17, Y18, Y19, 0) \
	RED4(Y20, Y21, Y22, Y23, 4) \
	RED4(Y24, Y25, Y26, Y27, 8) \
	RED4(Y28, Y29, Y30, Y31, 12) \
	VZEROUPPER \
	RET

// LOADF32, LOADF16, LOADBF16 put the row's next 32 elements, as float32,
// in Y0..Y3, prefetching 512 bytes ahead.
#define LOADF32 \
	PREFETCHT0 1024(SI) \
	PREFETCHT0 576(SI) \
	VMOVUPS (SI), Y0 \
	VMOVUPS 32(SI), Y1 \
	VMOVUPS 64(SI), Y2 \
	VMOVUPS 96(SI), Y3 \
	ADDQ $128, SI

#define LOADF16 \
	PREFETCHT0 1024(SI) \
	VCVTPH2PS (SI), Y0 \
	VCVTPH2PS 16(SI), Y1 \
	VCVTPH2PS 32(SI), Y2 \
	VCVTPH2PS 48(SI), Y3 \
	ADDQ $64, SI

#define LOADBF16 \
	PREFETCHT0 1024(SI) \
	VPMOVZXWD (SI), Y0 \
	VPMOVZXWD 16(SI), Y1 \
	VPMOVZXWD 32(SI), Y2 \
	VPMOVZXWD 48(SI), Y3 \
	VPSLLD $16, Y0, Y0 \
	VPSLLD $16, Y1, Y1 \
	VPSLLD $16, Y2, Y2 \
	VPSLLD $16, Y3, Y3 \
	ADDQ $64, SI

// func dot4F32(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot4F32(SB), NOSPLIT, $0-40
	SETUP4
d4f32loop:
	CMPQ CX, $32
	JL d4f32done
	LOADF32
	FMA4
	SUBQ $32, CX
	JMP d4f32loop
d4f32done:
	STORE4

// func dot4F16(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot4F16(SB), NOSPLIT, $0-40
	SETUP4
d4f16loop:
	CMPQ CX, $32
	JL d4f16done
	LOADF16
	FMA4
	SUBQ $32, CX
	JMP d4f16loop
d4f16done:
	STORE4

// func dot4BF16(w *byte, x *float32, xstride, n int, out *[4]float32)
// A bfloat16 widens to float32 exactly as bf16AVX2 does it (zero-extend,
// shift left by 16).
TEXT ·dot4BF16(SB), NOSPLIT, $0-40
	SETUP4
d4bf16loop:
	CMPQ CX, $32
	JL d4bf16done
	LOADBF16
	FMA4
	SUBQ $32, CX
	JMP d4bf16loop
d4bf16done:
	STORE4

// One and two tokens: the same, on AVX2 registers (accumulators Y4..Y7 for
// token 0, Y8..Y11 for token 1), so they run wherever F16C does.
//
// func dot2F32(w *byte, x *float32, xstride, n int, out *[4]float32)
// (and F16, BF16; dot1*: the same arguments, one token)

#define SETUP2 \
	MOVQ w+0(FP), SI \
	MOVQ x+8(FP), R8 \
	MOVQ xstride+16(FP), R11 \
	MOVQ n+24(FP), CX \
	MOVQ out+32(FP), DI \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	VXORPS Y8, Y8, Y8 \
	VXORPS Y9, Y9, Y9 \
	VXORPS Y10, Y10, Y10 \
	VXORPS Y11, Y11, Y11

#define FMA1 \
	VFMADD231PS (R8), Y0, Y4 \
	VFMADD231PS 32(R8), Y1, Y5 \
	VFMADD231PS 64(R8), Y2, Y6 \
	VFMADD231PS 96(R8), Y3, Y7

#define FMA2 \
	FMA1 \
	VFMADD231PS (R8)(R11*1), Y0, Y8 \
	VFMADD231PS 32(R8)(R11*1), Y1, Y9 \
	VFMADD231PS 64(R8)(R11*1), Y2, Y10 \
	VFMADD231PS 96(R8)(R11*1), Y3, Y11

// func dot2F32(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot2F32(SB), NOSPLIT, $0-40
	SETUP2
d2f32loop:
	CMPQ CX, $32
	JL d2f32done
	LOADF32
	FMA2
	ADDQ $128, R8
	SUBQ $32, CX
	JMP d2f32loop
d2f32done:
	RED4(Y4, Y5, Y6, Y7, 0)
	RED4(Y8, Y9, Y10, Y11, 4)
	VZEROUPPER
	RET

// func dot2F16(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot2F16(SB), NOSPLIT, $0-40
	SETUP2
d2f16loop:
	CMPQ CX, $32
	JL d2f16done
	LOADF16
	FMA2
	ADDQ $128, R8
	SUBQ $32, CX
	JMP d2f16loop
d2f16done:
	RED4(Y4, Y5, Y6, Y7, 0)
	RED4(Y8, Y9, Y10, Y11, 4)
	VZEROUPPER
	RET

// func dot2BF16(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot2BF16(SB), NOSPLIT, $0-40
	SETUP2
d2bf16loop:
	CMPQ CX, $32
	JL d2bf16done
	LOADBF16
	FMA2
	ADDQ $128, R8
	SUBQ $32, CX
	JMP d2bf16loop
d2bf16done:
	RED4(Y4, Y5, Y6, Y7, 0)
	RED4(Y8, Y9, Y10, Y11, 4)
	VZEROUPPER
	RET

// func dot1F16(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot1F16(SB), NOSPLIT, $0-40
	SETUP2
d1f16loop:
	CMPQ CX, $32
	JL d1f16done
	LOADF16
	FMA1
	ADDQ $128, R8
	SUBQ $32, CX
	JMP d1f16loop
d1f16done:
	RED4(Y4, Y5, Y6, Y7, 0)
	VZEROUPPER
	RET

// func dot1BF16(w *byte, x *float32, xstride, n int, out *[4]float32)
TEXT ·dot1BF16(SB), NOSPLIT, $0-40
	SETUP2
d1bf16loop:
	CMPQ CX, $32
	JL d1bf16done
	LOADBF16
	FMA1
	ADDQ $128, R8
	SUBQ $32, CX
	JMP d1bf16loop
d1bf16done:
	RED4(Y4, Y5, Y6, Y7, 0)
	VZEROUPPER
	RET
