package cpu

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"anechat/engine/arch/gemma3"
	"anechat/engine/arch/qwen2"
	"anechat/engine/arch/qwen3"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
)

// tinySpecs are the random decoders of the tests: each architecture at a
// geometry with grouped-query heads, qwen3 with heads wider than
// Hidden/Heads, gemma3 with a window of 5 and a global layer (5 of 6), so
// that the tests' 32-token sequences cross the window.
func tinySpecs() map[string]RandomSpec {
	return map[string]RandomSpec{
		"qwen2":  {Arch: qwen2.Name, Hidden: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 256, Context: 64, RopeBase: 1e6},
		"qwen3":  {Arch: qwen3.Name, Hidden: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32, Vocab: 256, Context: 64, RopeBase: 1e6, Tied: true},
		"gemma3": {Arch: gemma3.Name, Hidden: 64, FFN: 96, Layers: 6, Heads: 4, KVHeads: 1, HeadDim: 32, Vocab: 256, Context: 64, RopeBase: 1e6, Tied: true, Window: 5},
	}
}

// wideSpec is spec at a width whose rows are whole K-format blocks (256).
func wideSpec(spec RandomSpec) RandomSpec {
	spec.Hidden, spec.FFN, spec.HeadDim = 256, 512, 64
	return spec
}

