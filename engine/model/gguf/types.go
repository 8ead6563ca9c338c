package gguf

import "fmt"

// Type is a GGML tensor element type (plain or block-quantised).
type Type uint32

// The tensor types, numbered as in GGML. The CPU backend computes with F32,
// F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the K formats Q2_K..Q6_K
// (engine/cpu: kquant.go has their layouts); the reader knows the layout of
// the others so that files holding them still open (their tensors can be
// listed and bounds-checked, not used). Q8_K is llama.cpp's activation
// format for the K formats, not a weight type of real files. A tensor's
// rows must hold whole blocks (256 values for the K formats): the reader
// refuses other row lengths, naming the tensor.
const (
	F32    Type = 0
	F16    Type = 1
	Q4_0   Type = 2
	Q4_1   Type = 3
	Q5_0   Type = 6
	Q5_1   Type = 7
	Q8_0   Type = 8
	Q8_1   Type = 9
	Q2_K   Type = 10
	Q3_K   Type = 11
	Q4_K   Type = 12
	Q5_K   Type = 13
	Q6_K   Type = 14
	Q8_K   Type = 15
	IQ4_NL Type = 20
	I8     Type = 24
	I16    Type = 25
	I32    Type = 26
	I64    Type = 27
	F64    Type = 28
	BF16   Type = 30
)

type layout struct {
	name        string
	block, size int
}

var layouts = map[Type]layout{
	F32: {"F32", 1, 4}, F16: {"F16", 1, 2}, Q4_0: {"Q4_0", 32, 18}, Q4_1: {"Q4_1", 32, 20},
	Q5_0: {"Q5_0", 32, 22}, Q5_1: {"Q5_1", 32, 24}, Q8_0: {"Q8_0", 32, 34}, Q8_1: {"Q8_1", 32, 36},
	Q2_K: {"Q2_K", 256, 84}, Q3_K: {"Q3_K", 256, 110}, Q4_K: {"Q4_K", 256, 144}, Q5_K: {"Q5_K", 256, 176},
	Q6_K: {"Q6_K", 256, 210}, Q8_K: {"Q8_K", 256, 292}, IQ4_NL: {"IQ4_NL", 32, 18},
	I8: {"I8", 1, 1}, I16: {"I16", 1, 2}, I32: {"I32", 1, 4}, I64: {"I64", 1, 8}, F64: {"F64", 1, 8},
	BF16: {"BF16", 1, 2},
}

// blockLayout returns the number of elements per block and bytes per block.
func (t Type) blockLayout() (block, size int, ok bool) {
	l, ok := layouts[t]
	return l.block, l.size, ok
}

// BlockSize is the number of elements per block (1 for plain types), 0 if unknown.
func (t Type) BlockSize() int { return layouts[t].block }

// BlockBytes is the number of bytes per block, 0 if unknown.
func (t Type) BlockBytes() int { return layouts[t].size }

// RowBytes is the number of bytes of a row of n elements (n a multiple of
// BlockSize).
func (t Type) RowBytes(n int) int {
	l := layouts[t]
	if l.block == 0 {
		return 0
	}
	return n / l.block * l.size
}

// String is the GGML name of the type, e.g. "Q4_1".
func (t Type) String() string {
	if l, ok := layouts[t]; ok {
		return l.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}
