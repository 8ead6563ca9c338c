package model

import "math"

// SameBits reports whether a and b hold the same float32 values bit for
// bit: what the exactness claims compare (row independence, resume equal to
// fresh, a converted tensor equal to its source). == would call -0 and 0
// equal and a NaN unequal to itself.
func SameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
