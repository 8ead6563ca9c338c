package engine

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"anechat/engine/cpu"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/tokenizer"
)

// OpenBackend loads the model at path on the CPU backend, deciding by file
// type: a .gguf file is read with engine/model/gguf (architecture llama); a
// directory with config.json is a Hugging Face safetensors model (gemma4).
// The backend keeps the weights mapped: close it (it implements io.Closer)
// when done. Config().Fingerprint is model.FingerprintFiles of the weights.
func OpenBackend(path string) (model.Backend, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("engine: open model: %w", err)
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, "config.json")); err != nil {
			return nil, fmt.Errorf("engine: open model %s: a model directory needs config.json: %w", path, err)
		}
		// A Hugging Face safetensors directory: gemma4 (the loader checks
		// config.json's model_type and fails naming it otherwise).
		m, err := cpu.LoadGemma4(path, nil)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	if !strings.EqualFold(filepath.Ext(path), ".gguf") {
		return nil, fmt.Errorf("engine: open model %s: unknown model format (want a .gguf file or a directory with config.json)", path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	arch, err := f.String("general.architecture")
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("engine: open model: %w", err)
	}
	switch arch {
	case "llama":
		m, err := cpu.LoadLlama(f, nil)
		if err != nil {
			f.Close()
			return nil, err
		}
		fp, err := model.FingerprintFiles(path)
		if err != nil {
			f.Close()
			return nil, err
		}
		m.SetFingerprint(fp)
		return &ggufBackend{Llama: m, file: f}, nil
	}
	f.Close()
	return nil, fmt.Errorf("engine: open model %s: architecture %q is not supported (want llama)", path, arch)
}

// ggufBackend is a CPU model plus the GGUF file it maps.
type ggufBackend struct {
	*cpu.Llama
	file *gguf.File
}

// GGUF returns the file the weights come from (the tokenizer reads it).
func (b *ggufBackend) GGUF() *gguf.File { return b.file }

// Close ends the model's workers and unmaps the weights.
func (b *ggufBackend) Close() error {
	b.Llama.Close()
	return b.file.Close()
}

// Open loads the model at path (see OpenBackend) and its tokenizer: the GGUF
// file's tokenizer.ggml.* metadata, or tokenizer.json in a model directory.
// Close the backend (io.Closer) when done.
func Open(path string) (model.Backend, *tokenizer.Tokenizer, error) {
	b, err := OpenBackend(path)
	if err != nil {
		return nil, nil, err
	}
	var tok *tokenizer.Tokenizer
	if g, ok := b.(interface{ GGUF() *gguf.File }); ok {
		tok, err = tokenizer.FromGGUF(g.GGUF())
	} else {
		tok, err = tokenizer.Load(filepath.Join(path, "tokenizer.json"))
	}
	if err != nil {
		if c, ok := b.(io.Closer); ok {
			c.Close()
		}
		return nil, nil, fmt.Errorf("engine: open %s: %w", path, err)
	}
	if tok.VocabSize() > b.Config().VocabSize {
		if c, ok := b.(io.Closer); ok {
			c.Close()
		}
		return nil, nil, fmt.Errorf("engine: open %s: the tokenizer has %d tokens, the model only %d logits", path, tok.VocabSize(), b.Config().VocabSize)
	}
	return b, tok, nil
}

// RawPrompt is the prompt of a raw (template-free) generation: BOS if the
// tokenizer adds one, then the encoded text (HF add_special_tokens=True).
func RawPrompt(tok *tokenizer.Tokenizer, text string) []int32 {
	var ids []int32
	if tok.AddsBOS() {
		ids = append(ids, tok.BOS())
	}
	return append(ids, tok.Encode(text)...)
}
