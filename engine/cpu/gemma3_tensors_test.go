package cpu

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"anechat/engine/model/gguf"
	"anechat/internal/testres"
)

// TestGemma3Tensors: every tensor of the real Gemma 3 270M Q4_K_M GGUF
// (Q4_K, Q5_0, Q6_K, Q8_0 and F32; build/scripts/deps-gemma3.sh) loads into
// a Matrix, and the rows the gguf package dequantised for
// testdata/quants/gemma3_rows.json (first, middle and last of every
// quantised tensor, recorded by make_fixtures.py --gemma3) come out of
// Matrix.Row with the same float32 bits.
func TestGemma3Tensors(t *testing.T) {
	f, err := gguf.Open(testres.Gemma3GGUF(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ref struct {
		Tensors map[string]struct {
			Type   string            `json:"type"`
			Rows   int               `json:"rows"`
			Cols   int               `json:"cols"`
			SHA256 map[string]string `json:"sha256"`
		} `json:"tensors"`
	}
	data, err := os.ReadFile("testdata/quants/gemma3_rows.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	types := map[gguf.Type]int{}
	seen := 0
	for _, ti := range f.Tensors() {
		types[ti.Type]++
		cols, rows := ti.Dims[0], 1
		for _, d := range ti.Dims[1:] {
			rows *= d
		}
		raw, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewMatrix(ti.Name, ti.Type, rows, cols, raw)
		if err != nil {
			t.Errorf("%s: %v", ti.Name, err)
			continue
		}
		if ti.Type == gguf.F32 {
			continue
		}
		want, ok := ref.Tensors[ti.Name]
		if !ok || want.Type != ti.Type.String() || want.Rows != rows || want.Cols != cols {
			t.Errorf("%s (%s, %dx%d): not in gemma3_rows.json with that type and shape", ti.Name, ti.Type, rows, cols)
			continue
		}
		seen++
		row := make([]float32, cols)
		for r, h := range want.SHA256 {
			ri, _ := strconv.Atoi(r)
			m.Row(row, ri)
			b := make([]byte, 4*cols)
			for i, v := range row {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != h {
				t.Errorf("%s (%s) row %d: dequantised rows differ from the gguf package's", ti.Name, ti.Type, ri)
			}
		}
	}
	if seen != len(ref.Tensors) {
		t.Errorf("%d quantised tensors checked, gemma3_rows.json has %d", seen, len(ref.Tensors))
	}
	for _, typ := range []gguf.Type{gguf.Q4_K, gguf.Q5_0, gguf.Q6_K, gguf.Q8_0, gguf.F32} {
		if types[typ] == 0 {
			t.Errorf("the file has no %s tensor: not the file this test is about", typ)
		}
	}
}

// TestGemma3MatMul: on real weights of each format of the Gemma 3 file
// (layer 0's Q5_0 query, Q4_K output and Q8_0 value projections, and a
// Q6_K down projection), every kernel set gives the Go loops' canonical
// sums, and a width-5 call gives each token its width-1 bits.
func TestGemma3MatMul(t *testing.T) {
	f, err := gguf.Open(testres.Gemma3GGUF(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mats []*Matrix
	q6 := ""
	for _, ti := range f.Tensors() {
		if ti.Type == gguf.Q6_K && q6 == "" {
			q6 = ti.Name
		}
	}
	for _, name := range []string{"blk.0.attn_q.weight", "blk.0.attn_output.weight", "blk.0.attn_v.weight", "blk.0.attn_k.weight", q6} {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("no tensor %q", name)
		}
		raw, _ := f.TensorData(name)
		m, err := NewMatrix(name, ti.Type, ti.Dims[1], ti.Dims[0], raw)
		if err != nil {
			t.Fatal(err)
		}
		mats = append(mats, m)
	}
	r := rand.New(rand.NewPCG(17, 18))
	for _, m := range mats {
		x := randVals(r, 5*m.Cols, 1)
		var ref []float32
		for _, ks := range goldenKernelSets() {
			restore := ks.enable()
			wide := make([]float32, 5*m.Rows)
			m.MatMul(NewPool(2), wide, x)
			for tk := range 5 {
				one := make([]float32, m.Rows)
				m.MatMul(NewPool(1), one, x[tk*m.Cols:(tk+1)*m.Cols])
				for i, v := range one {
					if math.Float32bits(v) != math.Float32bits(wide[tk*m.Rows+i]) {
						t.Fatalf("%s, %s: token %d row %d: width 5 gives %v, width 1 %v", ks.name, m.Name, tk, i, wide[tk*m.Rows+i], v)
					}
				}
			}
			restore()
			if ref == nil {
				ref = wide
				continue
			}
			for i := range wide {
				if math.Float32bits(wide[i]) != math.Float32bits(ref[i]) {
					t.Fatalf("%s, %s: out[%d] = %v, the first kernel set gives %v", ks.name, m.Name, i, wide[i], ref[i])
				}
			}
		}
	}
}
