package constrain

import (
	"testing"

	"anechat/internal/testres"
)

// benchDoc is a JSON document valid under personSchema, tokenized by each
// vocabulary as a model writing it would.
const benchDoc = `{"name": "Ada Lovelace, Countess of Lovelace", "age": 36, "tags": ["a", "b\"c", "a"], "ok": true, "n": -12.75}`

// benchMask times Mask plus Advance per token of benchDoc: "cold" builds a
// new Matcher for every document (every mask computed), "warm" reuses one
// (the masks of repeated states cached, as across the requests of one
// schema). It reports ms per token.
func benchMask(b *testing.B, path string) {
	tok, v := realVocab(b, path)
	g := mustSchema(b, personSchema)
	ids := tok.Encode(benchDoc)
	run := func(b *testing.B, m func() *Matcher) {
		for b.Loop() {
			s := m().Start()
			for _, id := range ids {
				s.Mask()
				if err := s.Advance(id); err != nil {
					b.Fatal(err)
				}
			}
			if !s.Complete() {
				b.Fatal("document not complete")
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*len(ids)), "ms/token")
	}
	b.Run("cold", func(b *testing.B) {
		run(b, func() *Matcher {
			m, _ := NewMatcher(g, v)
			return m
		})
	})
	b.Run("warm", func(b *testing.B) {
		m, _ := NewMatcher(g, v)
		run(b, func() *Matcher { return m })
	})
}

// BenchmarkMaskGemma262k: Gemma 3's 262k-token SentencePiece vocabulary
// (the Gemma 4 tokenizer's size).
func BenchmarkMaskGemma262k(b *testing.B) { benchMask(b, testres.Gemma3GGUF(b)) }

// BenchmarkMaskSmolLM2 49k: SmolLM2's byte-level BPE vocabulary.
func BenchmarkMaskSmolLM2(b *testing.B) { benchMask(b, testres.SmolLM2GGUF(b)) }