// loadDecoder builds the random decoder of spec with weights of type typ
// on the CPU.
func loadDecoder(t testing.TB, spec RandomSpec, typ gguf.Type) model.Backend {
	t.Helper()
	data, err := RandomGGUF(spec, typ, 11)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("random-"+spec.Arch+".gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := loadGGUF(f, NewPool(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.base().Close() })
	return m
}

// testSeq is a sequence of n ids below vocab.
func testSeq(n, vocab int) []int32 {
	seq := make([]int32, n)
	for i := range seq {
		seq[i] = int32((i*37 + 11) % vocab)
	}
	seq[0] = 1
	return seq
}

// TestDecoderRowIndependence: invariant 1 on the new architectures. The
// logits of a sequence decoded at width K equal width-1 decoding bit for
// bit, for K = 1..8, also when only part of each wide call is committed.
func TestDecoderRowIndependence(t *testing.T) {
	for name, spec := range tinySpecs() {
		types := []gguf.Type{gguf.F32, gguf.F16, gguf.Q8_0, gguf.Q4_1, gguf.Q5_0}
		if name == "gemma3" {
			// The K formats need rows of 256: the Gemma 3 270M mix.
			spec = wideSpec(spec)
			types = []gguf.Type{gguf.Q4_K, gguf.Q5_K, gguf.Q6_K, gguf.Q5_1}
		}
		for _, typ := range types {
			t.Run(fmt.Sprintf("%s-%s", name, typ), func(t *testing.T) {
				m := loadDecoder(t, spec, typ)
				seq := testSeq(32, spec.Vocab)
				ref := decode(t, m, seq, 1, 8)
				ctx := context.Background()
				for width := 1; width <= 8; width++ {
					for _, partial := range []bool{false, true} {
						c, _ := kv.New(m.Config().KV, 8)
						for pos := 0; pos < len(seq); {
							n := min(width, len(seq)-pos)
							r, err := m.Forward(ctx, seq[pos:pos+n], pos, c, model.Logits|model.Argmax)
							if err != nil {
								t.Fatal(err)
							}
							keep := n
							if partial && n > 1 {
								keep = (n + 1) / 2
							}
							for j := range keep {
								for v, x := range r.Logits[j] {
									if x != ref[pos+j][v] {
										t.Fatalf("width %d partial %v: position %d logit %d = %v, width 1 gave %v", width, partial, pos+j, v, x, ref[pos+j][v])
									}
								}
								if r.Argmax[j] != Argmax(ref[pos+j]) {
									t.Fatalf("argmax differs at %d", pos+j)
								}
							}
							c.Commit(keep)
							pos += keep
						}
					}
				}
			})
		}
	}
}

// writeFixtures rewrites the random decoders of testdata/decoders (then
// run testdata/decoders/gen.py for their reference logits):
// go test ./engine/cpu -run TestDecoderReference -write-fixtures.
var writeFixtures = flag.Bool("write-fixtures", false, "rewrite testdata/decoders/*.gguf from RandomGGUF")

const decodersDir = "testdata/decoders"

// TestWriteDecoderFixtures writes the fixtures when -write-fixtures is set
// (F16 weights: exact in float32, half the bytes of F32).
func TestWriteDecoderFixtures(t *testing.T) {
	if !*writeFixtures {
		t.Skip("run with -write-fixtures to rewrite testdata/decoders")
	}
	for name, spec := range tinySpecs() {
		data, err := RandomGGUF(spec, gguf.F16, 11)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(decodersDir, name+".gguf"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// decoderReference is testdata/decoders/reference.json (gen.py).
type decoderReference struct {
	Versions map[string]string `json:"versions"`
	Models   map[string]struct {
		File   string `json:"file"`
		SHA256 string `json:"sha256"`
		Cases  []struct {
			Prompt []int32 `json:"prompt"`
			Greedy []int32 `json:"greedy"`
			Logits string  `json:"logits_f32le"`
		} `json:"cases"`
	} `json:"models"`
}

// referenceTolerance bounds |our logit - transformers' logit| on the F16
// fixtures, whose weights both sides dequantise exactly to float32. What
// differs is rounding: the order of float32 accumulation in the 64-192
// wide dot products, RMSNorm's sum of squares (float64 here), the RoPE
// tables (float64 here, float32 there) and exp/tanh. Each contributes a
// few float32 ulps (~6e-8 relative) per operation; through 2-6 layers of
// unit-scale activations the logits (|z| ≲ 3) move by ~1e-6, so 2e-5
// leaves a margin of 10-20 while a wrong rule (a missing bias, norm, scale
// or window, a wrong RoPE base) moves them by 1e-2 or more.
const referenceTolerance = 2e-5

// TestDecoderReference: the CPU backend on the random qwen2, qwen3 and
// gemma3 GGUFs gives transformers' logits (loading the same files) at every
// position within referenceTolerance, and its greedy ids.
func TestDecoderReference(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(decodersDir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref decoderReference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"qwen2", "qwen3", "gemma3"} {
		t.Run(name, func(t *testing.T) {
			r, ok := ref.Models[name]
			if !ok {
				t.Fatalf("reference.json has no %s", name)
			}
			path := filepath.Join(decodersDir, r.File)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if h := sha256.Sum256(raw); hex.EncodeToString(h[:]) != r.SHA256 {
				t.Fatalf("%s is not the file reference.json was made from (rerun gen.py)", path)
			}
			f, err := gguf.Parse(path, raw)
			if err != nil {
				t.Fatal(err)
			}
			m, err := loadGGUF(f, NewPool(0))
			if err != nil {
				t.Fatal(err)
			}
			vocab := m.Config().VocabSize
			worst := 0.0
			for ci, c := range r.Cases {
				seq := append(slices.Clone(c.Prompt), c.Greedy...)
				b, err := base64.StdEncoding.DecodeString(c.Logits)
				if err != nil || len(b) != 4*len(seq)*vocab {
					t.Fatalf("case %d: logits of %d bytes, want %d (%v)", ci, len(b), 4*len(seq)*vocab, err)
				}
				got := decode(t, m, seq, 3, 4)
				for p := range seq {
					for v := range vocab {
						want := math.Float32frombits(binary.LittleEndian.Uint32(b[4*(p*vocab+v):]))
						d := math.Abs(float64(got[p][v] - want))
						worst = max(worst, d)
						if d > referenceTolerance {
							t.Fatalf("case %d position %d token %d: logit %v, transformers %v", ci, p, v, got[p][v], want)
						}
					}
				}
				if g := greedy(t, m, c.Prompt, len(c.Greedy)); !slices.Equal(g, c.Greedy) {
					t.Errorf("case %d: greedy %v, transformers %v", ci, g, c.Greedy)
				}
			}
			t.Logf("largest |logit difference| %.3g (transformers %s)", worst, ref.Versions["transformers"])
		})
	}
}

// openDecoderFixture opens testdata/decoders/NAME.gguf on the CPU.
func openDecoderFixture(t testing.TB, name string) model.Backend {
	t.Helper()
	f, err := gguf.Open(filepath.Join(decodersDir, name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := loadGGUF(f, NewPool(0))
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.base().Close()
		f.Close()
	})
	return m
}
