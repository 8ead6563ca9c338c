package cpu

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"anechat/engine/arch/gemma4"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/internal/testres"
)

// updateGolden rewrites testdata/golden.json from the code as it is:
// go test ./engine/cpu -run TestGolden -update. Only do so on purpose, when
// an output is meant to change, and say why in the commit.
var updateGolden = flag.Bool("update", false, "rewrite testdata/golden.json from the current code")

const goldenPath = "testdata/golden.json"

// goldenCase is one model and prompt of the golden file: the greedy ids
// after the prompt, and for seq = prompt+greedy the sha256 of the logits'
// float32 bits at a few positions, per way of running seq (width 1, width 4,
// one batched prefill, a prefill asking only for the last row).
type goldenCase struct {
	Name   string                       `json:"name"`
	Prompt []int32                      `json:"prompt"`
	Greedy []int32                      `json:"greedy"`
	Logits map[string]map[string]string `json:"logits"` // mode -> position -> sha256
}

// goldenFile holds the cases per kernel set ("amd64-vnni", ...): kernels
// of different sets round differently, each set the same on every run.
type goldenFile struct {
	Note string                  `json:"note"`
	Sets map[string][]goldenCase `json:"sets"`
}

// goldenModel is one model the golden test runs: load returns it (or
// skips, as testres does when a resource is absent); prompts are the
// prompts run on it, greedy the tokens generated after each.
type goldenModel struct {
	name    string
	load    func(t *testing.T) model.Backend
	prompts [][]int32
	greedy  int
	// short is how many kernel sets (the first of goldenKernelSets) run
	// the model with -test.short, as make test's arm64 step runs the tests
	// under qemu, where a large model takes minutes: -1 all, 0 none
	// (SmolLM2: ~80 s of CPU under qemu; its matrices' kernels are held to
	// the canonical sums there by the kernel tests, and the model's outputs
	// by the native run).
	short int
	// simdOnly skips the Go-loop kernel set (a real K-format model or a
	// full-width Gemma 4 layer there takes a minute or more; smaller
	// random models of the same formats and layers cover those loops).
	simdOnly bool
}

func goldenModels() []goldenModel {
	stories := func(t *testing.T) model.Backend { return loadStories(t) }
	gemma3Softcap := tinySpecs()["gemma3"]
	gemma3Softcap.Softcap = 30
	return []goldenModel{
		{name: "stories260K", load: stories, prompts: [][]int32{testres.StoriesPrompt(), {1, 300, 2, 301, 302, 303}, {1}}, greedy: 48, short: -1},
		{name: "random-llama-q8_0", load: func(t *testing.T) model.Backend { return loadRandom(t, tinyOpts, gguf.Q8_0) },
			prompts: [][]int32{{1, 5, 9, 77, 3}}, greedy: 40, short: -1},
		{name: "random-llama-q4_0", load: func(t *testing.T) model.Backend { return loadRandom(t, tinyOpts, gguf.Q4_0) },
			prompts: [][]int32{{1, 5, 9, 77, 3}}, greedy: 40, short: -1},
		{name: "smollm2", load: func(t *testing.T) model.Backend {
			m, err := OpenLlama(testres.SmolLM2GGUF(t), NewPool(0))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return m
		}, prompts: [][]int32{{1, 504, 3458, 2914, 28, 253, 1345, 30}}, greedy: 32, short: 0, simdOnly: true},
		// SmolLM2's format through the Go loops.
		{name: "random-llama-q4_1", load: func(t *testing.T) model.Backend { return loadRandom(t, tinyOpts, gguf.Q4_1) },
			prompts: [][]int32{{1, 5, 9, 77, 3}}, greedy: 40, short: -1},
		{name: "gemma4-fixture", load: func(t *testing.T) model.Backend { return loadGemma4Dir(t, "model") }, greedy: 40, short: -1},
		{name: "gemma4-fixture-bf16", load: func(t *testing.T) model.Backend { return loadGemma4Dir(t, "model-bf16") }, greedy: 40, short: -1},
		// Gemma 4 E2B's layers at full width: on the SIMD kernel sets only
		// (the Go loops took a minute on them); random-gemma4-small-q8_0
		// runs its layer plan through the Go loops.
		{name: "random-gemma4-q8_0", load: func(t *testing.T) model.Backend { return loadRandomGemma4(t, gemma4.E2B(5, 384)) },
			prompts: [][]int32{{2, 17, 200, 31, 5, 99}}, greedy: 16, short: 0, simdOnly: true},
		{name: "random-gemma4-small-q8_0", load: func(t *testing.T) model.Backend { return loadRandomGemma4(t, smallE2B()) },
			prompts: [][]int32{{2, 17, 200, 31, 5, 99}}, greedy: 16, short: -1},
		{name: "random-qwen2-q5_0", load: func(t *testing.T) model.Backend { return loadDecoder(t, tinySpecs()["qwen2"], gguf.Q5_0) },
			prompts: [][]int32{{1, 5, 9, 77, 3}}, greedy: 24, short: -1},
		{name: "random-qwen3-q8_0", load: func(t *testing.T) model.Backend { return loadDecoder(t, tinySpecs()["qwen3"], gguf.Q8_0) },
			prompts: [][]int32{{1, 5, 9, 77, 3}}, greedy: 24, short: -1},
		{name: "random-gemma3-q4_k", load: func(t *testing.T) model.Backend { return loadDecoder(t, wideSpec(tinySpecs()["gemma3"]), gguf.Q4_K) },
			prompts: [][]int32{{2, 17, 200, 31, 5, 99}}, greedy: 16, short: -1},
		// The logit softcap (no Gemma 3 checkpoint has one) is tanh64's
		// arithmetic, the same bits on amd64 and arm64.
		{name: "random-gemma3-softcap-q8_0", load: func(t *testing.T) model.Backend { return loadDecoder(t, gemma3Softcap, gguf.Q8_0) },
			prompts: [][]int32{{2, 17, 200, 31, 5, 99}}, greedy: 16, short: -1},
		{name: "decoders-gemma3-f16", load: func(t *testing.T) model.Backend { return openDecoderFixture(t, "gemma3") },
			prompts: [][]int32{{1, 48, 85, 122, 159, 196}}, greedy: 16, short: -1},
		{name: "gemma3-270m", load: func(t *testing.T) model.Backend {
			m, err := OpenGemma3(testres.Gemma3GGUF(t), NewPool(0))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return m
		}, prompts: [][]int32{{2, 818, 5279, 529, 7001, 563}}, greedy: 16, short: 0, simdOnly: true},
	}
}

