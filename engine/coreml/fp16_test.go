package coreml

import (
	"math"
	"math/big"
	"testing"
)

// TestHalfRoundTrip: every fp16 value converts to float32 and back to the
// same bits (NaNs stay NaN).
func TestHalfRoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		f := fromHalf(uint16(h))
		got := toHalf(f)
		if math.IsNaN(float64(f)) {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x -> %#04x, not a NaN", h, got)
			}
			continue
		}
		if got != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, got)
		}
	}
}

// TestHalfRounding checks toHalf against exact rounding (big.Float, round
// to nearest even at 11 significant bits, with fp16's range) on every
// float32 whose low 13 bits take the values that decide the rounding, over
// the whole exponent range.
func TestHalfRounding(t *testing.T) {
	lows := []uint32{0, 1, 0xfff, 0x1000, 0x1001, 0x1fff}
	for exp := uint32(0); exp < 0xff; exp++ {
		for hi := uint32(0); hi < 1<<10; hi += 37 {
			for _, lo := range lows {
				for _, sign := range []uint32{0, 1 << 31} {
					b := sign | exp<<23 | hi<<13 | lo
					f := math.Float32frombits(b)
					if got, want := toHalf(f), exactHalf(f); got != want {
						t.Fatalf("toHalf(%g = %#08x) = %#04x, want %#04x", f, b, got, want)
					}
				}
			}
		}
	}
}

// exactHalf rounds f to binary16 with big.Float arithmetic.
func exactHalf(f float32) uint16 {
	if math.IsInf(float64(f), 0) {
		if f > 0 {
			return 0x7c00
		}
		return 0xfc00
	}
	sign := uint16(0)
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	a := math.Abs(float64(f))
	// Subnormal halves are multiples of 2^-24: round a/2^-24 to an integer
	// when a is below 2^-14; otherwise round to 11 significant bits.
	if a < math.Ldexp(1, -14) {
		x := new(big.Float).SetFloat64(math.Ldexp(a, 24))
		i, acc := x.Int(nil)
		frac := new(big.Float).Sub(x, new(big.Float).SetInt(i))
		c := frac.Cmp(big.NewFloat(0.5))
		if c > 0 || c == 0 && i.Bit(0) == 1 {
			i.Add(i, big.NewInt(1))
		}
		_ = acc
		return sign | uint16(i.Int64()) // 1024 is the smallest normal: correct bits
	}
	r := new(big.Float).SetPrec(11).SetMode(big.ToNearestEven).SetFloat64(a)
	v, _ := r.Float64()
	if v >= 65520 || v > 65504 {
		return sign | 0x7c00
	}
	e := math.Ilogb(v)
	m := uint16(math.Ldexp(v, 10-e)) & 0x3ff
	return sign | uint16(e+15)<<10 | m
}

// TestHalf64Rounding checks toHalf64 against exact rounding, including
// values where rounding through float32 first would round twice.
func TestHalf64Rounding(t *testing.T) {
	lows := []uint64{0, 1, 1<<29 - 1, 1 << 29, 1<<29 + 1, 1<<41 - 1, 1 << 41, 1<<41 + 1, 1<<42 - 1}
	for exp := uint64(1023 - 30); exp < 1023+17; exp++ {
		for hi := uint64(0); hi < 1<<10; hi += 29 {
			for _, lo := range lows {
				for _, sign := range []uint64{0, 1 << 63} {
					b := sign | exp<<52 | hi<<42 | lo
					f := math.Float64frombits(b)
					if got, want := toHalf64(f), exactHalf64(f); got != want {
						t.Fatalf("toHalf64(%g = %#016x) = %#04x, want %#04x", f, b, got, want)
					}
				}
			}
		}
	}
	for _, f := range []float64{0, math.Inf(1), math.Inf(-1), 65504, 65519.99, 65520, 1e10, math.Ldexp(1, -25), math.Ldexp(1.0000001, -25)} {
		if got, want := toHalf64(f), exactHalf64(f); got != want {
			t.Errorf("toHalf64(%g) = %#04x, want %#04x", f, got, want)
		}
	}
	if h := toHalf64(math.NaN()); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("toHalf64(NaN) = %#04x", h)
	}
}

// exactHalf64 is exactHalf for a float64.
func exactHalf64(f float64) uint16 {
	if math.IsInf(f, 0) {
		if f > 0 {
			return 0x7c00
		}
		return 0xfc00
	}
	sign := uint16(0)
	if math.Signbit(f) {
		sign = 0x8000
	}
	a := math.Abs(f)
	if a < math.Ldexp(1, -14) {
		x := new(big.Float).SetFloat64(math.Ldexp(a, 24))
		i, _ := x.Int(nil)
		frac := new(big.Float).Sub(x, new(big.Float).SetInt(i))
		c := frac.Cmp(big.NewFloat(0.5))
		if c > 0 || c == 0 && i.Bit(0) == 1 {
			i.Add(i, big.NewInt(1))
		}
		return sign | uint16(i.Int64())
	}
	r := new(big.Float).SetPrec(11).SetMode(big.ToNearestEven).SetFloat64(a)
	v, _ := r.Float64()
	if v > 65504 {
		return sign | 0x7c00
	}
	e := math.Ilogb(v)
	m := uint16(math.Ldexp(v, 10-e)) & 0x3ff
	return sign | uint16(e+15)<<10 | m
}
