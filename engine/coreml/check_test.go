package coreml

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/internal/testres"
)

// TestTableBytes: products of bundle shapes never wrap: the one that made
// 2^64 = 0 (16,777,216 layers x 32,768 hidden x 2 bytes x 2^15) is refused,
// as are non-positive factors; real sizes pass.
func TestTableBytes(t *testing.T) {
	for _, c := range []struct {
		dims []int
		want int64
		ok   bool
	}{
		{[]int{262144, 35, 256}, 262144 * 35 * 256, true}, // Gemma 4 E2B's per-layer table
		{[]int{512, 64, 1}, 32768, true},
		{[]int{1 << 24, 1 << 24, 1 << 15, 2}, 0, false}, // 2^64
		{[]int{65536, 1 << 48}, 0, false},
		{[]int{1 << 46, 1}, 1 << 46, true},
		{[]int{1<<46 + 1}, 0, false},
		{[]int{512, 0}, 0, false},
		{[]int{-1, -1}, 0, false},
	} {
		if got, ok := tableBytes(c.dims...); got != c.want || ok != c.ok {
			t.Errorf("tableBytes(%v) = %d, %v; want %d, %v", c.dims, got, ok, c.want, c.ok)
		}
	}
}

// TestOpenBundleStaysInside: a file a manifest names must be inside the
// bundle with symbolic links followed (a link to a copy elsewhere, even one
// of the right size and sha256, is refused, naming the manifest's field);
// a link inside the bundle is fine. A sidecar or tokenizer that is a named
// pipe is refused at once.
func TestOpenBundleStaysInside(t *testing.T) {
	ctx := context.Background()
	dir := copyBundle(t, "gemma4-exact.bundle")
	os.Rename(filepath.Join(dir, "embed.q8"), filepath.Join(dir, "embed.real"))
	os.Symlink("embed.real", filepath.Join(dir, "embed.q8"))
	b, err := OpenBundle(ctx, dir, nil)
	if err != nil {
		t.Fatalf("a link inside the bundle: %v", err)
	}
	b.Close()
	out := filepath.Join(t.TempDir(), "embed.q8")
	os.Rename(filepath.Join(dir, "embed.real"), out)
	os.Remove(filepath.Join(dir, "embed.q8"))
	os.Symlink(out, filepath.Join(dir, "embed.q8"))
	if _, err := OpenBundle(ctx, dir, nil); !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), `sidecars.embed.data.file "embed.q8" is a symbolic link to `+out+", outside the bundle") {
		t.Errorf("a link outside the bundle: %v", err)
	}
	for _, name := range []string{"per_layer.scales.f16", "tokenizer.json"} {
		dir := copyBundle(t, "gemma4-exact.bundle")
		os.Remove(filepath.Join(dir, name))
		testres.Mkfifo(t, filepath.Join(dir, name))
		err := testres.Promptly(t, "CheckBundle", func() error { _, err := CheckBundle(ctx, dir); return err })
		if !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), name+" is not a regular file (a named pipe)") {
			t.Errorf("%s a named pipe: %v", name, err)
		}
	}
}

// TestReadManifestRefusesNames: every file name a manifest gives is a
// plain name inside the bundle, and source.files (which the reference
// executor joins to the checkpoint directory) local names: "..", absolute
// paths and separators are refused naming the field.
func TestReadManifestRefusesNames(t *testing.T) {
	for _, c := range []struct {
		edit func(m map[string]any)
		want string
	}{
		{func(m map[string]any) {
			m["source"].(map[string]any)["files"].([]any)[1].(map[string]any)["file"] = "../outside/secret.txt"
		}, `source.files[1].file "../outside/secret.txt"`},
		{func(m map[string]any) {
			m["source"].(map[string]any)["files"].([]any)[0].(map[string]any)["file"] = "/dev/zero"
		}, `source.files[0].file "/dev/zero"`},
		{func(m map[string]any) {
			m["sidecars"].(map[string]any)["per_layer"].(map[string]any)["scales"].(map[string]any)["file"] = "/etc/passwd"
		}, `sidecars.per_layer.scales.file "/etc/passwd"`},
		{func(m map[string]any) { m["tokenizer"].(map[string]any)["file"] = "../tokenizer.json" }, `file "../tokenizer.json"`},
		{func(m map[string]any) { m["chunks"].([]any)[0].(map[string]any)["package"] = "sub/chunk_0.mlpackage" }, `chunks[0].package "sub/chunk_0.mlpackage"`},
	} {
		dir := copyBundle(t, "gemma4-exact.bundle")
		editManifest(t, dir, c.edit)
		if _, err := ReadManifest(dir); !errors.Is(err, ErrBundle) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), ManifestName) {
			t.Errorf("%v, want an error naming %s and %s", err, ManifestName, c.want)
		}
	}
}

