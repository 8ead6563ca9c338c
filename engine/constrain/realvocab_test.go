package constrain

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"anechat/engine/model/gguf"
	"anechat/engine/tokenizer"
	"anechat/internal/testres"
)

var vocabs sync.Map // path -> *loaded

type loaded struct {
	once sync.Once
	tok  *tokenizer.Tokenizer
	v    *Vocab
	err  error
}

// realVocab loads a GGUF's tokenizer and its Vocab once per test binary.
func realVocab(tb testing.TB, path string) (*tokenizer.Tokenizer, *Vocab) {
	tb.Helper()
	l, _ := vocabs.LoadOrStore(path, &loaded{})
	ld := l.(*loaded)
	ld.once.Do(func() {
		f, err := gguf.Open(path)
		if err != nil {
			ld.err = err
			return
		}
		defer f.Close()
		if ld.tok, ld.err = tokenizer.FromGGUF(f); ld.err == nil {
			ld.v = NewVocab(ld.tok)
		}
	})
	if ld.err != nil {
		tb.Fatal(ld.err)
	}
	return ld.tok, ld.v
}

// TokenBytes spells what Decode writes, token by token, for byte-level BPE
// (SmolLM2), SentencePiece with byte fallback (Gemma 3) and llama SPM
// (stories260K): the trie holds the text the matcher checks.
func TestTokenBytesSpellDecode(t *testing.T) {
	texts := []string{`{"name": "Zoë", "age": 42, "tags": ["日本", "😀"]}`, "plain text\n\twith  spaces", `{"a":[1,2.5e-3,null,true]}`}
	for _, path := range []string{testres.Stories(t), testres.SmolLM2GGUF(t), testres.Gemma3GGUF(t)} {
		tok, _ := realVocab(t, path)
		for _, text := range texts {
			ids := tok.Encode(text)
			var b []byte
			for _, id := range ids {
				tb := tok.TokenBytes(id)
				if tok.IsSpecial(id) || tb == nil {
					t.Fatalf("%s: id %d of %q has no text bytes", path, id, text)
				}
				b = append(b, tb...)
			}
			dec := tok.Decode(ids)
			if got := string(b); got != dec && strings.TrimPrefix(got, " ") != dec {
				t.Errorf("%s: bytes %q, Decode %q", path, got, dec)
			}
		}
		for _, id := range tok.EOS() {
			if !tok.IsSpecial(id) {
				t.Errorf("%s: EOS %d is not special", path, id)
			}
		}
	}
}

// On stories260K's whole vocabulary, the mask equals what Advance accepts,
// token by token, on random walks; finished walks validate.
func TestStoriesMaskEqualsAdvance(t *testing.T) {
	_, v := realVocab(t, testres.Stories(t))
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sc := range []string{personSchema, `{"type":"object","properties":{"k":{"enum":["once","upon","a time"]},"v":{"type":"array","items":{"type":"integer"}}},"required":["k","v"]}`} {
		m, err := NewMatcher(mustSchema(t, sc), v)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			text, ok := randomWalk(t, m, rng, 300, 1000)
			if ok {
				if err := Validate(sc, text); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

// The same on SmolLM2's 49k byte-level vocabulary (partial UTF-8 tokens),
// checking every token at a few steps and walking further on the mask.
func TestSmolLM2MaskEqualsAdvance(t *testing.T) {
	_, v := realVocab(t, testres.SmolLM2GGUF(t))
	m, err := NewMatcher(mustSchema(t, personSchema), v)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	done := 0
	for i := 0; i < 20; i++ {
		text, ok := randomWalk(t, m, rng, 200, 12*boolInt(i < 2))
		if ok {
			done++
			if err := Validate(personSchema, text); err != nil {
				t.Error(err)
			}
		}
	}
	if done == 0 {
		t.Error("no walk completed")
	}
}
