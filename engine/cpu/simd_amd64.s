#include "textflag.h"

// func dotAVX2(a, b *float32, n int) float32
// n is a multiple of 32. Four 8-lane FMA accumulators, lane j of accumulator
// k taking elements 32i+8k+j; reduced in a fixed tree.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
dotloop:
	CMPQ CX, $32
	JL dotdone
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP dotloop
dotdone:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

DATA nibmask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibmask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nibmask<>(SB), RODATA|NOPTR, $16

// func dequant4AVX2(dst *float32, qs *byte, stride int, d, m *float32, nblocks int)
// For each block b: 16 bytes of nibbles at qs+b*stride; element i (0..15) is
// the low nibble of byte i, element i+16 the high nibble; x = q*d[b] + m[b]
// (one rounding, FMA).
TEXT ·dequant4AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ qs+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ d+24(FP), R8
	MOVQ m+32(FP), R9
	MOVQ nblocks+40(FP), CX
	VMOVDQU nibmask<>(SB), X15
q4loop:
	TESTQ CX, CX
	JZ q4done
	VBROADCASTSS (R8), Y8
	VBROADCASTSS (R9), Y9
	VMOVDQU (SI), X0
	VPAND X15, X0, X1
	VPSRLW $4, X0, X2
	VPAND X15, X2, X2
	VPMOVZXBD X1, Y3
	VPSRLDQ $8, X1, X1
	VPMOVZXBD X1, Y4
	VPMOVZXBD X2, Y5
	VPSRLDQ $8, X2, X2
	VPMOVZXBD X2, Y6
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VFMADD213PS Y9, Y8, Y3
	VFMADD213PS Y9, Y8, Y4
	VFMADD213PS Y9, Y8, Y5
	VFMADD213PS Y9, Y8, Y6
	VMOVUPS Y3, (DI)
	VMOVUPS Y4, 32(DI)
	VMOVUPS Y5, 64(DI)
	VMOVUPS Y6, 96(DI)
	ADDQ $128, DI
	ADDQ DX, SI
	ADDQ $4, R8
	ADDQ $4, R9
	DECQ CX
	JMP q4loop
q4done:
	VZEROUPPER
	RET

// func dequant8AVX2(dst *float32, qs *byte, stride int, d *float32, nblocks int)
// For each block b: 32 int8 at qs+b*stride; x = q*d[b].
TEXT ·dequant8AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ qs+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ d+24(FP), R8
	MOVQ nblocks+32(FP), CX
q8loop:
	TESTQ CX, CX
	JZ q8done
	VBROADCASTSS (R8), Y8
	VPMOVSXBD (SI), Y3
	VPMOVSXBD 8(SI), Y4
	VPMOVSXBD 16(SI), Y5
	VPMOVSXBD 24(SI), Y6
	VCVTDQ2PS Y3, Y3
	VCVTDQ2PS Y4, Y4
	VCVTDQ2PS Y5, Y5
	VCVTDQ2PS Y6, Y6
	VMULPS Y8, Y3, Y3
	VMULPS Y8, Y4, Y4
	VMULPS Y8, Y5, Y5
	VMULPS Y8, Y6, Y6
	VMOVUPS Y3, (DI)
	VMOVUPS Y4, 32(DI)
	VMOVUPS Y5, 64(DI)
	VMOVUPS Y6, 96(DI)
	ADDQ $128, DI
	ADDQ DX, SI
	ADDQ $4, R8
	DECQ CX
	JMP q8loop
q8done:
	VZEROUPPER
	RET

// func f16AVX2(dst *float32, src *uint16, n int)   // n multiple of 8
TEXT ·f16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
f16loop:
	CMPQ CX, $8
	JL f16done
	VCVTPH2PS (SI), Y0
	VMOVUPS Y0, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP f16loop
f16done:
	VZEROUPPER
	RET