// loadRandomGemma4 is RandomGemma4 of geometry o with Q8_0 weights.
func loadRandomGemma4(t *testing.T, o gemma4.Config) model.Backend {
	m, err := RandomGemma4(o, gguf.Q8_0, 3, NewPool(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// smallE2B is the layer plan of gemma4.E2B(5, 384) (sliding and full
// layers with their own head dims and partial RoPE, a KV-shared layer with
// the double-wide MLP, per-layer inputs, the softcap) at an eighth of its
// widths or less: fast enough for the Go-loop kernel set.
func smallE2B() gemma4.Config {
	o := gemma4.E2B(5, 384)
	o.Hidden, o.Heads, o.PLEDim = 128, 2, 32
	for i := range o.Layers {
		l := &o.Layers[i]
		l.HeadDim, l.RopePairs, l.FFN = l.HeadDim/8, l.RopePairs/8, l.FFN/24
	}
	return o
}

// loadGemma4Dir loads testdata/gemma4/<sub>.
func loadGemma4Dir(t *testing.T, sub string) model.Backend {
	m, err := LoadGemma4(filepath.Join(gemma4Dir, sub), NewPool(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// gemma4FixturePrompts are the prompts of the fixture's reference cases.
func gemma4FixturePrompts(t *testing.T) [][]int32 {
	data, err := os.ReadFile(filepath.Join(gemma4Dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []gemma4Case `json:"cases"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	var ps [][]int32
	for _, c := range ref.Cases {
		ps = append(ps, c.Prompt)
	}
	return ps
}

// TestGolden: every output of the CPU backend (greedy ids, logits of
// width-1, width-4 and batched calls) is bit-identical to what the code
// recorded in testdata/golden.json, for every kernel set this CPU can run
// (goldenKernelSets). A refactoring that changes one bit fails here.
func TestGolden(t *testing.T) {
	var want goldenFile
	if data, err := os.ReadFile(goldenPath); err == nil {
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%s: %v", goldenPath, err)
		}
	} else if !*updateGolden {
		t.Fatalf("%v (run go test ./engine/cpu -run TestGolden -update to record it)", err)
	}
	got := goldenFile{Note: "written by go test ./engine/cpu -run TestGolden -update; see golden_test.go", Sets: map[string][]goldenCase{}}
	for si, ks := range goldenKernelSets() {
		t.Run(ks.name, func(t *testing.T) {
			restore := ks.enable()
			defer restore()
			wantSet, recorded := want.Sets[ks.name]
			if ks.same != "" {
				if *updateGolden {
					t.Skipf("kernel set %s is checked against %s's records: update them on amd64", ks.name, ks.same)
				}
				wantSet, recorded = want.Sets[ks.same]
			}
			if !recorded && !*updateGolden {
				t.Skipf("%s records no outputs for kernel set %s (GOARCH %s): record them with -update on such a machine", goldenPath, ks.name, runtime.GOARCH)
			}
			for _, gm := range goldenModels() {
				t.Run(gm.name, func(t *testing.T) {
					if testing.Short() && gm.short >= 0 && si >= gm.short && !*updateGolden {
						t.Skipf("-short: %s runs on the first %d kernel sets only", gm.name, gm.short)
					}
					if gm.simdOnly && strings.HasSuffix(ks.name, "-go") {
						t.Skip("not run on the Go-loop kernel set")
					}
					m := gm.load(t)
					prompts := gm.prompts
					if prompts == nil {
						prompts = gemma4FixturePrompts(t)
					}
					for i, p := range prompts {
						c := runGolden(t, m, fmt.Sprintf("%s/%d", gm.name, i), p, gm.greedy)
						got.Sets[ks.name] = append(got.Sets[ks.name], c)
						if *updateGolden {
							continue
						}
						j := slices.IndexFunc(wantSet, func(w goldenCase) bool { return w.Name == c.Name })
						if j < 0 {
							t.Errorf("%s: not in %s (rerun with -update if the case is new)", c.Name, goldenPath)
							continue
						}
						compareGolden(t, wantSet[j], c)
					}
				})
			}
		})
	}
	if *updateGolden && len(got.Sets) > 0 {
		data, err := marshalGolden(got)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// marshalGolden writes f as JSON with one line per case, so that a diff of
// the file names the cases that changed.
func marshalGolden(f goldenFile) ([]byte, error) {
	var b strings.Builder
	note, _ := json.Marshal(f.Note)
	fmt.Fprintf(&b, "{\n \"note\": %s,\n \"sets\": {", note)
	for i, name := range slices.Sorted(maps.Keys(f.Sets)) {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "\n  %q: [", name)
		for j, c := range f.Sets[name] {
			line, err := json.Marshal(c)
			if err != nil {
				return nil, err
			}
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "\n   %s", line)
		}
		b.WriteString("\n  ]")
	}
	b.WriteString("\n }\n}\n")
	return []byte(b.String()), nil
}

func compareGolden(t *testing.T, want, got goldenCase) {
	t.Helper()
	if !slices.Equal(want.Prompt, got.Prompt) {
		t.Fatalf("%s: prompt %v, golden file has %v", got.Name, got.Prompt, want.Prompt)
	}
	if !slices.Equal(want.Greedy, got.Greedy) {
		t.Errorf("%s: greedy ids\n got %v\nwant %v", got.Name, got.Greedy, want.Greedy)
	}
	for mode, wp := range want.Logits {
		for pos, h := range wp {
			if g := got.Logits[mode][pos]; g != h {
				t.Errorf("%s: %s logits at position %s: sha256 %s, want %s", got.Name, mode, pos, short(g), short(h))
			}
		}
	}
	if len(want.Logits) != len(got.Logits) {
		t.Errorf("%s: %d modes, golden file has %d", got.Name, len(got.Logits), len(want.Logits))
	}
}

func short(h string) string { return h[:min(len(h), 16)] }

// runGolden runs one case: greedy decoding (prompt prefilled in one call,
// then width-1 steps) and the logits of seq = prompt+greedy decoded at
// widths 1 and 4, prefilled in one call, and prefilled asking for the last
// row only.
func runGolden(t *testing.T, m model.Backend, name string, prompt []int32, n int) goldenCase {
	t.Helper()
	ctx := context.Background()
	c := goldenCase{Name: name, Prompt: prompt, Logits: map[string]map[string]string{}}
	cache, err := kv.New(m.Config().KV, max(len(prompt), 4))
	if err != nil {
		t.Fatal(err)
	}
	r, err := m.Forward(ctx, prompt, 0, cache, model.Argmax|model.Last)
	if err != nil {
		t.Fatal(err)
	}
	cache.Commit(len(prompt))
	next := r.Argmax[0]
	for len(c.Greedy) < n {
		c.Greedy = append(c.Greedy, next)
		if r, err = m.Forward(ctx, []int32{next}, cache.Len(), cache, model.Argmax); err != nil {
			t.Fatal(err)
		}
		cache.Commit(1)
		next = r.Argmax[0]
	}
	seq := append(slices.Clone(prompt), c.Greedy...)
	positions := []int{0, len(prompt) - 1, len(seq) / 2, len(seq) - 1}
	record := func(mode string, rows [][]float32, at []int) {
		c.Logits[mode] = map[string]string{}
		for i, p := range at {
			c.Logits[mode][fmt.Sprint(p)] = hashLogits(rows[i])
		}
	}
	pick := func(rows [][]float32) [][]float32 {
		var out [][]float32
		for _, p := range positions {
			out = append(out, rows[p])
		}
		return out
	}
	record("w1", pick(decode(t, m, seq, 1, 4)), positions)
	record("w4", pick(decode(t, m, seq, 4, 4)), positions)
	pc, err := kv.New(m.Config().KV, len(seq))
	if err != nil {
		t.Fatal(err)
	}
	if r, err = m.Forward(ctx, seq, 0, pc, model.Logits); err != nil {
		t.Fatal(err)
	}
	record("prefill", pick(r.Logits), positions)
	pc.Rollback()
	if r, err = m.Forward(ctx, seq, 0, pc, model.Logits|model.Last); err != nil {
		t.Fatal(err)
	}
	record("prefill-last", r.Logits, []int{len(seq) - 1})
	return c
}

// hashLogits is the sha256 of a row's float32 bits, little-endian.
func hashLogits(row []float32) string {
	b := make([]byte, 4*len(row))
	for i, v := range row {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// goldenKernelSet is a kernel set the golden test runs: enable switches
// the package to it and returns what switches it back. same, when set,
// names the recorded set whose outputs this one must equal bit for bit
// (an arm64 set and its amd64 twin): such a set is never recorded itself.
type goldenKernelSet struct {
	name   string
	same   string
	enable func() (restore func())
}

// kernelSetName names a set by architecture and feature flags.
func kernelSetName(parts ...string) string {
	return strings.Join(append([]string{runtime.GOARCH}, parts...), "-")
}

// TestGoldenSetsAgree: the recorded kernel sets share one canonical order
// on every case: amd64-vnni and amd64-avx2 (the two forms of the integer
// row kernels) and amd64-go (the Go loops, which since go.3 compute the
// same canonical integer sums, with the float kernels on; every case but
// those of the simdOnly models) give the same greedy ids and logits. So the arm64 sets, checked against these records,
// are held to one computation.
func TestGoldenSetsAgree(t *testing.T) {
	data, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var f goldenFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	index := func(set string) map[string]goldenCase {
		m := map[string]goldenCase{}
		for _, c := range f.Sets[set] {
			m[c.Name] = c
		}
		return m
	}
	vnni, avx2, gos := index("amd64-vnni"), index("amd64-avx2"), index("amd64-go")
	simdOnly := func(name string) bool { // a case of a model the Go-loop set skips
		for _, gm := range goldenModels() {
			if gm.simdOnly && strings.HasPrefix(name, gm.name+"/") {
				return true
			}
		}
		return false
	}
	if len(vnni) == 0 || len(vnni) != len(avx2) {
		t.Fatalf("%s: %d, %d cases in amd64-vnni, amd64-avx2", goldenPath, len(vnni), len(avx2))
	}
	equal := func(a, b goldenCase) bool {
		return slices.Equal(a.Greedy, b.Greedy) && maps.EqualFunc(a.Logits, b.Logits, maps.Equal)
	}
	for name, c := range vnni {
		if !equal(c, avx2[name]) {
			t.Errorf("%s: amd64-vnni and amd64-avx2 differ", name)
		}
		if g, ok := gos[name]; !ok && !simdOnly(name) {
			t.Errorf("%s: not recorded for amd64-go", name)
		} else if ok && !equal(c, g) {
			t.Errorf("%s: amd64-vnni and amd64-go differ", name)
		}
	}
}
