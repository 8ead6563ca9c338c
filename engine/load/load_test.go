package load_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/load"
	"anechat/engine/model/gguf"
	"anechat/internal/backends"
	"anechat/internal/testres"
)

func gemmaFixture(t *testing.T, name string) string {
	return filepath.Join(testres.RepoRoot(t), "engine", "cpu", "testdata", "gemma4", name)
}

func TestDetect(t *testing.T) {
	src, err := load.Detect(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	if src.Format != load.GGUF || src.Arch != "llama" || src.Name != "stories260K" || src.Quant != "F32" ||
		len(src.Files) != 1 || src.SizeBytes != 1185376 || !strings.HasPrefix(src.Fingerprint, load.FingerprintVersion+":") {
		t.Errorf("stories260K detected as %+v", src)
	}
	// A file's declared mix, not the type of most of its bytes: Gemma 3
	// 270M Q4_K_M keeps its large embedding in another type.
	for path, want := range map[string]string{testres.Gemma3GGUF(t): "Q4_K_M", testres.SmolLM2GGUF(t): "Q4_1"} {
		if src, err := load.Detect(path); err != nil || src.Quant != want {
			t.Errorf("%s: quant %q (%v), want %q", filepath.Base(path), src.Quant, err, want)
		}
	}
	for _, name := range []string{"model", "model-bf16"} {
		src, err := load.Detect(gemmaFixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		wantQuant := map[string]string{"model": "F32", "model-bf16": "BF16"}[name]
		if src.Format != load.Safetensors || src.Arch != "gemma4_text" || src.Name != name || src.Quant != wantQuant ||
			len(src.Files) != 2 || filepath.Base(src.Files[0]) != "config.json" {
			t.Errorf("gemma4 fixture %s detected as %+v", name, src)
		}
	}

	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	os.WriteFile(readme, []byte("hello"), 0o644)
	os.Mkdir(filepath.Join(dir, "empty"), 0o755)
	for _, p := range []string{readme, filepath.Join(dir, "empty")} {
		if _, err := load.Detect(p); !errors.Is(err, load.ErrNotModel) {
			t.Errorf("%s: %v, want ErrNotModel", p, err)
		}
	}
	if _, err := load.Detect(filepath.Join(dir, "missing.gguf")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	junk := filepath.Join(dir, "junk.gguf")
	os.WriteFile(junk, []byte("GGUF but not really"), 0o644)
	if _, err := load.Detect(junk); err == nil || errors.Is(err, load.ErrNotModel) || !strings.Contains(err.Error(), "junk.gguf") {
		t.Errorf("damaged GGUF: %v, want an error naming it", err)
	}
}

// TestOneIdentity: the fingerprint Detect computes is the one the backend
// reports after Open and the one Inspect (the Models page, doctor) lists,
// for every format the build opens.
func TestOneIdentity(t *testing.T) {
	reg := backends.Registry()
	// (The BF16 fixture holds weights only, no tokenizer: it does not open
	// as a chat model, and Inspect says so.)
	if _, err := reg.Inspect(context.Background(), gemmaFixture(t, "model-bf16")); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("model without a tokenizer: %v", err)
	}
	for _, p := range []string{testres.Stories(t), gemmaFixture(t, "model")} {
		src, err := load.Detect(p)
		if err != nil {
			t.Fatal(err)
		}
		info, err := reg.Inspect(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := reg.Open(context.Background(), p, load.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := m.Backend.Config().Fingerprint
		m.Close()
		if got != src.Fingerprint || info.Fingerprint != src.Fingerprint || info.Config.Fingerprint != src.Fingerprint {
			t.Errorf("%s: detect %s, inspect %s / %s, backend %s", p, src.Fingerprint, info.Fingerprint, info.Config.Fingerprint, got)
		}
		if info.Backend != "cpu" || info.Config.ContextLen <= 0 || info.Config.VocabSize <= 0 || info.TokenizerFingerprint == "" {
			t.Errorf("%s: inspect %+v", p, info)
		}
	}
}

// TestInspectRefusesWhatOpenRefuses: a model whose metadata the loader
// rejects is a problem for Inspect too (issue 11 item 8: doctor listed
// these as healthy), with an error that names the file and the field.
func TestInspectRefusesWhatOpenRefuses(t *testing.T) {
	reg := backends.Registry()
	dir := t.TempDir()
	stories := testres.Stories(t)
	cases := []struct {
		name string
		set  map[string]any
		drop []string
		want []string
	}{
		{"llamb", map[string]any{"general.architecture": "llamb"}, nil, []string{"llamb", "not supported"}},
		{"context0", map[string]any{"llama.context_length": uint32(0)}, nil, []string{"llama.context_length"}},
		{"heads0", map[string]any{"llama.attention.head_count": uint32(0)}, nil, []string{"llama.attention.head_count"}},
		{"notokens", map[string]any{"tokenizer.ggml.tokens": nil}, nil, []string{"tokenizer.ggml.tokens"}},
		{"notensor", nil, []string{"blk.3.ffn_down.weight"}, []string{"blk.3.ffn_down.weight"}},
	}
	for _, c := range cases {
		p := filepath.Join(dir, c.name+".gguf")
		if err := gguf.EditFile(stories, p, c.set, c.drop...); err != nil {
			t.Fatal(err)
		}
		_, ierr := reg.Inspect(context.Background(), p)
		_, oerr := reg.Open(context.Background(), p, load.Options{})
		for _, err := range []error{ierr, oerr} {
			if err == nil {
				t.Errorf("%s: accepted", c.name)
				continue
			}
			for _, w := range append(c.want, p) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %v, want it to name %q", c.name, err, w)
				}
			}
		}
	}
	// A truncated file names itself and a tensor.
	data, _ := os.ReadFile(stories)
	trunc := filepath.Join(dir, "trunc.gguf")
	os.WriteFile(trunc, data[:len(data)/2], 0o644)
	if _, err := reg.Inspect(context.Background(), trunc); err == nil || !strings.Contains(err.Error(), "trunc.gguf") || !strings.Contains(err.Error(), "tensor") {
		t.Errorf("truncated: %v", err)
	}
	// A gemma4 directory whose config.json disagrees with its weights.
	bad := filepath.Join(dir, "gemma")
	os.Mkdir(bad, 0o755)
	for _, f := range []string{"model.safetensors", "tokenizer.json"} {
		b, _ := os.ReadFile(filepath.Join(gemmaFixture(t, "model"), f))
		os.WriteFile(filepath.Join(bad, f), b, 0o644)
	}
	cfg, _ := os.ReadFile(filepath.Join(gemmaFixture(t, "model"), "config.json"))
	os.WriteFile(filepath.Join(bad, "config.json"), []byte(strings.Replace(string(cfg), `"hidden_size": 64`, `"hidden_size": 96`, 1)), 0o644)
	if !strings.Contains(string(cfg), `"hidden_size": 64`) {
		t.Fatalf("fixture config has no \"hidden_size\": 64: %s", cfg)
	}
	if _, err := reg.Inspect(context.Background(), bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("gemma4 with a wrong hidden_size: %v", err)
	}
}

func TestUnsupported(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mamba.gguf")
	if err := gguf.EditFile(testres.Stories(t), p, map[string]any{"general.architecture": "mamba"}); err != nil {
		t.Fatal(err)
	}
	_, err := backends.Registry().Open(context.Background(), p, load.Options{})
	if !errors.Is(err, load.ErrUnsupported) || !strings.Contains(err.Error(), `"mamba"`) || !strings.Contains(err.Error(), "cpu:") {
		t.Errorf("mamba: %v, want ErrUnsupported naming the arch and why the cpu backend refused", err)
	}
	if _, err := load.NewRegistry().Open(context.Background(), testres.Stories(t), load.Options{}); !errors.Is(err, load.ErrUnsupported) {
		t.Errorf("empty registry: %v", err)
	}
}
