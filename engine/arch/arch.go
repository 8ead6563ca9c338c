// Package arch holds what the architecture packages under it share. Each
// subpackage (llama, gemma4) describes one architecture for every backend
// and for the converter: its config and validation, layer plan, KV
// geometry, RoPE specs (package rope), weight names and embedding rules.
// None of them imports a backend or computes a forward pass.
package arch

// Tensor names one weight and the shape an architecture expects for it:
// Rows×Cols for a matrix (row-major: GGUF dims [Cols, Rows], safetensors
// shape [Rows, Cols]), Rows 0 for a vector of Cols elements. A zero Tensor
// (Name "") means the layer has no such weight.
type Tensor struct {
	Name       string
	Rows, Cols int
}

// Vector reports whether t is a 1-D tensor.
func (t Tensor) Vector() bool { return t.Rows == 0 }

// Matrix is the Tensor name of rows×cols.
func Matrix(name string, rows, cols int) Tensor { return Tensor{Name: name, Rows: rows, Cols: cols} }

// Vector is the Tensor name of n elements.
func Vector(name string, n int) Tensor { return Tensor{Name: name, Cols: n} }
