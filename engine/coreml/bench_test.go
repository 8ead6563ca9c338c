package coreml

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"anechat/engine/arch/gemma4"
	"anechat/engine/coreml/mlcore"
	"anechat/engine/kv"
	"anechat/engine/model"
)

// e2bBundle writes a bundle directory with the manifest of Gemma 4 E2B's
// geometry (35 layers, context 2048, window 512, K=8, N=64, the shared
// doc's chunks 0-7, 8-24, 25-34) and sidecars of vocab rows (the real
// widths), and empty package directories: enough for the host side, which
// never reads the packages.
func e2bBundle(tb testing.TB, vocab int) string {
	tb.Helper()
	o := gemma4.E2B(35, vocab)
	dir := tb.TempDir()
	m := Manifest{Format: Format, FormatVersion: FormatVersion, Architecture: "gemma4",
		Converter: ConverterInfo{Weights: "fp16", Sidecars: "int8"},
		Arch: ArchInfo{Arch: "gemma4", Family: "gemma4", Vocab: vocab, Hidden: o.Hidden, Heads: o.Heads, Eps: float64(o.Eps),
			Context: o.Context, Window: o.Window, Softcap: float64(o.Softcap), PLEDim: o.PLEDim, PLEVocab: o.PLEVocab,
			BOS: int(o.BOS), EOS: []int{1}, AttnScale: 1, EmbedScale: float64(o.EmbedScale()),
			Ropes: map[string]RopeInfo{}},
		Geometry:  GeometryInfo{Context: 2048, SlidingSlots: 512 + 64, GenerateWidth: 8, PrefillWidth: 64, ArgmaxBlock: vocab, RopeLayout: "halves"},
		Tokenizer: TokenizerInfo{Kind: "tokenizer.json", File: "tokenizer.json"},
		Sidecars:  map[string]SidecarInfo{}}
	for _, l := range o.Layers {
		kind := "full"
		if l.Sliding {
			kind = "sliding"
		}
		m.Arch.Layers = append(m.Arch.Layers, LayerInfo{Kind: kind, HeadDim: l.HeadDim, KVHeads: l.KVHeads, Source: l.Source, FFN: l.FFN, Rope: kind})
		m.Arch.Ropes[kind] = RopeInfo{HeadDim: l.HeadDim, Theta: l.RopeTheta, Pairs: l.RopePairs, FreqDim: l.HeadDim, Layout: "halves", Angle: "f32"}
	}
	write := func(name string, data []byte) string {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			tb.Fatal(err)
		}
		s := sha256.Sum256(data)
		return hex.EncodeToString(s[:])
	}
	m.Tokenizer.SHA256 = write("tokenizer.json", []byte("{}"))
	for _, t := range []struct {
		name  string
		cols  int
		scale float64
	}{{"embed", o.Hidden, float64(o.EmbedScale())}, {"per_layer", 35 * o.PLEDim, float64(o.PLEScales().Emb)}} {
		q := make([]byte, vocab*t.cols)
		for i := range q {
			q[i] = byte(i * 7)
		}
		sc := make([]byte, 2*vocab)
		for i := range vocab {
			sc[2*i], sc[2*i+1] = 0x00, 0x20 // fp16 0.0078125
		}
		m.Sidecars[t.name] = SidecarInfo{Rows: vocab, Cols: t.cols, ValueScale: t.scale,
			Data:   FileInfo{File: t.name + ".q8", DType: "int8", SHA256: write(t.name+".q8", q)},
			Scales: &FileInfo{File: t.name + ".scales.f16", DType: "float16", SHA256: write(t.name+".scales.f16", sc)}}
	}
	for j, r := range [][2]int{{0, 8}, {8, 25}, {25, 35}} {
		pkg := fmt.Sprintf("chunk_%d.mlpackage", j)
		os.MkdirAll(filepath.Join(dir, pkg), 0o755)
		os.WriteFile(filepath.Join(dir, pkg, "Manifest.json"), []byte("{}"), 0o644)
		m.Chunks = append(m.Chunks, ChunkInfo{Index: j, Package: pkg, Layers: r})
	}
	for j := range m.Chunks {
		for _, kind := range m.kinds(j) {
			width := 8
			if kind == KindPrefill {
				width = 64
			}
			ins, outs := m.ExpectedIO(j, kind)
			m.Chunks[j].Functions = append(m.Chunks[j].Functions, FunctionInfo{Name: fmt.Sprint(kind, "_", width), Kind: kind, Width: width, Inputs: ins, Outputs: outs})
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	write(ManifestName, raw)
	return dir
}

// BenchmarkE2BHostCall is the host side's cost per generation call on
// Gemma 4 E2B's geometry at a position late in a 2048 context (cache
// tensors of every owning layer rebuilt from the kv.Cache, masks,
// placement, RoPE and sidecar rows, new rows written back), with an executor
// that does nothing: what Core ML's call must be compared with.
func BenchmarkE2BHostCall(b *testing.B) {
	for _, start := range []int{256, 2000} {
		b.Run(fmt.Sprint("pos", start), func(b *testing.B) {
			dir := e2bBundle(b, 256)
			bun, err := OpenBundle(context.Background(), dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			be, err := NewModel(bun, &recorder{dt: mlcore.Float16, noCopy: true}, "bench")
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			cache, err := kv.New(be.Config().KV, 64)
			if err != nil {
				b.Fatal(err)
			}
			if err := cache.Restore(start); err != nil {
				b.Fatal(err)
			}
			tokens := []int32{1, 2, 3, 4, 5, 6, 7, 8}
			b.ResetTimer()
			for range b.N {
				if _, err := be.Forward(context.Background(), tokens, start, cache, model.Argmax); err != nil {
					b.Fatal(err)
				}
				cache.Rollback()
			}
		})
	}
}
