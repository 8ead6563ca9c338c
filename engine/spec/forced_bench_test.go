package spec

import (
	"testing"

	"anechat/engine/constrain"
	"anechat/engine/model/gguf"
	"anechat/engine/tokenizer"
	"anechat/internal/testres"
)

// benchReply is a pretty-printed reply under benchSchema, as SmolLM2
// writes one.
const benchReply = `{
  "people": [
    {
      "name": "Alice",
      "age": 31,
      "city": "Paris"
    },
    {
      "name": "Bob",
      "age": 28,
      "city": "Berlin"
    },
    {
      "name": "Carol",
      "age": 45,
      "city": "Madrid"
    }
  ]
}`

const benchSchema = `{"type":"object","properties":{"people":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"city":{"type":"string"}},"required":["name","age","city"],"additionalProperties":false}}},"required":["people"],"additionalProperties":false}`

// BenchmarkForcedPropose times the forced-text source per token of a
// reply: Propose of up to 7 drafts (the forced text, the whitespace
// guesses, the split into tokens), then the state's Advance and Append, on
// SmolLM2's vocabulary. It reports µs per token (next to a model call of
// ~14 ms) and the drafts proposed per token.
func BenchmarkForcedPropose(b *testing.B) {
	f, err := gguf.Open(testres.SmolLM2GGUF(b))
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	g, err := constrain.CompileSchema([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	m, err := constrain.NewMatcher(g, constrain.NewVocab(tok))
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(benchReply)
	src := NewForced()
	drafted := 0
	for b.Loop() {
		s := m.Start()
		src.Reset(nil)
		src.Constrain(Grammar(s))
		for _, id := range ids {
			drafted += len(src.Propose(MaxWidth - 1).Tokens)
			if err := s.Advance(id); err != nil {
				b.Fatal(err)
			}
			src.Append(id)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(b.N*len(ids)), "µs/token")
	b.ReportMetric(float64(drafted)/float64(b.N*len(ids)), "drafts/token")
}
