package chat

import (
	"context"
	"strings"
	"testing"

	"anechat/engine/constrain"
)

// BenchmarkForcedCallMask times Mask plus Advance per token of a forced
// call on Gemma 4's 262k vocabulary: the call Gemma 4's template writes, in
// its notation (gemma4), and the same arguments as Llama 3.1's JSON call
// (json, in the schema's order), each "cold" (a new Matcher per call: every mask computed) and
// "warm" (one Matcher, masks cached as across an agent's turns). It
// reports ms per token.
//
//	go test ./engine/chat -run '^$' -bench ForcedCallMask
func BenchmarkForcedCallMask(b *testing.B) {
	m := hfModel(b, "gemma4")
	tmpl, err := ForModel(context.Background(), "any", m.tok, m.spec)
	if err != nil {
		b.Fatal(err)
	}
	tool := Tool(`{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
		"location": {"type": "string"}, "days": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
		"ok": {"type": "boolean"}, "n": {"type": "number"}}, "required": ["location", "days"], "additionalProperties": false}}}`)
	args := `{"days": 36, "location": "Ada Lovelace, Countess of Lovelace", "n": -12.75, "ok": true, "tags": ["a", "b\"c", "a"]}`
	full, err := tmpl.(*Jinja).RenderText(context.Background(), []Message{{Role: RoleUser, Content: "Weather?"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: args}}}}, []Tool{tool}, false)
	if err != nil {
		b.Fatal(err)
	}
	i, k := strings.Index(full, "<|tool_call>"), strings.Index(full, gemmaClose)
	v := constrain.NewVocab(m.tok)
	for _, c := range []struct {
		name string
		f    ToolFormat
		text string
	}{
		{"gemma4", ToolsGemma4, full[i : k+len(gemmaClose)]},
		{"json", ToolsLlama3, `{"name": "get_weather", "parameters": {"location": "Ada Lovelace, Countess of Lovelace", "days": 36, "tags": ["a", "b\"c", "a"], "ok": true, "n": -12.75}}`},
	} {
		e, err := c.f.CallGrammar([]Tool{tool}, "")
		if err != nil {
			b.Fatal(err)
		}
		g, err := constrain.Compile(e)
		if err != nil {
			b.Fatal(err)
		}
		ids := m.tok.Encode(c.text)
		run := func(b *testing.B, matcher func() *constrain.Matcher) {
			for b.Loop() {
				s := matcher().Start()
				for _, id := range ids {
					s.Mask()
					if err := s.Advance(id); err != nil {
						b.Fatalf("%q: token %q refused", c.text, m.tok.Piece(id))
					}
				}
				if !s.Complete() {
					b.Fatal("call not complete")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*len(ids)), "ms/token")
		}
		b.Run(c.name+"/cold", func(b *testing.B) {
			run(b, func() *constrain.Matcher {
				mt, _ := constrain.NewMatcher(g, v)
				return mt
			})
		})
		b.Run(c.name+"/warm", func(b *testing.B) {
			mt, _ := constrain.NewMatcher(g, v)
			run(b, func() *constrain.Matcher { return mt })
		})
	}
}
