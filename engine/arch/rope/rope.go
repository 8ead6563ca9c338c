// Package rope is the rotary position embedding of every architecture: the
// cos/sin tables of a layer kind for a run of positions, and their rotation
// of one head. The CPU backend applies the tables itself; a backend that
// runs the rotation in its own graph (Core ML) feeds the same rows as
// inputs (Table.Row32), so both rotate by the same angles.
//
// Two conventions exist, and each is kept bit for bit because outputs are
// compared bit for bit (DESIGN.md invariant 1 and the golden tests):
// Float64 is the GGUF llama convention of this project (frequencies,
// angles, cos/sin and the rotation in float64, rounded once per element);
// Float32 is transformers' computation (everything in float32, as the
// reference checkpoints were validated with).
package rope

import (
	"fmt"
	"math"
)

// Layout says which elements of a head form a rotated pair.
type Layout uint8

const (
	// Interleaved pairs (x[2i], x[2i+1]): GGUF's "normal" llama layout.
	Interleaved Layout = iota
	// Halves pairs (x[i], x[i+Dim/2]): Hugging Face's rotate_half (NeoX).
	Halves
)

// Precision is the arithmetic of the tables and the rotation.
type Precision uint8

const (
	// Float64: inv_freq = Theta^(-2i/FreqDim), angle, cos/sin and the
	// rotation in float64.
	Float64 Precision = iota
	// Float32: e = float32(2i)/float32(FreqDim), inv_freq =
	// 1/float32(float32(Theta)^e), angle = float32(pos)·inv_freq, cos/sin
	// rounded to float32 and the rotation in float32 (transformers).
	Float32
)

// Spec is the rotary embedding of one kind of layer. Specs are comparable:
// layers with equal specs share a table.
type Spec struct {
	Layout    Layout
	Precision Precision
	// Dim is how many leading elements of a head the rotation covers
	// (2·pairs); elements beyond are left alone.
	Dim int
	// Pairs is how many of the Dim/2 pairs turn; pairs Pairs..Dim/2-1 are
	// "rotated" by angle 0 (cos 1, sin 0), as transformers does for
	// proportional partial RoPE, whose inv_freq it pads with zeros.
	Pairs int
	// FreqDim is the denominator of the frequency exponent: Dim for plain
	// RoPE, the whole head dim for proportional partial RoPE.
	FreqDim int
	// Theta is the base.
	Theta float64
}

// Validate reports a spec no table can be built for.
func (s Spec) Validate() error {
	switch {
	case s.Layout > Halves || s.Precision > Float32:
		return fmt.Errorf("rope: unknown layout %d or precision %d", s.Layout, s.Precision)
	case s.Dim <= 0 || s.Dim%2 != 0:
		return fmt.Errorf("rope: dimension %d must be positive and even", s.Dim)
	case s.Pairs < 0 || s.Pairs > s.Dim/2:
		return fmt.Errorf("rope: %d rotated pairs for dimension %d", s.Pairs, s.Dim)
	case s.FreqDim <= 0:
		return fmt.Errorf("rope: frequency dimension %d must be positive", s.FreqDim)
	case !(s.Theta > 0) || math.IsInf(s.Theta, 0):
		return fmt.Errorf("rope: base %g must be positive and finite", s.Theta)
	}
	return nil
}

// cosSin returns the rotation of pair i at position pos.
func (s Spec) cosSin(pos, i int) (c, sn float64) {
	if i >= s.Pairs {
		return 1, 0
	}
	if s.Precision == Float32 {
		e := float32(2*i) / float32(s.FreqDim)
		inv := 1 / float32(math.Pow(float64(float32(s.Theta)), float64(e)))
		a := float32(pos) * inv
		return float64(float32(math.Cos(float64(a)))), float64(float32(math.Sin(float64(a))))
	}
	sn, c = math.Sincos(float64(pos) * math.Pow(s.Theta, -float64(2*i)/float64(s.FreqDim)))
	return c, sn
}

// Table holds the rotations of N positions from Start for one Spec: pair i
// of the token at Start+t turns by Cos[t*Dim/2+i], Sin[t*Dim/2+i]. Values
// are float64; with Float32 precision each is a float32 value exactly.
type Table struct {
	Spec     Spec
	Start, N int
	Cos, Sin []float64
}

// Fill makes t the table of s for n positions from start, reusing t's
// slices when they are large enough (a decode step allocates nothing).
func (t *Table) Fill(s Spec, start, n int) {
	half := s.Dim / 2
	t.Spec, t.Start, t.N = s, start, n
	if cap(t.Cos) < n*half {
		t.Cos, t.Sin = make([]float64, n*half), make([]float64, n*half)
	}
	t.Cos, t.Sin = t.Cos[:n*half], t.Sin[:n*half]
	for k := range n {
		for i := range half {
			t.Cos[k*half+i], t.Sin[k*half+i] = s.cosSin(start+k, i)
		}
	}
}

// Apply rotates head (at least Spec.Dim elements) of token k (position
// Start+k) in place. Every product is rounded before the sum (explicit
// conversions), so no architecture fuses them into one multiply-add and
// amd64 and arm64 give the same bits.
func (t *Table) Apply(head []float32, k int) {
	half := t.Spec.Dim / 2
	c, s := t.Cos[k*half:(k+1)*half:(k+1)*half], t.Sin[k*half:(k+1)*half:(k+1)*half]
	switch {
	case t.Spec.Layout == Interleaved && t.Spec.Precision == Float64:
		x := head[: 2*half : 2*half]
		for i := range half {
			a, b := float64(x[2*i]), float64(x[2*i+1])
			x[2*i] = float32(float64(a*c[i]) - float64(b*s[i]))
			x[2*i+1] = float32(float64(a*s[i]) + float64(b*c[i]))
		}
	case t.Spec.Layout == Halves && t.Spec.Precision == Float64:
		lo, hi := head[:half:half], head[half:2*half:2*half]
		for i := range half {
			a, b := float64(lo[i]), float64(hi[i])
			lo[i] = float32(float64(a*c[i]) - float64(b*s[i]))
			hi[i] = float32(float64(a*s[i]) + float64(b*c[i]))
		}
	case t.Spec.Layout == Interleaved:
		x := head[: 2*half : 2*half]
		for i := range half {
			a, b, ci, si := x[2*i], x[2*i+1], float32(c[i]), float32(s[i])
			x[2*i] = float32(a*ci) - float32(b*si)
			x[2*i+1] = float32(b*ci) + float32(a*si)
		}
	default:
		lo, hi := head[:half:half], head[half:2*half:2*half]
		for i := range half {
			a, b, ci, si := lo[i], hi[i], float32(c[i]), float32(s[i])
			lo[i] = float32(a*ci) - float32(b*si)
			hi[i] = float32(b*ci) + float32(a*si)
		}
	}
}

// Row32 writes the Dim/2 rotations of token k as float32 into cos and sin
// (exact for Float32 precision): the rows a backend feeding the tables to
// its own graph uses.
func (t *Table) Row32(k int, cos, sin []float32) {
	half := t.Spec.Dim / 2
	for i := range half {
		cos[i], sin[i] = float32(t.Cos[k*half+i]), float32(t.Sin[k*half+i])
	}
}
