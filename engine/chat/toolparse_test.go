package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseCalls(t *testing.T) {
	cases := []struct {
		f       ToolFormat
		reply   string
		content string
		calls   []ToolCall // nil: the reply is text
	}{
		{ToolsHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "", []ToolCall{{Name: "f", Arguments: `{"a": 1}`}}},
		{ToolsHermes, "Let me look.\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>{\"name\": \"g\", \"arguments\": \"{\\\"x\\\": [1]}\"}</tool_call>\n",
			"Let me look.", []ToolCall{{Name: "f", Arguments: `{}`}, {Name: "g", Arguments: `{"x": [1]}`}}},
		// The end of turn came before the closing tag: the JSON is whole.
		{ToolsHermes, "<tool_call>\n{\"name\": \"f\"}", "", []ToolCall{{Name: "f", Arguments: `{}`}}},
		{ToolsHermes, "no call here", "no call here", nil},
		{ToolsHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": ", "", nil},       // cut by max_tokens
		{ToolsHermes, "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", "", nil}, // arguments not an object
		{ToolsHermes, "<tool_call>{\"name\": \"\", \"arguments\": {}}</tool_call>", "", nil},   // no name
		{ToolsHermes, "<tool_call>{\"name\": \"f\"}</tool_call> and then text", "", nil},       // text after the calls
		{ToolsHermes, "<tool_call>{\"name\": \"f\"} {\"name\": \"g\"}</tool_call>", "", nil},   // two objects in one tag
		{ToolsLlama3, " {\"name\": \"f\", \"parameters\": {\"q\": \"x\"}}\n", "", []ToolCall{{Name: "f", Arguments: `{"q": "x"}`}}},
		{ToolsLlama3, "{\"name\": \"f\", \"arguments\": {\"q\": 1}}", "", []ToolCall{{Name: "f", Arguments: `{"q": 1}`}}},
		{ToolsLlama3, "The answer is {\"name\": \"f\"}", "", nil},
		{ToolsLlama3, "{\"name\": \"f\", \"parameters\": {\"q\": 1}} extra", "", nil},
		{ToolsLlama3, "{\"title\": \"not a call\"}", "", nil},
		{ToolsGemma4, "<|tool_call>call:get_weather{location:<|\"|>Paris, \"FR\"<|\"|>,days:3,opts:{deep:[true,None,-2.5e3]},<|\"|>q k<|\"|>:false}<tool_call|>",
			"", []ToolCall{{Name: "get_weather", Arguments: `{"location":"Paris, \"FR\"","days":3,"opts":{"deep":[true,null,-2.5e3]},"q k":false}`}}},
		{ToolsGemma4, "Sure.<|tool_call>call:f{}<tool_call|><|tool_call>call:g{a:[]}<tool_call|>", "Sure.",
			[]ToolCall{{Name: "f", Arguments: `{}`}, {Name: "g", Arguments: `{"a":[]}`}}},
		{ToolsGemma4, "<|tool_call>call:f{a:<|\"|>open", "", nil},
		{ToolsGemma4, "<|tool_call>call:f{a:bare}<tool_call|>", "", nil},
		{ToolsGemma4, "<|tool_call>call:f{a:1}", "", nil},
		{ToolsGemma4, "<|tool_call>call:{a:1}<tool_call|>", "", nil},
		{NoTools, "<tool_call>{\"name\": \"f\"}</tool_call>", "", nil},
	}
	for i, c := range cases {
		content, calls := c.f.ParseCalls(c.reply)
		if c.calls == nil {
			if calls != nil || content != c.reply {
				t.Errorf("%d %s %q: got %q %+v, want the reply as text", i, c.f, c.reply, content, calls)
			}
			continue
		}
		if content != c.content || len(calls) != len(c.calls) {
			t.Errorf("%d %s %q: got %q %+v, want %q %+v", i, c.f, c.reply, content, calls, c.content, c.calls)
			continue
		}
		for k := range calls {
			if calls[k] != c.calls[k] {
				t.Errorf("%d %s: call %d = %+v, want %+v", i, c.f, k, calls[k], c.calls[k])
			}
		}
	}
}

