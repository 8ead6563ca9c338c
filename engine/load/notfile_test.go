package load_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/load"
	"anechat/engine/model/mmap"
	"anechat/internal/backends"
	"anechat/internal/testres"
)

// TestNamedPipesAreRefused: a named pipe where a model file belongs (a
// .gguf, a directory's config.json, weights, tokenizer or chat template, a
// Core ML bundle's manifest.json or model_config.json) made Detect,
// Inspect and Open block forever (issue 21 part 2). Each now returns at
// once with an error naming the file as not a regular file.
func TestNamedPipesAreRefused(t *testing.T) {
	reg := backends.Registry()
	dir := t.TempDir()
	gemma := func(name, fifo string) func() string {
		return func() string {
			d := filepath.Join(dir, name)
			if err := os.CopyFS(d, os.DirFS(gemmaFixture(t, "model"))); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(d, fifo))
			testres.Mkfifo(t, filepath.Join(d, fifo))
			return filepath.Join(d, fifo)
		}
	}
	cases := []struct {
		name string
		make func() string // makes the model, returns the pipe
		path string        // the model, under dir
	}{
		{"gguf", func() string { p := filepath.Join(dir, "evil.gguf"); testres.Mkfifo(t, p); return p }, "evil.gguf"},
		{"config.json", gemma("cfg", "config.json"), "cfg"},
		{"weights", gemma("weights", "model.safetensors"), "weights"},
		{"tokenizer.json", gemma("tok", "tokenizer.json"), "tok"},
		{"chat template", gemma("tmpl", "chat_template.jinja"), "tmpl"},
		{"bundle manifest", func() string {
			d := filepath.Join(dir, "bundle")
			os.Mkdir(d, 0o755)
			os.Mkdir(filepath.Join(d, "chunk_0.mlpackage"), 0o755)
			os.WriteFile(filepath.Join(d, "embed.q8"), make([]byte, 64), 0o644)
			testres.Mkfifo(t, filepath.Join(d, "manifest.json"))
			return filepath.Join(d, "manifest.json")
		}, "bundle"},
		{"published config", func() string {
			d := filepath.Join(dir, "published")
			os.Mkdir(d, 0o755)
			os.Mkdir(filepath.Join(d, "chunk1.mlmodelc"), 0o755)
			os.WriteFile(filepath.Join(d, "embed_tokens_q8.bin"), make([]byte, 64), 0o644)
			testres.Mkfifo(t, filepath.Join(d, "model_config.json"))
			return filepath.Join(d, "model_config.json")
		}, "published"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pipe := c.make()
			p := filepath.Join(dir, c.path)
			calls := map[string]func() error{
				"Detect":  func() error { _, err := load.Detect(p); return err },
				"Inspect": func() error { _, err := reg.Inspect(context.Background(), p); return err },
				"Open": func() error {
					m, err := reg.Open(context.Background(), p, load.Options{})
					if err == nil {
						m.Close()
					}
					return err
				},
			}
			for name, call := range calls {
				err := testres.Promptly(t, name+"("+p+")", call)
				if name == "Detect" && c.name == "tokenizer.json" || name == "Detect" && c.name == "chat template" {
					// Detect reads neither; Inspect and Open do.
					if err != nil {
						t.Errorf("Detect: %v", err)
					}
					continue
				}
				if !errors.Is(err, mmap.ErrNotRegular) || !strings.Contains(err.Error(), pipe+" is not a regular file (a named pipe)") {
					t.Errorf("%s: %v, want an error naming %s as a named pipe", name, err, pipe)
				}
			}
		})
	}
}
