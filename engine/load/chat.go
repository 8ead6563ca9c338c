package load

import (
	"fmt"

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
	spec, err := chat.SpecFromDir(src.Path)
	if err != nil {
		return chat.Spec{}, fmt.Errorf("load: %s: %w", src.Path, err)
	}
	return spec, nil
}
