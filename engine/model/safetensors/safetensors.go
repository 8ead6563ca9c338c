// Package safetensors reads Hugging Face model directories: config.json plus
// one or more *.safetensors weight files, memory-mapped, every header field
// bounds-checked. Tensors are exposed as raw bytes aliasing the mapping (the
// CPU kernels compute on F32/F16/BF16 in place) or converted to float32.
//
// A .safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON mapping each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the byte after the header) plus an
// optional "__metadata__" object of strings, then the data.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync/atomic"
	"unsafe"

	"anechat/engine/model/mmap"
)

// DType is a safetensors element type, spelled as in the header ("F32").
type DType string

// The element types the format defines. Only F32, F16 and BF16 convert to
// float32 (Float32s); the others can be listed and read as raw bytes.
const (
	F64    DType = "F64"
	F32    DType = "F32"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I64    DType = "I64"
	I32    DType = "I32"
	I16    DType = "I16"
	I8     DType = "I8"
	U64    DType = "U64"
	U32    DType = "U32"
	U16    DType = "U16"
	U8     DType = "U8"
	Bool   DType = "BOOL"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
)

// Size is the width of one element in bytes, or 0 for a type the package
// does not know.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case F32, I32, U32:
		return 4
	case F16, BF16, I16, U16:
		return 2
	case I8, U8, Bool, F8E4M3, F8E5M2:
		return 1
	}
	return 0
}

// Float reports whether Float32s converts d (F32, F16, BF16).
func (d DType) Float() bool { return d == F32 || d == F16 || d == BF16 }

// Limits on what a header may declare; real checkpoints are far below them.
const (
	// MaxHeader is the largest JSON header accepted (the reference
	// implementation's limit).
	MaxHeader = 100 << 20
	// MaxDims is the most dimensions a tensor may have.
	MaxDims = 16
)

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	// Name is the tensor's key in the header.
	Name string
	// DType is its element type.
	DType DType
	// Shape lists its dimensions, outermost first (row-major); empty for a
	// scalar.
	Shape []int
	// File is the path of the file that holds it.
	File string
	// Offset and Size locate its bytes in File (Offset from the start of
	// the file).
	Offset, Size int64
}

// Elements is the number of elements (1 for a scalar).
func (t TensorInfo) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is one parsed .safetensors file. Its tensors alias data.
type File struct {
	path     string
	data     []byte
	start    int64 // first byte of the data section
	tensors  []TensorInfo
	byName   map[string]int
	read     []atomic.Bool // per tensor: TensorData was called (Unread)
	metadata map[string]string
	mapping  *mmap.Mapping // nil when parsed from bytes
}

