package cpu

import (
	"testing"

	"anechat/engine/model/gguf"
)

// TestRowKernelsPresent: the formats that have row kernels get them with
// each kernel set (so TestCanonicalSums holds the assembly, not the Go
// loops, to the canonical sums), and the others fall back to the Go loops.
func TestRowKernelsPresent(t *testing.T) {
	vnni, q8 := hasVNNI, hasQ8
	defer func() { hasVNNI, hasQ8 = vnni, q8 }()
	for _, c := range []struct {
		name       string
		vnni, q8   bool
		have, none []gguf.Type
	}{
		{"vnni", true, true, []gguf.Type{gguf.Q4_0, gguf.Q4_1, gguf.Q8_0, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}, []gguf.Type{gguf.Q2_K, gguf.Q3_K}},
		{"avx2", false, true, []gguf.Type{gguf.Q4_0, gguf.Q4_1, gguf.Q8_0, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}, []gguf.Type{gguf.Q2_K, gguf.Q3_K}},
		{"go", false, false, nil, allIntegerTypes},
	} {
		if c.vnni && !vnni || c.q8 && !q8 {
			continue
		}
		hasVNNI, hasQ8 = c.vnni, c.q8
		for _, typ := range c.have {
			if ks := rowKernels(typ); ks[1] == nil || ks[2] == nil || ks[4] == nil || ks[8] == nil {
				t.Errorf("%s: %s has no row kernels", c.name, typ)
			}
		}
		for _, typ := range c.none {
			if rowKernels(typ)[1] != nil {
				t.Errorf("%s: %s has row kernels", c.name, typ)
			}
		}
	}
}
