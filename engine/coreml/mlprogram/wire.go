package mlprogram

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Bounds on what a model.mlmodel may make the reader do. A real chunk of
// Gemma 4 E2B has a few thousand operations per function (CoreML-LLM's
// largest working chunk: 1,847 with its constants); these are two orders
// of magnitude above that and keep a hostile file from making the reader
// allocate much more than the file's own size or recurse without end.
const (
	// MaxModelBytes is the largest model.mlmodel read (weights live in
	// weight.bin, not in the program: the converter's are well under 1 MiB
	// per thousand ops).
	MaxModelBytes = 64 << 20
	maxDepth      = 32      // nested blocks and values
	maxOps        = 1 << 18 // operations in the whole program
	// maxValues bounds every other thing the reader allocates: functions,
	// blocks, parameters, named values, bindings, literals, features.
	maxValues = 1 << 20
	maxRank   = 64      // dimensions of one tensor type
	maxInts   = 64      // elements of an integer literal kept (axes, shapes)
	maxDim    = 1 << 48 // one dimension's size
)

// ErrFormat is wrapped by every error about a model.mlmodel that is not a
// readable ML program: damaged, truncated, of another model type, or past
// the reader's bounds.
var ErrFormat = errors.New("not a readable Core ML ML program")

// field is one field of a protobuf message: its number and wire type, and
// its value (v for varint and fixed-width fields, b for length-delimited
// ones).
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64
	b   []byte
}

// fields calls fn on each field of the encoded message m, in order. Groups
// (deprecated, never written by coremltools) are skipped like unknown
// fields.
func fields(m []byte, fn func(f field) error) error {
	for len(m) > 0 {
		num, typ, n := protowire.ConsumeTag(m)
		if n < 0 {
			return fmt.Errorf("%w: bad field tag: %w", ErrFormat, protowire.ParseError(n))
		}
		m = m[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(m)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(m)
			f.v = uint64(v)
		case protowire.Fixed64Type:
			f.v, n = protowire.ConsumeFixed64(m)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(m)
		default:
			n = protowire.ConsumeFieldValue(num, typ, m)
			if n >= 0 {
				m = m[n:]
				continue
			}
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %w", ErrFormat, num, protowire.ParseError(n))
		}
		m = m[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// wantBytes checks that f is length-delimited (a message, string or
// packed array).
func (f field) wantBytes(what string) error {
	if f.typ != protowire.BytesType {
		return fmt.Errorf("%w: %s (field %d) has wire type %d, not a message", ErrFormat, what, f.num, f.typ)
	}
	return nil
}

// wantVarint checks that f is a varint.
func (f field) wantVarint(what string) error {
	if f.typ != protowire.VarintType {
		return fmt.Errorf("%w: %s (field %d) has wire type %d, not a varint", ErrFormat, what, f.num, f.typ)
	}
	return nil
}

// int64s appends the integers of a repeated int32/int64/uint64 field,
// packed or not, to dst, keeping at most limit of them; n counts them all.
func (f field) int64s(dst []int64, limit int, n *int) ([]int64, error) {
	switch f.typ {
	case protowire.VarintType:
		*n++
		if len(dst) < limit {
			dst = append(dst, int64(f.v))
		}
		return dst, nil
	case protowire.BytesType:
		b := f.b
		for len(b) > 0 {
			v, k := protowire.ConsumeVarint(b)
			if k < 0 {
				return dst, fmt.Errorf("%w: packed integers (field %d): %w", ErrFormat, f.num, protowire.ParseError(k))
			}
			b = b[k:]
			*n++
			if len(dst) < limit {
				dst = append(dst, int64(v))
			}
		}
		return dst, nil
	}
	return dst, fmt.Errorf("%w: integers (field %d) have wire type %d", ErrFormat, f.num, f.typ)
}

// mapEntry decodes a protobuf map entry (key = 1 string, value = 2
// message) into its key and the encoded value.
func mapEntry(b []byte, what string) (key string, val []byte, err error) {
	err = fields(b, func(f field) error {
		switch f.num {
		case 1:
			if err := f.wantBytes(what + " key"); err != nil {
				return err
			}
			key = string(f.b)
		case 2:
			if err := f.wantBytes(what + " value"); err != nil {
				return err
			}
			val = f.b
		}
		return nil
	})
	return key, val, err
}

// int32Of converts a varint holding an int32 or enum value.
func int32Of(v uint64) int32 {
	return int32(int64(v)) // negative enums and int32s are sign-extended varints
}

// dimOf converts a dimension's size, refusing sizes past maxDim.
func dimOf(v uint64) (int64, error) {
	if v > maxDim || v > math.MaxInt64 {
		return 0, fmt.Errorf("%w: dimension size %d is past the reader's bound %d", ErrFormat, v, int64(maxDim))
	}
	return int64(v), nil
}
