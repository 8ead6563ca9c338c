#include "textflag.h"
#include "vec_amd64.h"
#include "q8rows_amd64.h"
#include "q8rowsavx2_amd64.h"

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
