// Package gguf reads GGUF v3 model files (the llama.cpp format): metadata of
// every type, tensor infos with bounds checks, and the tensor bytes themselves,
// memory-mapped rather than copied into the heap.
//
// The parser trusts nothing in the file: every length, count, dimension and
// offset is checked against the file size before it is used, so a truncated or
// corrupt file gives an error naming the file and the key or tensor, never a
// panic or an out-of-bounds read (FuzzParse exercises this).
package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"

	"anechat/engine/model/mmap"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
const MaxDims = 4

// ErrFormat marks a file that is not a well-formed GGUF v2/v3 file.
var ErrFormat = errors.New("gguf: malformed file")

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types, as numbered by the GGUF specification.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

// TensorInfo describes one tensor of the file.
type TensorInfo struct {
	// Name is the tensor's name, e.g. "blk.0.attn_q.weight".
	Name string
	// Type is the element (or block-quantisation) type.
	Type Type
	// Dims are the dimensions, innermost first (GGML's ne): a matrix of
	// Dims [in, out] has out rows of in elements each.
	Dims []int
	// Offset is the byte offset of the data from the start of the file.
	Offset int64
	// Size is the number of bytes of data.
	Size int64
}

// Elements is the number of elements of the tensor.
func (t TensorInfo) Elements() int {
	n := 1
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is an open GGUF file. Its metadata and tensor infos are parsed at Open;
// tensor data stays in the mapping until Close.
type File struct {
	path      string
	data      []byte        // the whole file (mapped or read)
	mapping   *mmap.Mapping // nil when parsed from bytes
	version   uint32
	keys      []string
	meta      map[string]any
	tensors   []TensorInfo
	byName    map[string]int
	read      []atomic.Bool // per tensor: TensorData was called (Unread)
	alignment int
	dataStart int64
}

// Open memory-maps the GGUF file at path and parses its header. On systems
// without mmap support the file is read into memory instead. A file
// truncated while it is parsed gives an error wrapping mmap.ErrChanged.
func Open(path string) (*File, error) {
	m, err := mmap.Map(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: open %s: %w", path, err)
	}
	f, err := parseMapped(m)
	if err != nil {
		m.Close()
		return nil, err
	}
	f.mapping = m
	return f, nil
}

func parseMapped(m *mmap.Mapping) (f *File, err error) {
	defer mmap.Guard(&err, m)()
	return Parse(m.Path(), m.Data())
}

// Parse parses a GGUF file held in data; name is used in error messages and
// returned by Path. The File aliases data.
func Parse(name string, data []byte) (*File, error) {
	f := &File{path: name, data: data, meta: map[string]any{}, byName: map[string]int{}}
	if err := f.parse(); err != nil {
		return nil, err
	}
	return f, nil
}

// Close releases the mapping. Slices returned by TensorData must not be used
// afterwards.
func (f *File) Close() error {
	if f.mapping == nil {
		return nil
	}
	m := f.mapping
	f.mapping, f.data = nil, nil
	if err := m.Close(); err != nil {
		return fmt.Errorf("gguf: close %s: %w", f.path, err)
	}
	return nil
}

// Mapping is the memory mapping the tensor data lives in, for callers that
// guard their reads of it against a file changed on disk (mmap.Guard) or
// check it before use (Mapping.Check). It is nil for a File made by Parse.
func (f *File) Mapping() *mmap.Mapping { return f.mapping }

// Path is the file's path (or the name given to Parse).
func (f *File) Path() string { return f.path }

// Version is the GGUF format version (2 or 3).
func (f *File) Version() uint32 { return f.version }

// Size is the file's size in bytes.
func (f *File) Size() int64 { return int64(len(f.data)) }

// Alignment is the tensor data alignment in bytes.
func (f *File) Alignment() int { return f.alignment }

// DataOffset is the offset of the tensor data section from the start of the file.
func (f *File) DataOffset() int64 { return f.dataStart }

// Keys lists the metadata keys in file order.
func (f *File) Keys() []string { return append([]string(nil), f.keys...) }

// Header returns the bytes of the file before the tensor data (magic,
// metadata and tensor infos); fingerprints hash it.
func (f *File) Header() []byte { return f.data[:f.dataStart:f.dataStart] }

// Value returns the raw metadata value of key. Scalars are uint8, int8,
// uint16, int16, uint32, int32, float32, bool, string, uint64, int64 or
// float64; arrays are []T of those types, or []any for arrays of arrays.
func (f *File) Value(key string) (any, bool) {
	v, ok := f.meta[key]
	return v, ok
}

// Tensors lists the tensor infos in file order.
func (f *File) Tensors() []TensorInfo { return append([]TensorInfo(nil), f.tensors...) }

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i], true
}

// TensorData returns the bytes of the named tensor. The slice aliases the
// mapping (read-only on systems with mmap): do not write to it, and do not use
// it after Close.
func (f *File) TensorData(name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: %s: no tensor %q", f.path, name)
	}
	if f.data == nil {
		return nil, fmt.Errorf("gguf: %s: tensor %q: file is closed", f.path, name)
	}
	f.read[f.byName[name]].Store(true)
	end := t.Offset + t.Size
	return f.data[t.Offset:end:end], nil
}

