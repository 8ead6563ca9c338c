package published

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/coreml"
	"anechat/internal/testres"
)

// TestReadPublishedRefuses: ReadPublished checks what a machine without
// Core ML can (it is what `doctor --bundle` runs there): absurd config
// values and the sizes they imply, files that are not regular, short
// sidecars and RoPE tables, a chunk that is not a directory. Each error
// wraps coreml.ErrBundle and names the file and the field.
func TestReadPublishedRefuses(t *testing.T) {
	setConfig := func(dir, from, to string) {
		p := filepath.Join(dir, "model_config.json")
		raw, _ := os.ReadFile(p)
		if !strings.Contains(string(raw), from) {
			t.Fatalf("model_config.json lacks %q", from)
		}
		os.WriteFile(p, []byte(strings.Replace(string(raw), from, to, 1)), 0o644)
	}
	fifo := func(dir, name string) {
		os.Remove(filepath.Join(dir, name))
		testres.Mkfifo(t, filepath.Join(dir, name))
	}
	cases := []struct {
		name   string
		damage func(dir string)
		want   []string
	}{
		{"16,777,216 layers", func(dir string) {
			setConfig(dir, fmt.Sprintf(`"num_layers":%d`, pgL), `"num_layers":16777216`)
		}, []string{"model_config.json", "num_layers = 16777216", "out of range"}},
		{"products past any file", func(dir string) {
			setConfig(dir, fmt.Sprintf(`"vocab_size":%d`, pgV), `"vocab_size":16777216`)
			setConfig(dir, fmt.Sprintf(`"per_layer_dim":%d`, pgP), `"per_layer_dim":16777216`)
		}, []string{"model_config.json", "vocab_size x num_layers x per_layer_dim", "embed_tokens_per_layer_q8.bin"}},
		{"empty sidecar", func(dir string) { os.Truncate(filepath.Join(dir, "per_layer_projection.bin"), 0) },
			[]string{"per_layer_projection.bin is 0 bytes", "num_layers x per_layer_dim x hidden_size"}},
		{"config over the cap", func(dir string) {
			os.WriteFile(filepath.Join(dir, "model_config.json"), make([]byte, 4<<20+1), 0o644)
		}, []string{"model_config.json", "more than the"}},
		{"config is a named pipe", func(dir string) { fifo(dir, "model_config.json") }, []string{"model_config.json", "named pipe"}},
		{"sidecar is a named pipe", func(dir string) { fifo(dir, "embed_tokens_scales.bin") }, []string{"embed_tokens_scales.bin", "named pipe"}},
		{"RoPE table is a named pipe", func(dir string) { fifo(dir, "cos_full.npy") }, []string{"cos_full.npy", "named pipe"}},
		{"tokenizer is a named pipe", func(dir string) { fifo(dir, "tokenizer.json") }, []string{"tokenizer.json", "named pipe"}},
		{"RoPE table with extra bytes", func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, "sin_sliding.npy"), os.O_APPEND|os.O_WRONLY, 0)
			f.Write([]byte{0, 0})
			f.Close()
		}, []string{"sin_sliding.npy", "data bytes for shape"}},
		{"RoPE table of int32", func(dir string) {
			writeNPYData(t, filepath.Join(dir, "cos_sliding.npy"), make([]uint16, pgCtx*pgHdS), pgCtx, pgHdS)
			p := filepath.Join(dir, "cos_sliding.npy")
			raw, _ := os.ReadFile(p)
			os.WriteFile(p, []byte(strings.Replace(string(raw), "'<f2'", "'<i2'", 1)), 0o644)
		}, []string{"cos_sliding.npy", "<i2"}},
		{"RoPE table with a huge shape", func(dir string) {
			writeNPYData(t, filepath.Join(dir, "cos_full.npy"), nil, 1<<62, 4)
		}, []string{"cos_full.npy", "0 data bytes for shape [4611686018427387904 4]"}},
		{"chunk is a file", func(dir string) {
			os.RemoveAll(filepath.Join(dir, "chunk2.mlmodelc"))
			os.WriteFile(filepath.Join(dir, "chunk2.mlmodelc"), nil, 0o644)
		}, []string{"chunk2.mlmodelc is not a directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := fixture(t)
			os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte("{}"), 0o644)
			if _, err := coreml.ReadPublished(dir); err != nil {
				t.Fatalf("the fixture: %v", err)
			}
			c.damage(dir)
			err := testres.Promptly(t, "CheckBundle", func() error { _, err := coreml.CheckBundle(context.Background(), dir); return err })
			if !errors.Is(err, coreml.ErrBundle) {
				t.Fatalf("CheckBundle: %v, want an coreml.ErrBundle", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}
