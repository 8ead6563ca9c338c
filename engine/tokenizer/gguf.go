package tokenizer

import (
	"errors"
	"fmt"

	"anechat/engine/model/gguf"
)

// FromGGUF builds the tokenizer described by a GGUF file's tokenizer.ggml.*
// metadata (tokenizer.ggml.model = llama, gpt2 or gemma4).
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := VocabFromGGUF(f)
	if err != nil {
		return nil, err
	}
	return FromVocab(v)
}

// VocabFromGGUF reads the tokenizer.ggml.* metadata into a Vocab.
func VocabFromGGUF(f *gguf.File) (Vocab, error) {
	v := Vocab{Source: f.Path(), BOS: -1, EOS: -1, EOT: -1, UNK: -1}
	wrap := func(err error) error {
		return fmt.Errorf("tokenizer %s: %w", f.Path(), err)
	}
	var err error
	if v.Model, err = f.String("tokenizer.ggml.model"); err != nil {
		return v, wrap(err)
	}
	if v.Tokens, err = f.Strings("tokenizer.ggml.tokens"); err != nil {
		return v, wrap(err)
	}
	optional := func(err error) error {
		if errors.Is(err, gguf.ErrMissing) {
			return nil
		}
		return err
	}
	if v.Types, err = f.Int32s("tokenizer.ggml.token_type"); optional(err) != nil {
		return v, wrap(err)
	}
	if v.Model == "llama" {
		if v.Scores, err = f.Float32s("tokenizer.ggml.scores"); err != nil {
			return v, wrap(err)
		}
	}
	if v.Model == "gpt2" || v.Model == "gemma4" {
		if v.Merges, err = f.Strings("tokenizer.ggml.merges"); err != nil {
			return v, wrap(err)
		}
		if v.Pre, err = f.String("tokenizer.ggml.pre"); optional(err) != nil {
			return v, wrap(err)
		}
	}
	ids := []struct {
		key string
		dst *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
	}
	// An id the vocabulary does not have is damage, not "none" (the key
	// absent, or llama.cpp's -1): ignoring it would drop BOS, or the id
	// that ends a reply.
	for _, k := range ids {
		if *k.dst, err = f.TokenID(k.key, len(v.Tokens)); err != nil {
			return v, wrap(err)
		}
	}
	flags := []struct {
		key string
		dst **bool
	}{
		{"tokenizer.ggml.add_bos_token", &v.AddBOS},
		{"tokenizer.ggml.add_space_prefix", &v.AddSpacePrefix},
	}
	for _, k := range flags {
		b, err := f.Bool(k.key)
		if optional(err) != nil {
			return v, wrap(err)
		}
		if err == nil {
			*k.dst = &b
		}
	}
	return v, nil
}
