package cpu

import "math"

// The canonical scalar arithmetic of the kernels. Go's math.Exp is
// assembly on amd64 (one algorithm, with or without FMA by CPU) and on
// arm64 (another algorithm), and its pure-Go functions such as math.Tanh
// are compiled with fused multiply-adds on arm64 but not on amd64: the same
// call rounds differently by machine. The functions here are written so
// that every architecture computes them with the same roundings (explicit
// math.FMA where a fused step is meant, explicit conversions everywhere
// else), so the activations give the same bits on every CPU; the SIMD
// kernels of each architecture copy these steps exactly. (fma32, the
// exactly rounded float32 multiply-add, is in dotref.go.)

// Constants of exp64: log2(e), ln 2 split into a head (its low bits zero,
// so ef·ln2Hi is exact for the exponents in range) and a tail, and the
// Taylor coefficients 1/k! of e^r for k = 8 down to 1.
const (
	expLog2e = 1.4426950408889634073599246810018920
	expLn2Hi = 0.69314718055966295651160180568695068359375
	expLn2Lo = 0.28235290563031577122588448175013436025525412068e-12
	expOver  = 7.09782712893384e+02 // above: +Inf
	expC8    = 2.4801587301587301587e-5
	expC7    = 1.9841269841269841270e-4
	expC6    = 1.3888888888888888889e-3
	expC5    = 8.3333333333333333333e-3
	expC4    = 4.1666666666666666667e-2
	expC3    = 1.6666666666666666667e-1
	expC2    = 0.5
	expC1    = 1.0
)

// exp64 is e^x, computed exactly as math.Exp computes it on amd64 CPUs
// with FMA (Go's math/exp_amd64.s, the method of Shibata's SLEEF: x =
// e·ln2 + r, r/16 by a Taylor polynomial, then four squarings in the form
// p·(p+2), then the scaling by 2^e), so that the result is one set of bits
// on every machine. TestExp64MatchesAMD64 checks it against math.Exp where
// that is the same algorithm.
func exp64(x float64) float64 {
	bits := math.Float64bits(x)
	switch {
	case bits&^(1<<63) >= 0x7ff0000000000000: // ±Inf or NaN
		if x < 0 {
			return 0 // -Inf
		}
		return x // +Inf, NaN (its own bits)
	case x > expOver:
		return math.Inf(1)
	}
	y := x * expLog2e
	if y < -1<<20 {
		return 0 // 2^e far below the smallest subnormal
	}
	e := int64(math.RoundToEven(y)) // CVTSD2SL: to nearest, ties to even
	ef := float64(e)
	r := math.FMA(-ef, expLn2Hi, x)
	r = math.FMA(-ef, expLn2Lo, r)
	r = float64(r * 0.0625)
	p := math.FMA(expC8, r, expC7)
	p = math.FMA(p, r, expC6)
	p = math.FMA(p, r, expC5)
	p = math.FMA(p, r, expC4)
	p = math.FMA(p, r, expC3)
	p = math.FMA(p, r, expC2)
	p = math.FMA(p, r, expC1)
	r = float64(r * p) // e^(r/16) - 1
	for range 3 {      // (1+q)^2 - 1 = q·(q+2), four times: e^r - 1
		r = float64(r * float64(r+2))
	}
	r = math.FMA(r, float64(r+2), 1)
	// r·2^e: one multiply by a power of two, or two for a subnormal result.
	b := e + 1023
	switch {
	case b >= 0x7ff:
		return math.Inf(1)
	case b > 0:
		return float64(r * math.Float64frombits(uint64(b)<<52))
	case b < -52:
		return 0
	}
	r = float64(r * math.Float64frombits(uint64(b+1022)<<52))
	return float64(r * math.Float64frombits(1<<52))
}

// Coefficients of tanh64's rational approximation on |x| < 0.625.
const (
	tanhP0 = -9.64399179425052238628e-1
	tanhP1 = -9.92877231001918586564e1
	tanhP2 = -1.61468768441708447952e3
	tanhQ0 = 1.12811678491632931402e2
	tanhQ1 = 2.23548839060100448583e3
	tanhQ2 = 4.84406305325125486048e3
	// tanhBig is half of log(2^127): tanh is ±1 in float64 above it.
	tanhBig = 0.5 * 8.8029691931113054295988e+01
)

// tanh64 is tanh x with the steps of Go's pure-Go math.Tanh, each
// operation rounded on its own (as amd64 compiles it), and exp64 for its
// exponential: one set of bits on every machine (TestTanh64MatchesAMD64).
func tanh64(x float64) float64 {
	z := math.Abs(x)
	switch {
	case z > tanhBig:
		if x < 0 {
			return -1
		}
		return 1
	case z >= 0.625:
		s := exp64(float64(2 * z))
		z = 1 - float64(2/float64(s+1))
		if x < 0 {
			z = -z
		}
		return z
	case x == 0:
		return x // ±0
	}
	s := float64(x * x)
	num := float64(float64(float64(float64(tanhP0*s)+tanhP1)*s) + tanhP2)
	den := float64(float64(float64(float64(float64(s+tanhQ0)*s)+tanhQ1)*s) + tanhQ2)
	return x + float64(float64(float64(x*s)*num)/den)
}
