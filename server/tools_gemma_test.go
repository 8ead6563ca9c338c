package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/constrain"
	"anechat/engine/cpu"
	"anechat/engine/load"
	"anechat/engine/model/gguf"
	"anechat/internal/sessions"
	"anechat/internal/testres"
)

// withGemmaToolModel serves "gemma-tools": stories260K with Gemma 4's chat
// template, and four byte tokens it never uses (<0x01>..<0x04>) renamed to
// Gemma 4's call tokens and made control tokens, as Gemma 4's vocabulary
// has them: a model that knows nothing of tools, whose replies go through
// Gemma 4's template, tool-call format and special tokens (opened by
// loader).
func withGemmaToolModel(loader load.Loader) serverOption {
	return func(t *testing.T, c *Config, s *testServer) {
		path := filepath.Join(t.TempDir(), "gemma-tools.gguf")
		tmpl := testres.Require(t, filepath.Join(testres.RepoRoot(t), "build", "testdeps", "pypi", "llama.cpp", "templates", "google-gemma-4-31B-it.jinja"),
			"Gemma 4's chat template", "run build/scripts/deps-tokenizer.sh (make test does)")
		src, err := os.ReadFile(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		stories := testres.Stories(t)
		f, err := gguf.Open(stories)
		if err != nil {
			t.Fatal(err)
		}
		tv, _ := f.Value("tokenizer.ggml.tokens")
		kv, _ := f.Value("tokenizer.ggml.token_type")
		f.Close()
		pieces, _ := tv.([]string)
		kinds, _ := kv.([]int32)
		if len(pieces) < 8 || len(kinds) != len(pieces) || pieces[4] != "<0x01>" || pieces[7] != "<0x04>" {
			t.Fatalf("stories260K's vocabulary is not as expected: %d pieces, %d types", len(pieces), len(kinds))
		}
		pieces, kinds = append([]string(nil), pieces...), append([]int32(nil), kinds...)
		for i, p := range []string{"<|tool_call>", "<tool_call|>", constrain.GemmaQuote, "<|tool_response>"} {
			pieces[4+i], kinds[4+i] = p, 3 // control
		}
		if err := gguf.EditFile(stories, path, map[string]any{"tokenizer.chat_template": string(src),
			"tokenizer.ggml.tokens": pieces, "tokenizer.ggml.token_type": kinds}); err != nil {
			t.Fatal(err)
		}
		s.run = sessions.New(nil, load.NewRegistry(loader))
		c.Sessions = s.run
		c.Models = func(context.Context) ([]Model, error) {
			return []Model{{ID: "stories260K", Path: stories}, {ID: "gemma-tools", Path: path}}, nil
		}
	}
}

// tool_choice "required" and a named function on a model with Gemma 4's
// template: the reply is a call in Gemma 4's notation, read back into JSON
// arguments under the function's schema, the same at every speculation
// width, streamed or not.
func TestForcedToolCallGemma(t *testing.T) {
	s := startServer(t, "", withGemmaToolModel(cpu.Loader{}))
	searchParams := map[string]any{"type": "object", "properties": map[string]any{
		"q":    map[string]any{"type": "string", "enum": []string{"cats", "dogs"}},
		"n":    map[string]any{"type": "integer"},
		"tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"deep": map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"}, "additionalProperties": false}},
		"required": []string{"q", "n", "tags", "deep"}, "additionalProperties": false}
	search := map[string]any{"type": "function", "function": map[string]any{"name": "search", "parameters": searchParams}}
	grammars := map[string]*constrain.Grammar{}
	for name, params := range map[string]any{"search": searchParams, "get_weather": weatherTool["function"].(map[string]any)["parameters"]} {
		raw, _ := json.Marshal(params)
		g, err := constrain.CompileSchema(raw)
		if err != nil {
			t.Fatal(err)
		}
		grammars[name] = g
	}
	ask := func(choice any, width int) map[string]any {
		return map[string]any{"model": "gemma-tools", "temperature": 0, "max_tokens": 160, "tools": []any{weatherTool, search},
			"tool_choice": choice, "anechat": map[string]any{"width": width},
			"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}}}
	}
	check := func(what string, r toolReply, want string) string {
		t.Helper()
		c := r.Choices[0]
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.Content != nil {
			t.Fatalf("%s: %+v %q", what, r, derefStr(c.Message.Content))
		}
		call := c.Message.ToolCalls[0]
		if want != "" && call.Function.Name != want {
			t.Errorf("%s: a call to %q, want %q", what, call.Function.Name, want)
		}
		g := grammars[call.Function.Name]
		if g == nil || !g.Match([]byte(call.Function.Arguments)) || !json.Valid([]byte(call.Function.Arguments)) {
			t.Errorf("%s: %s(%s) is not under the schema", what, call.Function.Name, call.Function.Arguments)
		}
		return call.Function.Name + call.Function.Arguments
	}
	var first string
	for _, width := range []int{1, 3, 0} {
		got := check("required", s.toolPost(t, ask("required", width)), "")
		if first == "" {
			first = got
			t.Logf("stories260K with Gemma 4's template, forced: %s", got)
		} else if got != first {
			t.Errorf("width %d: %s, width 1: %s", width, got, first)
		}
	}
	var named string
	for _, width := range []int{1, 3, 0} {
		got := check("named", s.toolPost(t, ask(map[string]any{"type": "function", "function": map[string]any{"name": "search"}}, width)), "search")
		var args map[string]any
		json.Unmarshal([]byte(got[len("search"):]), &args)
		if q := args["q"]; (q != "cats" && q != "dogs") || len(args) != 4 {
			t.Errorf("search %v", args)
		}
		if named == "" {
			named = got
			t.Logf("named: %s", got)
		} else if got != named {
			t.Errorf("named, width %d: %s, width 1: %s", width, got, named)
		}
	}
	// get_weather's free string: stories260K tells a story inside it
	// until max_tokens, so the reply is a call cut short, which comes back
	// as text, the same text at every width.
	var cut string
	for _, width := range []int{1, 3, 0} {
		r := s.toolPost(t, ask(map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}, width))
		c := r.Choices[0]
		if c.FinishReason != "length" || c.Message.Content == nil || len(c.Message.ToolCalls) != 0 ||
			!strings.HasPrefix(strings.TrimPrefix(*c.Message.Content, " "), "<|tool_call>call:get_weather{location:"+constrain.GemmaQuote) {
			t.Fatalf("get_weather, width %d: %+v %q", width, r, derefStr(c.Message.Content))
		}
		if cut == "" {
			cut = *c.Message.Content
		} else if *c.Message.Content != cut {
			t.Errorf("get_weather, width %d: %q, width 1: %q", width, *c.Message.Content, cut)
		}
	}
	// Streamed: no marker as content, the same call in delta.tool_calls.
	body := ask("required", 0)
	body["stream"] = true
	resp, raw := s.do(t, http.MethodPost, "/v1/chat/completions", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("streamed: %d %s", resp.StatusCode, raw)
	}
	var content, streamed strings.Builder
	finish := ""
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Function struct{ Name, Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				content.WriteString(*c.Delta.Content)
			}
			for _, tc := range c.Delta.ToolCalls {
				streamed.WriteString(tc.Function.Name + tc.Function.Arguments)
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if strings.TrimSpace(content.String()) != "" || finish != "tool_calls" || streamed.String() != first {
		t.Errorf("streamed: content %q, finish %q, call %s (not streamed: %s)", content.String(), finish, streamed.String(), first)
	}

	// A strict schema the notation cannot write is a 400 naming its value.
	bad := map[string]any{"type": "function", "function": map[string]any{"name": "f", "strict": true, "parameters": map[string]any{"type": "object",
		"properties": map[string]any{"x": map[string]any{"enum": []string{"a", constrain.GemmaQuote}}}, "required": []string{"x"}, "additionalProperties": false}}}
	req := ask("required", 1)
	req["tools"] = []any{bad}
	r := s.post(t, "/v1/chat/completions", req, http.StatusBadRequest)
	if r.Error == nil || r.Error.Param == nil || *r.Error.Param != "tools[0].function.parameters.properties.x.enum[1]" {
		t.Errorf("an enum value Gemma 4 cannot write: %+v", r.Error)
	}
}

func derefStr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// A model that returns no logits (a published Core ML bundle) answers a
// forced call, and structured output, with a 400 naming the field, before
// any token; with tool_choice "auto" it is served.
func TestForcedCallRefusedByGreedyOnlyModel(t *testing.T) {
	s := startServer(t, "", withGemmaToolModel(argmaxOnlyLoader{cpu.Loader{}}))
	for _, c := range []struct {
		key   string
		value any
	}{{"tool_choice", "required"}, {"response_format", map[string]any{"type": "json_object"}}} {
		body := map[string]any{"model": "gemma-tools", "max_tokens": 4, "tools": []any{weatherTool},
			"messages": []map[string]any{{"role": "user", "content": "Once"}}, c.key: c.value}
		r := s.post(t, "/v1/chat/completions", body, http.StatusBadRequest)
		if r.Error == nil || r.Error.Param == nil || *r.Error.Param != c.key || !strings.Contains(r.Error.Message, "gemma-tools") {
			t.Errorf("%s on a greedy-only model: %+v", c.key, r.Error)
		}
	}
	s.toolPost(t, map[string]any{"model": "gemma-tools", "max_tokens": 4, "tools": []any{weatherTool},
		"messages": []map[string]any{{"role": "user", "content": "Once"}}})
}
