package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// A Writer builds a GGUF v3 file in memory: metadata in the order added, then
// tensors. It exists for tests and fixtures (random-weight models, corrupt
// files); the engine never writes GGUF.
type Writer struct {
	keys    []string
	vals    []any
	tensors []wtensor
	align   int
}

type wtensor struct {
	name string
	typ  Type
	dims []int
	data []byte
}

// NewWriter returns an empty Writer with the default alignment.
func NewWriter() *Writer { return &Writer{align: DefaultAlignment} }

// Set adds a metadata key. v is one of the scalar types Value returns, int
// (written as int32), or a slice of them ([]int is written as int32s).
// Setting general.alignment (uint32) changes the alignment used.
func (w *Writer) Set(key string, v any) {
	if key == "general.alignment" {
		if a, ok := v.(uint32); ok && a > 0 {
			w.align = int(a)
		}
	}
	w.keys = append(w.keys, key)
	w.vals = append(w.vals, v)
}

// AddTensor adds a tensor with dims innermost first and its encoded data.
func (w *Writer) AddTensor(name string, typ Type, dims []int, data []byte) {
	w.tensors = append(w.tensors, wtensor{name, typ, append([]int(nil), dims...), data})
}

// AddF32 adds an F32 tensor.
func (w *Writer) AddF32(name string, dims []int, vals []float32) {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	w.AddTensor(name, F32, dims, b)
}

// Bytes encodes the file.
func (w *Writer) Bytes() ([]byte, error) {
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	str := func(s string) { le(uint64(len(s))); b.WriteString(s) }
	b.WriteString(Magic)
	le(uint32(3))
	le(uint64(len(w.tensors)))
	le(uint64(len(w.keys)))
	for i, k := range w.keys {
		str(k)
		if err := writeValue(&b, w.vals[i], true); err != nil {
			return nil, fmt.Errorf("gguf: writer: key %q: %w", k, err)
		}
	}
	off := 0
	offs := make([]int, len(w.tensors))
	for i, t := range w.tensors {
		str(t.name)
		le(uint32(len(t.dims)))
		for _, d := range t.dims {
			le(uint64(d))
		}
		le(uint32(t.typ))
		offs[i] = off
		le(uint64(off))
		off += (len(t.data) + w.align - 1) / w.align * w.align
	}
	pad := func() {
		for b.Len()%w.align != 0 {
			b.WriteByte(0)
		}
	}
	pad()
	for _, t := range w.tensors {
		b.Write(t.data)
		pad()
	}
	return b.Bytes(), nil
}

// WriteFile encodes the file to path.
func (w *Writer) WriteFile(path string) error {
	data, err := w.Bytes()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func writeValue(b io.Writer, v any, tagged bool) error {
	le := func(x any) { binary.Write(b, binary.LittleEndian, x) }
	tag := func(t ValueType) {
		if tagged {
			le(uint32(t))
		}
	}
	arr := func(t ValueType, n int) { tag(TypeArray); le(uint32(t)); le(uint64(n)) }
	switch x := v.(type) {
	case uint8:
		tag(TypeUint8)
		le(x)
	case int8:
		tag(TypeInt8)
		le(x)
	case uint16:
		tag(TypeUint16)
		le(x)
	case int16:
		tag(TypeInt16)
		le(x)
	case uint32:
		tag(TypeUint32)
		le(x)
	case int32:
		tag(TypeInt32)
		le(x)
	case int:
		tag(TypeInt32)
		le(int32(x))
	case float32:
		tag(TypeFloat32)
		le(x)
	case bool:
		tag(TypeBool)
		le(x)
	case string:
		tag(TypeString)
		le(uint64(len(x)))
		io.WriteString(b, x)
	case uint64:
		tag(TypeUint64)
		le(x)
	case int64:
		tag(TypeInt64)
		le(x)
	case float64:
		tag(TypeFloat64)
		le(x)
	case []string:
		arr(TypeString, len(x))
		for _, s := range x {
			writeValue(b, s, false)
		}
	case []float32:
		arr(TypeFloat32, len(x))
		le(x)
	case []int32:
		arr(TypeInt32, len(x))
		le(x)
	case []int:
		arr(TypeInt32, len(x))
		for _, e := range x {
			le(int32(e))
		}
	case []uint8:
		arr(TypeUint8, len(x))
		le(x)
	case []uint32:
		arr(TypeUint32, len(x))
		le(x)
	case []int64:
		arr(TypeInt64, len(x))
		le(x)
	case []float64:
		arr(TypeFloat64, len(x))
		le(x)
	case []bool:
		arr(TypeBool, len(x))
		le(x)
	default:
		return fmt.Errorf("unsupported value type %T", v)
	}
	return nil
}

// EditFile writes to dst a copy of the GGUF file src with the metadata keys
// of set replaced (a nil value deletes the key; a key src lacks is added at
// the end, in name order) and the tensors named in drop left out. Damaged-
// model tests start from a real model and change one field.
func EditFile(src, dst string, set map[string]any, drop ...string) error {
	f, err := Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	w := NewWriter()
	done := map[string]bool{}
	for _, k := range f.Keys() {
		v, _ := f.Value(k)
		if nv, ok := set[k]; ok {
			done[k] = true
			if nv == nil {
				continue
			}
			v = nv
		}
		w.Set(k, v)
	}
	var added []string
	for k, v := range set {
		if !done[k] && v != nil {
			added = append(added, k)
		}
	}
	sort.Strings(added)
	for _, k := range added {
		w.Set(k, set[k])
	}
	for _, t := range f.Tensors() {
		if slices.Contains(drop, t.Name) {
			continue
		}
		data, err := f.TensorData(t.Name)
		if err != nil {
			return err
		}
		w.AddTensor(t.Name, t.Type, t.Dims, data)
	}
	return w.WriteFile(dst)
}
