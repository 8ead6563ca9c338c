package tokenizer

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"anechat/engine/model/gguf"
	"anechat/internal/testres"
)

// TestTokenBytes: on a byte-level vocabulary (SmolLM2), a SentencePiece one
// with byte fallback (stories260K's GGUF) and a Metaspace one with byte
// fallback (Gemma 3's tokenizer.json), the tokens of a text with accents,
// CJK and an emoji give, joined, the bytes Decode writes (but for the
// leading space Decode strips), some of them parts of a character; a
// special token gives its spelling; an id outside gives nil.
func TestTokenBytes(t *testing.T) {
	open := map[string]func(t *testing.T) *Tokenizer{
		"smollm2": func(t *testing.T) *Tokenizer { return ggufTokenizer(t, testres.SmolLM2GGUF(t)) },
		"stories": func(t *testing.T) *Tokenizer { return ggufTokenizer(t, testres.Stories(t)) },
		"gemma3": func(t *testing.T) *Tokenizer {
			tok, err := Load(testres.Gemma3Tokenizer(t))
			if err != nil {
				t.Fatal(err)
			}
			return tok
		},
	}
	for name, fn := range open {
		t.Run(name, func(t *testing.T) {
			tok := fn(t)
			text := "Once upon a time, héllo wörld: 日本語 🙂 𓂀ꙮ𝔘 ok\n\nend"
			ids := tok.Encode(text)
			var joined []byte
			partial := 0
			for _, id := range ids {
				b := tok.TokenBytes(id)
				if !utf8.Valid(b) {
					partial++
				}
				joined = append(joined, b...)
			}
			dec := tok.Decode(ids)
			if string(joined) != dec && strings.TrimPrefix(string(joined), " ") != dec {
				t.Fatalf("joined token bytes %q, want Decode's %q", joined, dec)
			}
			if partial == 0 {
				t.Fatalf("no token of %q holds part of a character: the case is not exercised", text)
			}
			if tok.TokenBytes(-1) != nil || tok.TokenBytes(int32(tok.VocabSize())) != nil {
				t.Fatal("an id outside the vocabulary has bytes")
			}
			for _, id := range tok.EOS() {
				if b := tok.TokenBytes(id); !bytes.Equal(b, []byte(tok.Piece(id))) {
					t.Fatalf("EOS %d: %q, want its spelling %q", id, b, tok.Piece(id))
				}
			}
		})
	}
}

func ggufTokenizer(t *testing.T, path string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
