// VEC4 defines sym as a 32-byte read-only constant: the 8-byte value v four
// times (a vector operand of the kernels, read with VMOVUPD or as a memory
// operand).
#define VEC4(sym, v) \
	DATA sym+0(SB)/8, v \
	DATA sym+8(SB)/8, v \
	DATA sym+16(SB)/8, v \
	DATA sym+24(SB)/8, v \
	GLOBL sym(SB), RODATA|NOPTR, $32