// Unread lists, in file order, the tensors whose data no caller has asked
// for (TensorData) since the file was opened. A loader that binds every
// weight it uses calls it last and rejects the file when a tensor is left:
// a tensor nobody binds is one the model would silently ignore (blocks past
// block_count, biases or extra weights of another architecture), and it
// would compute garbage.
func (f *File) Unread() []TensorInfo {
	var out []TensorInfo
	for i, t := range f.tensors {
		if !f.read[i].Load() {
			out = append(out, t)
		}
	}
	return out
}

// reader is a bounds-checked little-endian cursor over the header.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) need(n uint64) bool {
	if r.err != nil {
		return false
	}
	if n > uint64(len(r.b)-r.off) {
		r.err = fmt.Errorf("%w: truncated at byte %d (need %d more bytes, file has %d)", ErrFormat, r.off, n, len(r.b)-r.off)
		return false
	}
	return true
}

func (r *reader) bytes(n uint64) []byte {
	if !r.need(n) {
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *reader) u8() uint8 {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) str() string {
	n := r.u64()
	return string(r.bytes(n))
}

// remaining is the number of unread bytes: an upper bound on any count of
// items that take at least one byte each.
func (r *reader) remaining() uint64 { return uint64(len(r.b) - r.off) }

func (f *File) parse() error {
	r := &reader{b: f.data}
	if m := r.bytes(4); r.err != nil || string(m) != Magic {
		return fmt.Errorf("gguf: %s: not a GGUF file (bad magic): %w", f.path, ErrFormat)
	}
	f.version = r.u32()
	if r.err == nil && f.version != 2 && f.version != 3 {
		return fmt.Errorf("gguf: %s: unsupported GGUF version %d (want 3): %w", f.path, f.version, ErrFormat)
	}
	nTensors := r.u64()
	nKV := r.u64()
	if r.err != nil {
		return fmt.Errorf("gguf: %s: header: %w", f.path, r.err)
	}
	// Each key/value takes at least 8+4 bytes, each tensor info at least 8+4+8+4+8.
	if nKV > r.remaining()/12 {
		return fmt.Errorf("gguf: %s: metadata count %d does not fit in the file: %w", f.path, nKV, ErrFormat)
	}
	if nTensors > r.remaining()/32 {
		return fmt.Errorf("gguf: %s: tensor count %d does not fit in the file: %w", f.path, nTensors, ErrFormat)
	}
	for i := uint64(0); i < nKV; i++ {
		key := r.str()
		if r.err != nil {
			return fmt.Errorf("gguf: %s: metadata key %d: %w", f.path, i, r.err)
		}
		t := ValueType(r.u32())
		v := f.value(r, t, 0)
		if r.err != nil {
			return fmt.Errorf("gguf: %s: metadata %q: %w", f.path, key, r.err)
		}
		if _, dup := f.meta[key]; dup {
			return fmt.Errorf("gguf: %s: metadata key %q appears twice: %w", f.path, key, ErrFormat)
		}
		f.meta[key] = v
		f.keys = append(f.keys, key)
	}
	f.alignment = DefaultAlignment
	if v, ok := f.meta["general.alignment"]; ok {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return fmt.Errorf("gguf: %s: general.alignment %v must be a uint32 power of two: %w", f.path, v, ErrFormat)
		}
		f.alignment = int(a)
	}
	rel := make([]uint64, 0, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		name := r.str()
		if r.err != nil {
			return fmt.Errorf("gguf: %s: tensor info %d: %w", f.path, i, r.err)
		}
		nd := r.u32()
		if r.err == nil && (nd == 0 || nd > MaxDims) {
			return fmt.Errorf("gguf: %s: tensor %q: %d dimensions, want 1..%d: %w", f.path, name, nd, MaxDims, ErrFormat)
		}
		dims := make([]int, 0, nd)
		elems := uint64(1)
		for j := uint32(0); j < nd && r.err == nil; j++ {
			d := r.u64()
			if r.err != nil {
				break
			}
			hi, lo := bits.Mul64(elems, d)
			if d == 0 || hi != 0 || lo > 1<<56 {
				return fmt.Errorf("gguf: %s: tensor %q: dimension %d = %d is zero or too large: %w", f.path, name, j, d, ErrFormat)
			}
			elems = lo
			dims = append(dims, int(d))
		}
		typ := Type(r.u32())
		off := r.u64()
		if r.err != nil {
			return fmt.Errorf("gguf: %s: tensor %q: %w", f.path, name, r.err)
		}
		if _, dup := f.byName[name]; dup {
			return fmt.Errorf("gguf: %s: tensor %q appears twice: %w", f.path, name, ErrFormat)
		}
		bs, ts, ok := typ.blockLayout()
		if !ok {
			return fmt.Errorf("gguf: %s: tensor %q: unknown tensor type %d: %w", f.path, name, uint32(typ), ErrFormat)
		}
		if dims[0]%bs != 0 {
			return fmt.Errorf("gguf: %s: tensor %q: row length %d is not a multiple of the %s block size %d: %w", f.path, name, dims[0], typ, bs, ErrFormat)
		}
		if off%uint64(f.alignment) != 0 {
			return fmt.Errorf("gguf: %s: tensor %q: data offset %d is not aligned to %d: %w", f.path, name, off, f.alignment, ErrFormat)
		}
		f.byName[name] = len(f.tensors)
		f.tensors = append(f.tensors, TensorInfo{Name: name, Type: typ, Dims: dims, Size: int64(elems / uint64(bs) * uint64(ts))})
		rel = append(rel, off)
	}
	a := uint64(f.alignment)
	start := (uint64(r.off) + a - 1) / a * a
	if start > uint64(len(f.data)) {
		if len(f.tensors) > 0 {
			return fmt.Errorf("gguf: %s: tensor data section starts at %d, past the end of the file (%d bytes): %w", f.path, start, len(f.data), ErrFormat)
		}
		start = uint64(r.off)
	}
	f.dataStart = int64(start)
	avail := uint64(len(f.data)) - start
	for i := range f.tensors {
		t := &f.tensors[i]
		if rel[i] > avail || uint64(t.Size) > avail-rel[i] {
			return fmt.Errorf("gguf: %s: tensor %q: data %d..%d lies outside the data section (%d bytes; file truncated?): %w",
				f.path, t.Name, rel[i], rel[i]+uint64(t.Size), avail, ErrFormat)
		}
		t.Offset = int64(start + rel[i])
	}
	f.read = make([]atomic.Bool, len(f.tensors))
	return nil
}

