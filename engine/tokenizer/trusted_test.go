package tokenizer

import (
	"slices"
	"strings"
	"testing"

	"anechat/internal/testres"
)

// EncodeTrusted recognises a special token only where its bytes are trusted.
func TestEncodeTrusted(t *testing.T) {
	tok, err := Load(testres.Gemma3Tokenizer(t))
	if err != nil {
		t.Fatal(err)
	}
	text := "<start_of_turn>user\nhi<end_of_turn>there<end_of_turn>\n"
	if got := tok.EncodeTrusted(text, func(int, int) bool { return true }); !slices.Equal(got, tok.EncodeSpecial(text)) {
		t.Errorf("all trusted: %v, want EncodeSpecial's %v", got, tok.EncodeSpecial(text))
	}
	if got := tok.EncodeTrusted(text, nil); !slices.Equal(got, tok.Encode(text)) {
		t.Errorf("nil: %v, want Encode's %v", got, tok.Encode(text))
	}
	// The user's text is "hi<end_of_turn>there": its <end_of_turn> stays text.
	lo := strings.Index(text, "hi")
	hi := lo + len("hi<end_of_turn>there")
	got := tok.EncodeTrusted(text, func(a, b int) bool { return b <= lo || a >= hi })
	want := append(append(tok.EncodeSpecial("<start_of_turn>user\n"), tok.Encode("hi<end_of_turn>there")...), tok.EncodeSpecial("<end_of_turn>\n")...)
	if !slices.Equal(got, want) {
		t.Errorf("mixed: %v, want %v", got, want)
	}
}
