package load

import (
	"fmt"
	"os"
	"path/filepath"

	"anechat/engine/chat"
	"anechat/engine/model/gguf"
	"anechat/engine/tokenizer"
)

// loadChatSpec reads the model's own chat template: a GGUF file's
// tokenizer.chat_template, or a model directory's (or Core ML bundle's)
// chat_template.jinja / tokenizer_config.json. A model that ships none gives
// an empty spec (chat.ForModel then picks a built-in format).
func loadChatSpec(src Source, tok *tokenizer.Tokenizer) (chat.Spec, error) {
	if src.Format == GGUF {
		f, err := gguf.Open(src.Path)
		if err != nil {
			return chat.Spec{}, fmt.Errorf("load: %w", err)
		}
		defer f.Close()
		spec, err := chat.SpecFromGGUF(f, tok)
		if err != nil {
			return chat.Spec{}, fmt.Errorf("load: %w", err)
		}
		return spec, nil
	}
	if g := filepath.Join(src.Path, "tokenizer.gguf"); src.Format == CoreML {
		if _, err := os.Stat(filepath.Join(src.Path, "tokenizer.json")); err != nil {
			if _, err := os.Stat(g); err == nil {
				// A bundle of a GGUF model keeps the template in its
				// tokenizer.gguf, with the rest of the tokenizer metadata.
				f, err := gguf.Open(g)
				if err != nil {
					return chat.Spec{}, fmt.Errorf("load: %w", err)
				}
				defer f.Close()
				spec, err := chat.SpecFromGGUF(f, tok)
				if err != nil {
					return chat.Spec{}, fmt.Errorf("load: %w", err)
				}
				return spec, nil
			}
		}
	}
	spec, err := chat.SpecFromDir(src.Path)
	if err != nil {
		return chat.Spec{}, fmt.Errorf("load: %s: %w", src.Path, err)
	}
	return spec, nil
}
