package chat

import (
	"errors"
	"strings"
	"testing"

	"anechat/engine/constrain"
)

// accepts reports whether g matches text whole, fed byte by byte through a
// vocabulary of the 256 bytes.
func accepts(t *testing.T, e constrain.Element, text string) bool {
	t.Helper()
	g, err := constrain.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	m, err := constrain.NewMatcher(g, constrain.NewVocab(byteVocab{}))
	if err != nil {
		t.Fatal(err)
	}
	s := m.Start()
	for i := 0; i < len(text); i++ {
		if s.Advance(int32(text[i])) != nil {
			return false
		}
	}
	return s.Complete()
}

// byteVocab is a vocabulary of one token per byte.
type byteVocab struct{}

func (byteVocab) VocabSize() int                     { return 256 }
func (byteVocab) TokenBytes(id int32) []byte         { return []byte{byte(id)} }
func (byteVocab) IsSpecial(int32) bool               { return false }
func (byteVocab) TokenID(piece string) (int32, bool) { return 0, false }

const weather = `{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
	"properties": {"location": {"type": "string"}, "days": {"type": "integer"}}, "required": ["location", "days"], "additionalProperties": false}}}`
const loose = `{"type": "function", "function": {"name": "search", "parameters": {"type": "object",
	"properties": {"q": {"type": "string", "pattern": "^a"}}}}}`

// A forced call's grammar admits exactly the calls ParseCalls reads back, to
// the tools offered, with arguments under their schemas.
func TestCallGrammar(t *testing.T) {
	tools := []Tool{Tool(weather), Tool(loose)}
	h, err := ToolsHermes.CallGrammar(tools, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"days\": 3}}\n</tool_call>", true},
		{" <tool_call>\n{\"name\": \"search\", \"arguments\": {\"anything\": [1, 2]}}\n</tool_call>", true},         // not strict, outside the subset: any object
		{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>", false}, // a required property missing
		{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": 3, \"days\": 3}}\n</tool_call>", false},
		{"<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>", false},
		{"Sure. <tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>", false},
		{"<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>\n<tool_call>", false},
	} {
		if got := accepts(t, h, c.text); got != c.ok {
			t.Errorf("%q: accepted %v, want %v", c.text, got, c.ok)
		}
		if c.ok {
			if _, calls := ToolsHermes.ParseCalls(c.text); len(calls) != 1 {
				t.Errorf("%q: the grammar admits what ParseCalls does not read", c.text)
			}
		}
	}
	named, err := ToolsLlama3.CallGrammar(tools, "search")
	if err != nil {
		t.Fatal(err)
	}
	if !accepts(t, named, `{"name": "search", "parameters": {"q": "x"}}`) || accepts(t, named, `{"name": "get_weather", "parameters": {"location": "x", "days": 1}}`) {
		t.Error("a named function's grammar admits another or refuses it")
	}
	strict := Tool(strings.Replace(loose, `"name": "search"`, `"name": "search", "strict": true`, 1))
	var ce *constrain.Error
	if _, err := ToolsHermes.CallGrammar([]Tool{Tool(weather), strict}, ""); !errors.As(err, &ce) || !strings.HasPrefix(ce.Path, "tools[1].function.parameters") || !strings.Contains(ce.Error(), "pattern") {
		t.Errorf("a strict schema outside the subset: %v", err)
	}
}