// Parse parses a whole .safetensors file held in data; name is used in
// errors and as TensorInfo.File. The tensors alias data. Nothing in data can
// make it panic or read out of bounds: every error names the file and,
// where there is one, the tensor.
func Parse(name string, data []byte) (*File, error) {
	f := &File{path: name, data: data}
	if err := f.parse(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) errorf(format string, args ...any) error {
	return fmt.Errorf("safetensors: %s: %s", f.path, fmt.Sprintf(format, args...))
}

// header is the JSON form of one tensor entry.
type header struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

func (f *File) parse() error {
	if len(f.data) < 8 {
		return f.errorf("file of %d bytes is too short for the 8-byte header length (truncated?)", len(f.data))
	}
	n := binary.LittleEndian.Uint64(f.data)
	if n > MaxHeader {
		return f.errorf("header length %d exceeds the %d-byte limit (corrupt file?)", n, MaxHeader)
	}
	if n > uint64(len(f.data)-8) {
		return f.errorf("header length %d runs past the end of the %d-byte file (truncated?)", n, len(f.data))
	}
	hdr := f.data[8 : 8+n]
	f.start = 8 + int64(n)
	dataLen := int64(len(f.data)) - f.start
	// The header is one JSON object; it may be padded with trailing spaces.
	hdr = bytes.TrimRight(hdr, " \x00")
	if len(hdr) == 0 || hdr[0] != '{' {
		return f.errorf("header is not a JSON object")
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if err := dec.Decode(&raw); err != nil {
		return f.errorf("header is not valid JSON: %v", err)
	}
	if dec.More() {
		return f.errorf("header has data after its JSON object")
	}
	f.byName = make(map[string]int, len(raw))
	for key, msg := range raw {
		if key == "__metadata__" {
			if err := json.Unmarshal(msg, &f.metadata); err != nil {
				return f.errorf("__metadata__ is not an object of strings: %v", err)
			}
			continue
		}
		var h header
		if err := json.Unmarshal(msg, &h); err != nil {
			return f.errorf("tensor %q: malformed entry: %v", key, err)
		}
		if h.DType == nil || h.Shape == nil || h.DataOffsets == nil {
			return f.errorf("tensor %q: entry needs dtype, shape and data_offsets", key)
		}
		t := TensorInfo{Name: key, DType: DType(*h.DType), File: f.path}
		es := t.DType.Size()
		if es == 0 {
			return f.errorf("tensor %q: unknown dtype %q", key, *h.DType)
		}
		if len(*h.Shape) > MaxDims {
			return f.errorf("tensor %q: %d dimensions, at most %d supported", key, len(*h.Shape), MaxDims)
		}
		elems := int64(1)
		t.Shape = make([]int, len(*h.Shape))
		for i, d := range *h.Shape {
			if d < 0 {
				return f.errorf("tensor %q: negative dimension %d in shape %v", key, d, *h.Shape)
			}
			if d > 0 && elems > dataLen/d {
				return f.errorf("tensor %q: shape %v needs more bytes than the file's %d bytes of data", key, *h.Shape, dataLen)
			}
			elems *= d
			t.Shape[i] = int(d)
		}
		offs := *h.DataOffsets
		if len(offs) != 2 {
			return f.errorf("tensor %q: data_offsets %v must be [begin, end]", key, offs)
		}
		begin, end := offs[0], offs[1]
		if begin < 0 || end < begin {
			return f.errorf("tensor %q: data_offsets %v are not an increasing pair", key, offs)
		}
		if end > dataLen {
			return f.errorf("tensor %q: data_offsets %v run past the %d bytes of data (truncated?)", key, offs, dataLen)
		}
		if want := elems * int64(es); end-begin != want {
			return f.errorf("tensor %q: %d bytes of data, want %d for shape %v of %s", key, end-begin, want, t.Shape, t.DType)
		}
		t.Offset, t.Size = f.start+begin, end-begin
		f.byName[key] = len(f.tensors)
		f.tensors = append(f.tensors, t)
	}
	// Name order for a stable listing; then no two tensors may share bytes.
	sort.Slice(f.tensors, func(i, j int) bool { return f.tensors[i].Name < f.tensors[j].Name })
	for i, t := range f.tensors {
		f.byName[t.Name] = i
	}
	byOff := append([]TensorInfo(nil), f.tensors...)
	sort.Slice(byOff, func(i, j int) bool { return byOff[i].Offset < byOff[j].Offset })
	var last TensorInfo // the tensor reaching furthest so far
	for _, t := range byOff {
		if t.Size == 0 {
			continue
		}
		if last.Size > 0 && last.Offset+last.Size > t.Offset {
			return f.errorf("tensors %q and %q overlap", last.Name, t.Name)
		}
		last = t
	}
	f.read = make([]atomic.Bool, len(f.tensors))
	return nil
}

// Unread lists, in name order, the tensors whose data no caller has asked
// for (TensorData, Float32s) since the file was opened; see Dir.Unread.
func (f *File) Unread() []TensorInfo {
	var out []TensorInfo
	for i, t := range f.tensors {
		if !f.read[i].Load() {
			out = append(out, t)
		}
	}
	return out
}

// Path is the file's path (or the name given to Parse).
func (f *File) Path() string { return f.path }

// Metadata returns the header's __metadata__ strings (nil if none).
func (f *File) Metadata() map[string]string { return f.metadata }

// Tensors lists the file's tensors in name order.
func (f *File) Tensors() []TensorInfo { return append([]TensorInfo(nil), f.tensors...) }

// Tensor returns the description of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.tensors[i], true
}

// TensorData returns the raw little-endian bytes of the named tensor,
// aliasing the file's mapping (valid until Close).
func (f *File) TensorData(name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, f.errorf("no tensor %q", name)
	}
	if f.data == nil {
		return nil, f.errorf("tensor %q: file is closed", name)
	}
	f.read[f.byName[name]].Store(true)
	return f.data[t.Offset : t.Offset+t.Size : t.Offset+t.Size], nil
}

// Close unmaps the file. Data returned by TensorData is invalid afterwards.
func (f *File) Close() error {
	if f.mapping == nil {
		return nil
	}
	err := f.mapping.Close()
	f.mapping, f.data = nil, nil
	return err
}

// Float32s converts the tensor described by t, whose bytes are data, to
// float32. It fails for types other than F32, F16 and BF16.
func Float32s(t TensorInfo, data []byte) ([]float32, error) {
	n := t.Elements()
	if len(data) != n*t.DType.Size() {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %d bytes, want %d", t.File, t.Name, len(data), n*t.DType.Size())
	}
	out := make([]float32, n)
	switch t.DType {
	case F32:
		if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%4 == 0 && n > 0 {
			copy(out, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(data))), n))
		} else {
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
			}
		}
	case F16:
		for i := range out {
			out[i] = HalfToFloat(binary.LittleEndian.Uint16(data[2*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[2*i:])) << 16)
		}
	default:
		return nil, fmt.Errorf("safetensors: %s: tensor %q: dtype %s does not convert to float32 (want F32, F16 or BF16)", t.File, t.Name, t.DType)
	}
	return out, nil
}

// HalfToFloat converts IEEE 754 half-precision bits to float32 exactly
// (subnormals, infinities and NaNs included).
func HalfToFloat(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// ErrMissing is wrapped by the errors for a tensor a directory does not have.
var ErrMissing = errors.New("tensor not found")