// FuzzReadPublished: no model_config.json and sidecar sizes, however odd,
// make ReadPublished or the tables it vouches for panic: when it accepts a
// bundle, its sidecars open and their first and last rows read.
func FuzzReadPublished(f *testing.F) {
	f.Add([]byte(fmt.Sprintf(`{"hidden_size":%d,"context_length":%d,"vocab_size":%d,"num_layers":%d,"per_layer_dim":%d}`, 8, 4, 16, 2, 4)), uint16(128), uint16(32), uint16(128))
	f.Add([]byte(`{"hidden_size":32768,"context_length":4,"vocab_size":65536,"num_layers":16777216,"per_layer_dim":16777216}`), uint16(0), uint16(0), uint16(0))
	f.Add([]byte(`{"hidden_size":1,"context_length":4,"vocab_size":1,"num_layers":1,"per_layer_dim":1}`), uint16(1), uint16(2), uint16(1))
	f.Fuzz(func(t *testing.T, cfg []byte, embed, scales, ple uint16) {
		dir := t.TempDir()
		files := map[string]int{
			"embed_tokens_q8.bin": int(embed), "embed_tokens_scales.bin": int(scales),
			"embed_tokens_per_layer_q8.bin": int(ple), "embed_tokens_per_layer_scales.bin": int(scales),
		}
		for n, size := range files {
			os.WriteFile(filepath.Join(dir, n), make([]byte, size), 0o644)
		}
		os.WriteFile(filepath.Join(dir, "model_config.json"), cfg, 0o644)
		os.Mkdir(filepath.Join(dir, "chunk1.mlmodelc"), 0o755)
		// The projection is sized from the config when that is small, so
		// that configs get past it to the tables.
		var c PublishedConfig
		if json.Unmarshal(cfg, &c) == nil {
			if n, ok := tableBytes(c.NumLayers, c.PerLayerDim, c.HiddenSize, 2); ok && n <= 1<<20 {
				os.WriteFile(filepath.Join(dir, "per_layer_projection.bin"), make([]byte, n), 0o644)
			}
		}
		for _, n := range []string{"cos_sliding.npy", "sin_sliding.npy", "cos_full.npy", "sin_full.npy"} {
			writeNPY(t, filepath.Join(dir, n), 4, 2)
		}
		p, err := ReadPublished(dir)
		if err != nil {
			if !errors.Is(err, ErrBundle) {
				t.Fatalf("%v does not wrap ErrBundle", err)
			}
			return
		}
		c = p.Config
		for _, s := range []struct {
			name       string
			rows, cols int
		}{{"embed_tokens", c.VocabSize, c.HiddenSize}, {"embed_tokens_per_layer", c.VocabSize, c.NumLayers * c.PerLayerDim}} {
			sc, err := OpenPublishedSidecar(dir, s.name, s.name+"_q8.bin", s.name+"_scales.bin", s.rows, s.cols, 1)
			if err != nil {
				t.Fatalf("ReadPublished accepted %s, OpenPublishedSidecar refuses: %v", s.name, err)
			}
			dst := make([]float32, s.cols)
			sc.Row(dst, 0)
			sc.Row(dst, s.rows-1)
			sc.Close()
		}
	})
}
