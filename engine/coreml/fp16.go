package coreml

import (
	"math"

	"anechat/engine/model/safetensors"
)

// toHalf converts f to IEEE binary16 bits, rounding to nearest even, as
// numpy's astype(float16) and Core ML's fp16 tensors do: overflow gives
// ±Inf, NaN stays NaN (quiet), values below the smallest subnormal round to
// ±0.
func toHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		return sign | 0x7e00 | uint16(abs>>13)&0x3ff
	case abs >= 0x477ff000: // rounds to (or is) Inf: 65520 and above
		return sign | 0x7c00
	case abs >= 0x38800000: // a normal half: exponent >= -14
		e := abs>>23 - 112 // rebias 127 -> 15
		m := abs & 0x7fffff
		h := e<<10 | m>>13
		rem := m & 0x1fff
		if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
			h++ // a carry into the exponent is the correct rounding
		}
		return sign | uint16(h)
	case abs < 0x33000000: // below half the smallest subnormal (2^-25): ±0
		return sign
	}
	// A subnormal half: value = m * 2^-24 with m < 1024.
	e := int(abs >> 23)          // biased float32 exponent, 102..112
	m := abs&0x7fffff | 0x800000 // 24-bit significand
	shift := uint(126 - e)       // 14..24: m >> shift is the half's significand
	h := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || rem == half && h&1 == 1 {
		h++
	}
	return sign | uint16(h)
}

// fromHalf converts IEEE binary16 bits to float32 exactly.
func fromHalf(h uint16) float32 { return safetensors.HalfToFloat(h) }

// roundHalf rounds f to the nearest fp16 value, as float32 (exact).
func roundHalf(f float32) float32 { return fromHalf(toHalf(f)) }

// toHalf64 converts f to IEEE binary16 bits with one rounding (to nearest
// even), as numpy's astype(float16) does from float64: rounding through
// float32 first could round twice.
func toHalf64(f float64) uint16 {
	b := math.Float64bits(f)
	sign := uint16(b>>48) & 0x8000
	abs := b &^ (1 << 63)
	exp := int(abs >> 52)
	mant := abs & (1<<52 - 1)
	switch {
	case abs > 0x7ff0000000000000: // NaN
		return sign | 0x7e00 | uint16(mant>>42)&0x3ff
	case abs >= 0x40effe0000000000: // 65520 and above round to Inf
		return sign | 0x7c00
	case exp >= 1023-14: // a normal half
		h := uint64(exp-1023+15)<<10 | mant>>42
		rem := mant & (1<<42 - 1)
		if rem > 1<<41 || rem == 1<<41 && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	case exp < 1023-25 || abs == 0x3e60000000000000: // below 2^-25, or exactly it (a tie to 0)
		return sign
	}
	m := mant | 1<<52
	shift := uint(1023 + 52 - 24 - exp) // 43..53
	h := m >> shift
	rem := m & (1<<shift - 1)
	half := uint64(1) << (shift - 1)
	if rem > half || rem == half && h&1 == 1 {
		h++
	}
	return sign | uint16(h)
}

// RoundHalf rounds f to the nearest fp16 value (ties to even), returned as
// float32 (exactly): the converter stores every weight so, and the
// reference executor rounds a checkpoint's weights the same way.
func RoundHalf(f float32) float32 { return roundHalf(f) }

// ToHalf is f as IEEE binary16 bits, rounded to nearest even (numpy's
// astype(float16), Core ML's fp16 tensors): what a host writes into an
// fp16 input.
func ToHalf(f float32) uint16 { return toHalf(f) }
