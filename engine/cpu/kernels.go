package cpu

import (
	"math"

	"anechat/engine/model/safetensors"
	"anechat/engine/sample"
)

// Dot returns Σ a[i]·b[i] over len(a) elements (b must be at least as long).
// It accumulates in eight lanes, lane j taking the elements i ≡ j (mod 8),
// then sums the lanes in a fixed tree: the order depends only on len(a), so a
// given row always gives the same bits.
//
// On amd64 with AVX2 and on arm64 the first len(a)-len(a)%32 elements go
// through an FMA kernel (32 lanes, lane j taking the elements i ≡ j mod
// 32, one fused multiply-add each, summed in a fixed tree: dotCanon in the
// tests) and the rest through the loop below; the split depends only on
// len(a) as well, and both architectures give the same bits.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	s, done := dotSIMD(a, b)
	if done == len(a) {
		return s
	}
	if done == 0 {
		return dotGo(a, b)
	}
	return s + dotGo(a[done:], b[done:])
}

// Dot3 returns Dot(w, x0), Dot(w, x1), Dot(w, x2), bit for bit, reading w
// once (three tokens against one weight row).
func Dot3(w, x0, x1, x2 []float32) [3]float32 {
	n := len(w)
	s, done := dot3SIMD(w, x0[:n], x1[:n], x2[:n])
	if done == n {
		return s
	}
	if done == 0 {
		return [3]float32{dotGo(w, x0), dotGo(w, x1), dotGo(w, x2)}
	}
	return [3]float32{s[0] + dotGo(w[done:], x0[done:]), s[1] + dotGo(w[done:], x1[done:]), s[2] + dotGo(w[done:], x2[done:])}
}

func dotGo(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	// Each product is rounded before it is added (the conversions): arm64
	// would otherwise fuse them into multiply-adds, and amd64 does not.
	for ; i+8 <= n; i += 8 {
		aa := a[i : i+8 : i+8]
		bb := b[i : i+8 : i+8]
		s0 += float32(aa[0] * bb[0])
		s1 += float32(aa[1] * bb[1])
		s2 += float32(aa[2] * bb[2])
		s3 += float32(aa[3] * bb[3])
		s4 += float32(aa[4] * bb[4])
		s5 += float32(aa[5] * bb[5])
		s6 += float32(aa[6] * bb[6])
		s7 += float32(aa[7] * bb[7])
	}
	for ; i < n; i++ {
		s0 += float32(a[i] * b[i])
	}
	return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
}

// Axpy adds alpha·x to y element-wise over len(y) elements (with AVX2 or
// on arm64, a fused multiply-add for the first len(y)-len(y)%8 elements;
// the split depends only on len(y); the rest rounds the product first).
func Axpy(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	for i := axpySIMD(y, alpha, x); i < len(y); i++ {
		y[i] += float32(alpha * x[i])
	}
}

func axpyGo(y []float32, alpha float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += float32(alpha * x[i])
	}
}

// Add adds x to y element-wise.
func Add(y, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += x[i]
	}
}

// RMSNormRows is RMSNorm of each row of width cols of x into out (which
// may alias x).
func RMSNormRows(out, x, w []float32, cols int, eps float32) {
	for t := range len(x) / cols {
		RMSNorm(out[t*cols:(t+1)*cols], x[t*cols:(t+1)*cols], w, eps)
	}
}

// RMSNorm writes x/sqrt(mean(x²)+eps)·w to out. w may be nil (a weightless
// norm, as Gemma's V norm). out may alias x.
func RMSNorm(out, x, w []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v) // exact product: fused or not, the same sum
	}
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	if w == nil {
		for i, v := range x {
			out[i] = v * scale
		}
		return
	}
	w = w[:len(x)]
	for i, v := range x {
		out[i] = v * scale * w[i]
	}
}

