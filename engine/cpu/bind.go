package cpu

import (
	"fmt"
	"slices"
	"strings"

	"anechat/engine/arch"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
	"anechat/engine/model/safetensors"
)

// A weightSource is where a model's weights come from: a GGUF file
// (ggufWeights), a Hugging Face safetensors directory (dirWeights) or, in
// tests and benchmarks, random values (randomSource).
type weightSource interface {
	// Path names the file or directory in errors.
	Path() string
	// stored describes the weight t names, as the source holds it, and
	// marks it read: an error names the source and the tensor when it is
	// missing or of a type the kernels do not compute with.
	stored(t arch.Tensor) (storedWeight, error)
	// shape is the shape t must have as this source writes shapes.
	shape(t arch.Tensor) []int
	// has reports whether the source holds a tensor name.
	has(name string) bool
	// unread lists the tensors of the model no binding asked for, and the
	// file of the first.
	unread() (names []string, file string)
	// mappings are the memory mappings the weights alias.
	mappings() []*mmap.Mapping
}

// storedWeight is one tensor of a weightSource.
type storedWeight struct {
	typ   gguf.Type
	shape []int  // as the source writes it (GGUF: innermost first)
	file  string // the file that holds it
	data  []byte // aliasing the mapping
}

// binder binds the weights an architecture names (engine/arch) to the
// kernels' types, each once, checking its shape, and keeps the first
// error so that a loader lists its weights without checking each.
type binder struct {
	src weightSource
	err error
	// round, when set, makes every weight but the embedding tables (table)
	// a float32 copy of its values passed through round (OpenLayers).
	round func(name string, w []float32) error
}

// mat binds t as a t.Rows×t.Cols matrix; nil for a zero Tensor or after
// an error.
func (b *binder) mat(t arch.Tensor) *Matrix {
	if b.err != nil || t.Name == "" {
		return nil
	}
	m, err := b.bind(t)
	if err == nil && b.round != nil {
		m, err = b.rounded(t, m)
	}
	b.err = err
	return m
}

// embedding binds the embedding table t. A table that is not the output
// projection too (tied) is only indexed: it is bound as stored even when
// the binder rounds.
func (b *binder) embedding(t arch.Tensor, output bool) *Matrix {
	if output || b.err != nil || t.Name == "" {
		return b.mat(t)
	}
	m, err := b.bind(t)
	b.err = err
	return m
}

// rounded returns m's values as a float32 matrix after b.round.
func (b *binder) rounded(t arch.Tensor, m *Matrix) (*Matrix, error) {
	vals := make([]float32, m.Rows*m.Cols)
	for r := range m.Rows {
		m.Row(vals[r*m.Cols:], r)
	}
	if err := b.round(t.Name, vals); err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", b.src.Path(), err)
	}
	return FromF32(t.Name, m.Rows, m.Cols, vals), nil
}

func (b *binder) bind(t arch.Tensor) (*Matrix, error) {
	w, err := b.src.stored(t)
	if err != nil {
		return nil, err
	}
	if err := checkType(t.Name, w.typ); err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", w.file, err)
	}
	if want := b.src.shape(t); !slices.Equal(w.shape, want) {
		return nil, fmt.Errorf("cpu: %s: tensor %q has shape %v, want %v", w.file, t.Name, w.shape, want)
	}
	m, err := NewMatrix(t.Name, w.typ, max(t.Rows, 1), t.Cols, w.data)
	if err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", w.file, err)
	}
	return m, nil
}

// vec reads the vector t of t.Cols elements as float32 (a copy); nil for
// a zero Tensor or after an error.
func (b *binder) vec(t arch.Tensor) []float32 {
	m := b.mat(t)
	if m == nil {
		return nil
	}
	return m.Row(make([]float32, t.Cols), 0)
}

// scalar reads the 1-element vector t, def when the source lacks it.
func (b *binder) scalar(t arch.Tensor, def float32) float32 {
	if !b.src.has(t.Name) {
		return def
	}
	if v := b.vec(t); v != nil {
		return v[0]
	}
	return def
}