// checkStreaming checks ParseCalls and Streamable on reply and its prefixes:
// calls always have a name and a JSON object of arguments; a reply without
// calls is its own content; and what is streamed of any prefix is a prefix of
// the final content, never shrinking, never a marker. Prefixes end between
// characters, as a streaming detokenizer's text does.
func checkStreaming(t *testing.T, f ToolFormat, reply string) {
	content, calls := f.ParseCalls(reply)
	if calls == nil && content != reply {
		t.Fatalf("%s %q: no calls but content %q", f, reply, content)
	}
	for _, c := range calls {
		var obj map[string]any
		if c.Name == "" || json.Unmarshal([]byte(c.Arguments), &obj) != nil || obj == nil {
			t.Fatalf("%s %q: a broken call %+v", f, reply, c)
		}
	}
	last := 0
	ends := []int{}
	for n := range reply {
		ends = append(ends, n)
	}
	for _, n := range append(ends, len(reply)) {
		s := f.Streamable(reply[:n])
		if s < last || s > n {
			t.Fatalf("%s %q: Streamable(%q) = %d after %d", f, reply, reply[:n], s, last)
		}
		if from := f.StreamableFrom(reply[:n], last); from != s {
			t.Fatalf("%s %q: StreamableFrom(%q, %d) = %d, Streamable %d", f, reply, reply[:n], last, from, s)
		}
		last = s
		if !strings.HasPrefix(content, reply[:s]) {
			t.Fatalf("%s %q: streamed %q, which the content %q does not start with", f, reply, reply[:s], content)
		}
	}
}

func TestStreamable(t *testing.T) {
	for _, f := range []ToolFormat{ToolsHermes, ToolsGemma4, ToolsLlama3, NoTools} {
		for _, r := range []string{"", "Hello", "Hi <tool_", "Text\n\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
			"<|tool_call>call:f{a:1}<tool_call|>", "  {\"name\": \"f\", \"parameters\": {}}", "a <|tool_call> b", "{not json"} {
			checkStreaming(t, f, r)
		}
	}
	if n := ToolsHermes.Streamable("Let me check. <tool_"); n != len("Let me check.") {
		t.Errorf("Streamable held %d", n)
	}
	if n := ToolsLlama3.Streamable("Paris is sunny."); n != len("Paris is sunny.") {
		t.Errorf("Llama 3 text held back: %d", n)
	}
}

func FuzzParseCalls(f *testing.F) {
	for _, s := range []string{
		"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
		"x <tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>",
		"{\"name\": \"f\", \"parameters\": {\"q\": [1, {}]}}",
		"<|tool_call>call:f{a:<|\"|>x<|\"|>,b:[1,{c:None}]}<tool_call|>",
		"<|tool_call>call:f{" + strings.Repeat("a:[", 80) + "<tool_call|>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		if len(reply) > 1<<12 {
			return // Streamable on every prefix is quadratic
		}
		for _, tf := range []ToolFormat{ToolsHermes, ToolsGemma4, ToolsLlama3} {
			checkStreaming(t, tf, reply)
		}
	})
}

// A marker token that a tokenizer counts special (it decodes to nothing) is
// spelled out for reading calls; other silent tokens stay silent.
func TestMarkerText(t *testing.T) {
	for _, c := range []struct {
		f                 ToolFormat
		text, piece, want string
	}{
		{ToolsGemma4, "", "<|tool_call>", "<|tool_call>"},
		{ToolsGemma4, "", `<|"|>`, `<|"|>`},
		{ToolsGemma4, "", "<turn|>", ""},
		{ToolsHermes, "", "</tool_call>", "</tool_call>"},
		{ToolsHermes, "x", "<tool_call>", "x"},
		{ToolsLlama3, "", "<|python_tag|>", ""},
		{NoTools, "", "<tool_call>", ""},
	} {
		if got := c.f.MarkerText(c.text, c.piece); got != c.want {
			t.Errorf("%s MarkerText(%q, %q) = %q, want %q", c.f, c.text, c.piece, got, c.want)
		}
	}
}