// maxNesting bounds arrays of arrays, so a crafted file cannot recurse deeply.
const maxNesting = 4

func (f *File) value(r *reader, t ValueType, depth int) any {
	switch t {
	case TypeUint8:
		return r.u8()
	case TypeInt8:
		return int8(r.u8())
	case TypeUint16:
		return r.u16()
	case TypeInt16:
		return int16(r.u16())
	case TypeUint32:
		return r.u32()
	case TypeInt32:
		return int32(r.u32())
	case TypeFloat32:
		return math.Float32frombits(r.u32())
	case TypeBool:
		b := r.u8()
		if r.err == nil && b > 1 {
			r.err = fmt.Errorf("%w: bool value %d", ErrFormat, b)
		}
		return b == 1
	case TypeString:
		return r.str()
	case TypeUint64:
		return r.u64()
	case TypeInt64:
		return int64(r.u64())
	case TypeFloat64:
		return math.Float64frombits(r.u64())
	case TypeArray:
		if depth >= maxNesting {
			r.err = fmt.Errorf("%w: arrays nested deeper than %d", ErrFormat, maxNesting)
			return nil
		}
		et := ValueType(r.u32())
		n := r.u64()
		if r.err != nil {
			return nil
		}
		if size := et.size(); size > 0 && n > r.remaining()/uint64(size) || n > r.remaining() {
			r.err = fmt.Errorf("%w: array of %d values does not fit in the file", ErrFormat, n)
			return nil
		}
		return f.array(r, et, int(n), depth)
	default:
		if r.err == nil {
			r.err = fmt.Errorf("%w: unknown value type %d", ErrFormat, uint32(t))
		}
		return nil
	}
}

// size is the encoded size of a fixed-size value type, 0 for strings and arrays.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	case TypeString:
		return 8 // at least the length
	case TypeArray:
		return 12 // at least the type and length
	}
	return 0
}

func arrayOf[T any](r *reader, n int, read func() T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = read()
		if r.err != nil {
			return nil
		}
	}
	return out
}

func (f *File) array(r *reader, et ValueType, n, depth int) any {
	switch et {
	case TypeUint8:
		return append([]uint8(nil), r.bytes(uint64(n))...)
	case TypeInt8:
		return arrayOf(r, n, func() int8 { return int8(r.u8()) })
	case TypeUint16:
		return arrayOf(r, n, r.u16)
	case TypeInt16:
		return arrayOf(r, n, func() int16 { return int16(r.u16()) })
	case TypeUint32:
		return arrayOf(r, n, r.u32)
	case TypeInt32:
		return arrayOf(r, n, func() int32 { return int32(r.u32()) })
	case TypeFloat32:
		return arrayOf(r, n, func() float32 { return math.Float32frombits(r.u32()) })
	case TypeBool:
		return arrayOf(r, n, func() bool { return f.value(r, TypeBool, depth).(bool) })
	case TypeString:
		return arrayOf(r, n, r.str)
	case TypeUint64:
		return arrayOf(r, n, r.u64)
	case TypeInt64:
		return arrayOf(r, n, func() int64 { return int64(r.u64()) })
	case TypeFloat64:
		return arrayOf(r, n, func() float64 { return math.Float64frombits(r.u64()) })
	case TypeArray:
		return arrayOf(r, n, func() any { return f.value(r, TypeArray, depth+1) })
	}
	r.err = fmt.Errorf("%w: array of unknown value type %d", ErrFormat, uint32(et))
	return nil
}
