package cpu

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model/gguf"
)

// canonPath holds the sha256 of every kernel family's outputs on fixed
// inputs, per mode: "simd" with every kernel this CPU has (amd64: AVX2,
// F16C, the row kernels; arm64: NEON and SDOT), "go" with all of them
// switched off (the Go loops). It is recorded on amd64 (go test
// ./engine/cpu -run TestCanonVectors -update) and checked on every
// machine that has the mode's kernels: on arm64 (make test runs it under
// qemu) it shows, kernel by kernel, that a model computes the same bits
// as on amd64, with the SIMD kernels and with the Go fallbacks (which Go
// would otherwise compile with fused multiply-adds there). NaN results
// are hashed as one value: x86 and Arm make different NaN bits.
const canonPath = "testdata/canon.json"

type canonFile struct {
	Note  string                       `json:"note"`
	Modes map[string]map[string]string `json:"modes"`
}

// canonHash is the sha256 of values' float32 bits, every NaN as
// 0x7fc00000.
func canonHash(values []float32) string {
	h := sha256.New()
	var b [4]byte
	for _, v := range values {
		u := math.Float32bits(v)
		if v != v {
			u = 0x7fc00000
		}
		binary.LittleEndian.PutUint32(b[:], u)
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonSpecials are float32 activations that reach every special case of
// the kernels (zeros, subnormals, the exponent range's borders, huge
// values, infinities, NaN).
var canonSpecials = []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-38, 0.625, -0.625, 0.7, 5, -5, 55, -56,
	88.7, -88.7, 103.9, -103.9, 708.4, -708.4, 709.8, -709.8, 746, -746, 1e20, -1e20, math.MaxFloat32, -math.MaxFloat32,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}

// canonVectorsNow computes every family's hash with the kernels as the
// flags are now.
func canonVectorsNow(t *testing.T) map[string]string {
	out := map[string]string{}
	r := rand.New(rand.NewPCG(91, 92))
	f64 := func(xs []float64) []float32 { // a float64 as its two halves' bits
		v := make([]float32, 2*len(xs))
		for i, x := range xs {
			u := math.Float64bits(x)
			if x != x {
				u = 0x7ff8000000000000
			}
			v[2*i], v[2*i+1] = math.Float32frombits(uint32(u)), math.Float32frombits(uint32(u>>32))
		}
		return v
	}
	xs := canonInputs()[:60000]
	e, th := make([]float64, len(xs)), make([]float64, len(xs))
	for i, x := range xs {
		e[i], th[i] = exp64(x), tanh64(x)
	}
	out["exp64"], out["tanh64"] = canonHash(f64(e)), canonHash(f64(th))
	fm := make([]float32, 50000)
	for i := range fm {
		a, b, c := float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())
		fm[i] = fma32(a, b, c*float32(math.Ldexp(1, r.IntN(40)-20)))
	}
	out["fma32"] = canonHash(fm)

	// Activations: g of several scales with the specials spread over
	// every position of a group of four.
	var g []float32
	for _, scale := range []float32{1e-3, 0.5, 3, 10, 100} {
		g = append(g, randVals(r, 2001, scale)...)
	}
	for i, v := range canonSpecials {
		g[37*i+i%4] = v
	}
	u := randVals(r, len(g), 2)
	silu, gelu := slices.Clone(g), slices.Clone(g)
	siluMulRange(silu, u)
	geluMulRange(gelu, u)
	out["silu"], out["gelu"] = canonHash(silu), canonHash(gelu)
	var sm []float32
	for _, spread := range []float32{0.1, 5, 300, 2000} {
		for n := 1; n <= 67; n += 6 {
			x := randVals(r, n, spread)
			if n > 5 {
				x[n/2] = float32(math.Inf(-1))
			}
			Softmax(x)
			sm = append(sm, x...)
		}
	}
	out["softmax"] = canonHash(sm)
	norm := randVals(r, 3*96, 2)
	RMSNormRows(norm, norm, randVals(r, 96, 1), 96, 1e-6)
	out["rmsnorm"] = canonHash(norm)

	// The quantiser, with zero, tie, huge, subnormal and NaN blocks.
	qx := randVals(r, 16*32, 3)
	for i := range 32 {
		qx[i], qx[32+i], qx[64+i], qx[96+i] = 0, float32(i)-15.5, float32(i%5)*1e38, float32(i)*1e-44
	}
	qx[160], qx[200] = float32(math.NaN()), float32(math.Inf(-1))
	q, d, s, qs := make([]int8, len(qx)), make([]float32, 16), make([]float32, 16), make([]int32, 16)
	quantizeQ8Into(q, 32, d, s, qs, 1, qx)
	qv := append(append(slices.Clone(d), s...), make([]float32, len(q)+len(qs))...)
	for i, v := range q {
		qv[32+i] = float32(v)
	}
	for i, v := range qs {
		qv[32+len(q)+i] = float32(v)
	}
	out["quantize"] = canonHash(qv)

	// Dot and Dot3 at every tail length, Axpy at every length around 8.
	var dots []float32
	for n := 0; n <= 100; n++ {
		a, b, c, e := randVals(r, n, 1), randVals(r, n, 1), randVals(r, n, 1), randVals(r, n, 1)
		d3 := Dot3(a, b, c, e)
		dots = append(dots, Dot(a, b), d3[0], d3[1], d3[2])
		y := randVals(r, n, 1)
		Axpy(y, 0.3, a)
		dots = append(dots, y...)
	}
	big := randVals(r, 4096, 1)
	dots = append(dots, Dot(big, big[:4096]), Dot(big[:4000], big[96:]))
	out["dot"] = canonHash(dots)

	// Every weight type as a matrix of 19 rows (a partial group of 8) at
	// widths 1..9, and its rows (embedding lookups); scales of a few
	// blocks set to extreme halves.
	for _, typ := range []gguf.Type{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1} {
		for _, cols := range []int{96, 1024} {
			const rows = 19
			data, _ := Quantize(typ, randVals(r, rows*cols, 0.1), cols)
			if bs := typ.BlockBytes(); bs > 4 {
				for i, h := range []uint16{0x0001, 0x7bff, 0x03ff} {
					data[(5+i*7)*bs], data[(5+i*7)*bs+1] = byte(h), byte(h>>8)
				}
			}
			m, err := NewMatrix("w", typ, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			x := randVals(r, 9*cols, 1)
			var res []float32
			for n := 1; n <= 9; n++ {
				o := make([]float32, n*rows)
				m.MatMul(NewPool(2), o, x[:n*cols])
				res = append(res, o...)
			}
			row := make([]float32, cols)
			for ri := range rows {
				res = append(res, m.Row(row, ri)...)
			}
			out[fmt.Sprintf("matmul/%s/%d", typ, cols)] = canonHash(res)
		}
	}

	// Attention over a cache at head dims 16 (the row loop) and 64 (the
	// run kernels).
	for _, hd := range []int{16, 64} {
		geo := kv.Geometry{Context: 64, Layers: []kv.LayerSpec{{KVHeads: 2, HeadDim: hd, Window: 5}, {KVHeads: 2, HeadDim: hd, Source: 1}}}
		c, err := kv.New(geo, 16)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Reserve(0, 12); err != nil {
			t.Fatal(err)
		}
		for l := range 2 {
			for p := range 12 {
				copy(c.K(l, p), randVals(r, 2*hd, 1))
				copy(c.V(l, p), randVals(r, 2*hd, 1))
			}
		}
		const heads, n = 4, 12
		qv := randVals(r, n*heads*hd, 1)
		var res []float32
		for l := range 2 {
			o := make([]float32, n*heads*hd)
			new(attnTask).attend(NewPool(2), c, l, 0, n, qv, heads, 2, hd, 0.3, o)
			res = append(res, o...)
		}
		out[fmt.Sprintf("attend/%d", hd)] = canonHash(res)
	}

	// The formats Quantize does not encode (Q5_0, Q5_1, the K formats), as
	// random blocks with one in four at the extreme values (testWeights),
	// at widths 1..9 and their rows; and the Q8_K quantiser the K formats'
	// activations go through, with zero, tie, huge and NaN blocks.
	for _, typ := range []gguf.Type{gguf.Q5_0, gguf.Q5_1, gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K} {
		for _, cols := range []int{typ.BlockSize() * 3, 1024} {
			const rows = 19
			m, err := NewMatrix("w", typ, rows, cols, testWeights(r, typ, rows, cols, 0.1))
			if err != nil {
				t.Fatal(err)
			}
			x := randVals(r, 9*cols, 1)
			x[2*cols+3] = 1e30 // token 2's first block saturates around one huge value
			var res []float32
			for n := 1; n <= 9; n++ {
				o := make([]float32, n*rows)
				m.MatMul(NewPool(2), o, x[:n*cols])
				res = append(res, o...)
			}
			row := make([]float32, cols)
			for ri := range rows {
				res = append(res, m.Row(row, ri)...)
			}
			out[fmt.Sprintf("matmul/%s/%d", typ, cols)] = canonHash(res)
		}
	}
	kx := randVals(r, 6*qkK, 3)
	for i := range qkK {
		kx[i], kx[qkK+i], kx[2*qkK+i] = 0, float32(i%64)-31.5, float32(i%5)*1e38
	}
	kx[3*qkK+7], kx[4*qkK+200] = float32(math.NaN()), float32(math.Inf(-1))
	kq, krecs := make([]int8, len(kx)), make([]kRec, 6)
	quantizeQ8KInto(kq, qkK, krecs, 1, kx)
	var kv []float32
	for _, rec := range krecs {
		kv = append(kv, rec.d)
		for _, s := range append(rec.s32[:], rec.s16[:]...) {
			kv = append(kv, float32(s))
		}
	}
	for _, v := range kq {
		kv = append(kv, float32(v))
	}
	out["quantizeK"] = canonHash(kv)
	return out
}

// TestCanonVectors: every kernel family's outputs on fixed inputs have the
// hashes recorded in testdata/canon.json on amd64, with the SIMD kernels
// ("simd": each set of row kernels this CPU has, with the float kernels)
// and with the Go loops ("go").
func TestCanonVectors(t *testing.T) {
	var want canonFile
	if data, err := os.ReadFile(canonPath); err == nil {
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%s: %v", canonPath, err)
		}
	} else if !*updateGolden {
		t.Fatalf("%v (run go test ./engine/cpu -run TestCanonVectors -update on amd64 to record it)", err)
	}
	if *updateGolden && runtime.GOARCH != "amd64" {
		t.Skip("the vectors are recorded on amd64 and checked elsewhere")
	}
	got := canonFile{Note: "written by go test ./engine/cpu -run TestCanonVectors -update on amd64; see canon_vectors_test.go", Modes: map[string]map[string]string{}}
	type run struct {
		mode, name string
		enable     func() func()
	}
	var runs []run
	if floatSIMD() {
		for _, ks := range rowKernelSets() { // every set of row kernels: one record
			runs = append(runs, run{"simd", ks.name, ks.enable})
		}
	}
	runs = append(runs, run{"go", "go", withoutSIMD})
	for _, rn := range runs {
		mode := rn.mode
		t.Run(rn.mode+"/"+rn.name, func(t *testing.T) {
			defer rn.enable()()
			vecs := canonVectorsNow(t)
			if *updateGolden {
				if got.Modes[mode] == nil {
					got.Modes[mode] = vecs
				} else if !maps.Equal(got.Modes[mode], vecs) {
					t.Fatalf("kernel set %s disagrees with the first of mode %s", rn.name, mode)
				}
				return
			}
			for _, name := range slices.Sorted(maps.Keys(vecs)) {
				w, ok := want.Modes[mode][name]
				switch {
				case !ok:
					t.Errorf("%s: %s not in %s (rerun -update on amd64 if it is new)", mode, name, canonPath)
				case w != vecs[name]:
					t.Errorf("%s: %s outputs hash to %s, %s records %s", mode, name, short(vecs[name]), canonPath, short(w))
				}
			}
		})
	}
	if *updateGolden {
		var b strings.Builder
		note, _ := json.Marshal(got.Note)
		fmt.Fprintf(&b, "{\n \"note\": %s,\n \"modes\": {", note)
		for i, mode := range slices.Sorted(maps.Keys(got.Modes)) {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "\n  %q: {", mode)
			for j, name := range slices.Sorted(maps.Keys(got.Modes[mode])) {
				if j > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, "\n   %q: %q", name, got.Modes[mode][name])
			}
			b.WriteString("\n  }")
		}
		b.WriteString("\n }\n}\n")
		if err := os.WriteFile(canonPath, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
