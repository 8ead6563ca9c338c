package cpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"anechat/engine/model/gguf"
)

// ToF16 converts f to IEEE half precision, rounding to nearest even.
func ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // nan
		return sign | 0x7e00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint(14 - exp)
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, which is the correct rounding
	}
	return sign | uint16(h)
}

// ToBF16 converts f to bfloat16, rounding to nearest even.
func ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// Quantize encodes vals (a whole number of rows of cols elements) as t. It
// is for tests and fixtures: the engine only reads quantised weights.
func Quantize(t gguf.Type, vals []float32, cols int) ([]byte, error) {
	switch t {
	case gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1:
	default:
		return nil, fmt.Errorf("cpu: cannot quantise to %s (test encoder for F32, F16, BF16, Q8_0, Q4_0 and Q4_1; use random blocks for the others)", t)
	}
	if cols%t.BlockSize() != 0 || len(vals)%cols != 0 {
		return nil, fmt.Errorf("cpu: cannot quantise %d values in rows of %d as %s", len(vals), cols, t)
	}
	out := make([]byte, 0, t.RowBytes(len(vals)))
	le := binary.LittleEndian
	switch t {
	case gguf.F32:
		for _, v := range vals {
			out = le.AppendUint32(out, math.Float32bits(v))
		}
	case gguf.F16:
		for _, v := range vals {
			out = le.AppendUint16(out, ToF16(v))
		}
	case gguf.BF16:
		for _, v := range vals {
			out = le.AppendUint16(out, ToBF16(v))
		}
	case gguf.Q8_0:
		for b := 0; b < len(vals); b += 32 {
			blk := vals[b : b+32]
			var amax float32
			for _, v := range blk {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			d := amax / 127
			out = le.AppendUint16(out, ToF16(d))
			for _, v := range blk {
				q := 0.0
				if d != 0 {
					q = math.Round(float64(v / d))
				}
				out = append(out, byte(int8(max(-127, min(127, q)))))
			}
		}
	case gguf.Q4_0:
		for b := 0; b < len(vals); b += 32 {
			blk := vals[b : b+32]
			var amax, mx float32
			for _, v := range blk {
				if a := float32(math.Abs(float64(v))); a > amax {
					amax, mx = a, v
				}
			}
			d := mx / -8
			out = le.AppendUint16(out, ToF16(d))
			q := func(v float32) byte {
				if d == 0 {
					return 8
				}
				return byte(max(0, min(15, math.Round(float64(v/d))+8)))
			}
			for i := range 16 {
				out = append(out, q(blk[i])|q(blk[i+16])<<4)
			}
		}
	case gguf.Q4_1:
		for b := 0; b < len(vals); b += 32 {
			blk := vals[b : b+32]
			lo, hi := blk[0], blk[0]
			for _, v := range blk {
				lo, hi = min(lo, v), max(hi, v)
			}
			d := (hi - lo) / 15
			out = le.AppendUint16(out, ToF16(d))
			out = le.AppendUint16(out, ToF16(lo))
			q := func(v float32) byte {
				if d == 0 {
					return 0
				}
				return byte(max(0, min(15, math.Round(float64((v-lo)/d)))))
			}
			for i := range 16 {
				out = append(out, q(blk[i])|q(blk[i+16])<<4)
			}
		}
	}
	return out, nil
}