// finish returns the binding's error, or the error for a weight of the
// model left unbound: the model would run without it and compute garbage
// (unboundTensors: blockPrefix and countField name the layers' tensors
// and the config field that counts them).
func (b *binder) finish(blockPrefix, countField string, layers int) error {
	if b.err != nil {
		return b.err
	}
	unread, file := b.src.unread()
	return unboundTensors(file, unread, blockPrefix, countField, layers)
}

// ggufWeights are the weights of a GGUF file.
type ggufWeights struct{ f *gguf.File }

func (s ggufWeights) Path() string              { return s.f.Path() }
func (s ggufWeights) has(name string) bool      { _, ok := s.f.Tensor(name); return ok }
func (s ggufWeights) mappings() []*mmap.Mapping { return []*mmap.Mapping{s.f.Mapping()} }

// shape is GGUF's: innermost dimension first ([Cols, Rows]).
func (s ggufWeights) shape(t arch.Tensor) []int {
	if t.Vector() {
		return []int{t.Cols}
	}
	return []int{t.Cols, t.Rows}
}

func (s ggufWeights) stored(t arch.Tensor) (storedWeight, error) {
	ti, ok := s.f.Tensor(t.Name)
	if !ok {
		return storedWeight{}, fmt.Errorf("cpu: %s: missing tensor %q", s.f.Path(), t.Name)
	}
	data, err := s.f.TensorData(t.Name)
	if err != nil {
		return storedWeight{}, fmt.Errorf("cpu: %w", err)
	}
	return storedWeight{typ: ti.Type, shape: ti.Dims, file: s.f.Path(), data: data}, nil
}

func (s ggufWeights) unread() ([]string, string) {
	var names []string
	for _, t := range s.f.Unread() {
		names = append(names, t.Name)
	}
	return names, s.f.Path()
}

// dirWeights are the weights of a safetensors directory whose model's
// tensor names start with prefix: tensors outside it (a multimodal
// checkpoint's vision and audio towers, a tied lm_head the library
// ignores too) are not the model's, and not ours to judge.
type dirWeights struct {
	d      *safetensors.Dir
	prefix string
}

func (s dirWeights) Path() string              { return s.d.Path() }
func (s dirWeights) has(name string) bool      { _, ok := s.d.Tensor(name); return ok }
func (s dirWeights) mappings() []*mmap.Mapping { return s.d.Mappings() }

func (s dirWeights) shape(t arch.Tensor) []int {
	if t.Vector() {
		return []int{t.Cols}
	}
	return []int{t.Rows, t.Cols}
}

func (s dirWeights) stored(t arch.Tensor) (storedWeight, error) {
	ti, ok := s.d.Tensor(t.Name)
	if !ok {
		return storedWeight{}, fmt.Errorf("cpu: %s: missing tensor %q", s.d.Path(), t.Name)
	}
	var typ gguf.Type
	switch ti.DType {
	case safetensors.F32:
		typ = gguf.F32
	case safetensors.F16:
		typ = gguf.F16
	case safetensors.BF16:
		typ = gguf.BF16
	default:
		return storedWeight{}, fmt.Errorf("cpu: %s: tensor %q has dtype %s (want F32, F16 or BF16)", ti.File, t.Name, ti.DType)
	}
	data, err := s.d.TensorData(t.Name)
	if err != nil {
		return storedWeight{}, fmt.Errorf("cpu: %w", err)
	}
	return storedWeight{typ: typ, shape: ti.Shape, file: ti.File, data: data}, nil
}

func (s dirWeights) unread() ([]string, string) {
	var names []string
	file := s.d.Path()
	for _, t := range s.d.Unread() {
		if strings.HasPrefix(t.Name, s.prefix) {
			if names = append(names, t.Name); len(names) == 1 {
				file = t.File
			}
		}
	}
	return names, file
}
