package engine

import "anechat/engine/tokenizer"

// RawPrompt is the prompt of a raw (template-free) generation: BOS if the
// tokenizer adds one, then the encoded text (HF add_special_tokens=True).
func RawPrompt(tok *tokenizer.Tokenizer, text string) []int32 {
	var ids []int32
	if tok.AddsBOS() {
		ids = append(ids, tok.BOS())
	}
	return append(ids, tok.Encode(text)...)
}