// Softmax replaces x with exp(x-max)/Σ in place.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	for i := 0; i < len(x); {
		i += expShiftedSIMD(x[i:], m)
		end := min(i+4, len(x))
		for ; i < end; i++ {
			x[i] = float32(exp64(float64(x[i] - m)))
		}
	}
	var sum float64
	for _, e := range x {
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// softmaxGo is Softmax with exp64 throughout (the reference the SIMD
// exponentials are tested against).
func softmaxGo(x []float32) {
	if len(x) == 0 {
		return
	}
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	var sum float64
	for i, v := range x {
		e := float32(exp64(float64(v - m)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// gateTask runs a gated activation g[i] = act(g[i])·u[i] on the pool's
// workers, with the SIMD loops where there are some (siluMulRange for
// SiLU, geluMulRange for GELU-tanh: bit-identical to SiLU and GELUTanh); a
// Forward keeps one in its scratch. Each element depends on its own inputs only, and the pieces
// start at multiples of 1024 (whole groups of four for the SIMD kernels),
// so how the work is split changes no bit.
type gateTask struct {
	g, u []float32
	loop func(g, u []float32)
}

func (t *gateTask) mul(p *Pool, g, u []float32, loop func(g, u []float32)) {
	t.g, t.u, t.loop = g, u[:len(g)], loop
	p.Run(len(g), 1024, 10, t)
}

// Run implements Task.
func (t *gateTask) Run(_, lo, hi int) { t.loop(t.g[lo:hi], t.u[lo:hi]) }

// siluMulRange is the gated SiLU's loop over one piece: the SIMD kernel as far as
// it goes, SiLU for the groups it leaves (special cases) and the tail.
func siluMulRange(g, u []float32) {
	for i := 0; i < len(g); {
		i += siluMulSIMD(g[i:], u[i:])
		for end := min(i+4, len(g)); i < end; i++ {
			g[i] = SiLU(g[i]) * u[i]
		}
	}
}

// geluMulRange is the gated GELU-tanh's loop over one piece. A last partial group of
// four goes through the SIMD kernel too, padded, so that every element is
// computed by the same code wherever it falls (the SIMD GELU equals
// GELUTanh bit for bit, which rounds every operation on its own on every
// architecture and GOAMD64 level; the padding keeps row independence even
// if the two ever parted).
func geluMulRange(g, u []float32) {
	i := geluMulSIMD(g, u) // a prefix of whole groups of four
	if i < len(g) && len(g)-i < 4 {
		var pg, pu [4]float32
		k := copy(pg[:], g[i:])
		copy(pu[:], u[i:])
		if geluMulSIMD(pg[:], pu[:]) == 4 {
			copy(g[i:], pg[:k])
			return
		}
	}
	for ; i < len(g); i++ { // no SIMD on this CPU
		g[i] = GELUTanh(g[i]) * u[i]
	}
}

// SiLU returns x·sigmoid(x), with the canonical exponential exp64.
func SiLU(x float32) float32 { return x / (1 + float32(exp64(float64(-x)))) }

// GELUTanh is the tanh approximation of GELU (gelu_pytorch_tanh), with the
// canonical tanh64 and every product rounded on its own (no fused
// multiply-add on any architecture).
func GELUTanh(x float32) float32 {
	const c = 0.7978845608028654 // sqrt(2/pi)
	v := float64(x)
	return float32(0.5 * v * (1 + tanh64(c*(v+float64(0.044715*v*v*v)))))
}

// Softcap caps logits in place at c: c·tanh(z/c), the division and the
// product in float32 and tanh the canonical tanh64, so the same bits on
// every machine. It is the decoder's final logit softcap (Gemma 3 and 4);
// the Core ML backend applies it to the logits its functions return
// before the softcap, so that they are the CPU backend's.
func Softcap(logits []float32, c float32) {
	for i, z := range logits {
		logits[i] = float32(tanh64(float64(z/c))) * c
	}
}

// Argmax returns the index of the largest value, the lowest index on ties.
// It is sample.Greedy, so that a backend's in-graph argmax (model.Argmax)
// and greedy picking from logits agree on every row: NaN never wins, and a
// row of NaN only (or no values) gives -1, which the decode loops report as
// model.ErrDamaged.
func Argmax(x []float32) int32 { return sample.Greedy(x) }

// F16 converts IEEE half-precision bits to float32 exactly; the conversion
// lives with the safetensors reader, which decodes F16 tensors too.
func F16(h uint16) float32 { return safetensors.HalfToFloat(h) }

// BF16 converts bfloat16 bits to float32.
func BF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
