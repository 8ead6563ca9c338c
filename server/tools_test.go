package server

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"anechat/engine/chat"
	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/tokenizer"
	"anechat/internal/sessions"
	"anechat/internal/testres"
)

// toolModel is stories260K with Qwen 2.5's chat template (tools in
// <tool_call> tags), whose replies a script dictates: what a model that
// calls tools answers, through the real template, tokenizer, engine and
// server, without a model trained to call them.
type toolModel struct {
	path string
	tok  *tokenizer.Tokenizer
	mu   sync.Mutex
	// script is the ids the next reply is made of (then EOS).
	script []int32
}

// say makes the next replies text, which the tokenizer spells with a
// leading space (SentencePiece's dummy prefix); it returns the reply's text.
func (m *toolModel) say(t *testing.T, text string) string {
	t.Helper()
	ids := m.tok.Encode(text)
	if got := m.tok.Decode(ids); strings.TrimPrefix(got, " ") != text {
		t.Fatalf("stories260K spells %q back as %q", text, got)
	}
	m.mu.Lock()
	m.script = ids
	m.mu.Unlock()
	return " " + text
}

// withToolModel serves the toolModel as "qwen-tools" beside stories260K.
func withToolModel(m **toolModel) serverOption {
	return func(t *testing.T, c *Config, s *testServer) {
		tm := &toolModel{path: filepath.Join(t.TempDir(), "qwen-tools.gguf")}
		tmpl := testres.Require(t, filepath.Join(testres.RepoRoot(t), "build", "testdeps", "pypi", "llama.cpp", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja"),
			"Qwen 2.5's chat template", "run build/scripts/deps-tokenizer.sh (make test does)")
		src, err := os.ReadFile(tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if err := gguf.EditFile(testres.Stories(t), tm.path, map[string]any{"tokenizer.chat_template": string(src)}); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(tm.path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if tm.tok, err = tokenizer.FromGGUF(f); err != nil {
			t.Fatal(err)
		}
		s.run = sessions.New(nil, load.NewRegistry(scriptedLoader{Loader: cpu.Loader{}, m: tm}))
		c.Sessions = s.run
		stories := testres.Stories(t)
		c.Models = func(context.Context) ([]Model, error) {
			return []Model{{ID: "stories260K", Path: stories}, {ID: "qwen-tools", Path: tm.path}}, nil
		}
		*m = tm
	}
}

type scriptedLoader struct {
	load.Loader
	m *toolModel
}

func (l scriptedLoader) Open(ctx context.Context, src load.Source, opts load.Options) (model.Backend, error) {
	b, err := l.Loader.Open(ctx, src, opts)
	if err != nil || !strings.HasSuffix(src.Path, "qwen-tools.gguf") {
		return b, err
	}
	return &scriptedBackend{Backend: b, m: l.m}, nil
}

// scriptedBackend runs the model (so its KV is real) and makes its outputs
// pick the script: the token after position p is script[p+1-prompt], then
// EOS. A call whose first token is not the script's at its position is a
// prefill, which ends at the prompt's length.
type scriptedBackend struct {
	model.Backend
	m      *toolModel
	mu     sync.Mutex
	prompt map[*kv.Cache]int // per cache: the engine also times calls on caches of its own
}

func (b *scriptedBackend) Forward(ctx context.Context, tokens []int32, start int, c *kv.Cache, want model.Output) (model.Result, error) {
	r, err := b.Backend.Forward(ctx, tokens, start, c, want)
	if err != nil {
		return r, err
	}
	b.m.mu.Lock()
	script := b.m.script
	b.m.mu.Unlock()
	if script == nil {
		return r, nil // the model's own choices
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.prompt == nil {
		b.prompt = map[*kv.Cache]int{}
	}
	prompt, ok := b.prompt[c]
	if at := start - prompt; !ok || at < 0 || at >= len(script) || tokens[0] != script[at] {
		prompt = start + len(tokens)
		b.prompt[c] = prompt
	}
	first := start
	if want&model.Last != 0 {
		first = start + len(tokens) - 1
	}
	rows := max(len(r.Logits), len(r.Argmax))
	for k := 0; k < rows; k++ {
		next := first + k + 1 - prompt
		id := b.m.tok.EOS()[0]
		if next >= 0 && next < len(script) {
			id = script[next]
		}
		if k < len(r.Logits) {
			for v := range r.Logits[k] {
				r.Logits[k][v] = -math.MaxFloat32
			}
			r.Logits[k][id] = 0
		}
		if k < len(r.Argmax) {
			r.Argmax[k] = id
		}
	}
	return r, nil
}

func (b *scriptedBackend) Close() error {
	if c, ok := b.Backend.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

var weatherTool = map[string]any{"type": "function", "function": map[string]any{
	"name": "get_weather", "description": "Current weather in a city.",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{"location": map[string]any{"type": "string"}},
		"required": []string{"location"}}}}

// toolReply is a non-streamed reply with its tool calls.
type toolReply struct {
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

func (s *testServer) toolPost(t *testing.T, body map[string]any) toolReply {
	t.Helper()
	resp, b := s.do(t, http.MethodPost, "/v1/chat/completions", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var r toolReply
	if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("%s: %v", b, err)
	}
	return r
}

// A reply in Qwen's <tool_call> format comes back as message.tool_calls
// (an id, the name, the arguments as JSON text) with finish_reason
// "tool_calls"; text before the calls is the content; a call that does not
// parse is text.
func TestToolCalls(t *testing.T) {
	var tm *toolModel
	s := startServer(t, "", withToolModel(&tm))
	ask := func() map[string]any {
		return map[string]any{"model": "qwen-tools", "temperature": 0, "max_tokens": 200, "tools": []any{weatherTool},
			"messages": []map[string]any{{"role": "user", "content": "Weather in Paris?"}}}
	}

	tm.say(t, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>")
	r := s.toolPost(t, ask())
	c := r.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Content != nil || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("reply %+v", r)
	}
	call := c.Message.ToolCalls[0]
	if !strings.HasPrefix(call.ID, "call_") || call.Type != "function" || call.Function.Name != "get_weather" || call.Function.Arguments != `{"location": "Paris"}` {
		t.Errorf("call %+v", call)
	}

	tm.say(t, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>")
	r = s.toolPost(t, ask())
	if c := r.Choices[0]; c.Message.Content == nil || *c.Message.Content != " Let me check." || len(c.Message.ToolCalls) != 1 || c.FinishReason != "tool_calls" {
		t.Errorf("text and a call: %+v", r)
	}

	broken := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\""
	broken = tm.say(t, broken)
	r = s.toolPost(t, ask())
	if c := r.Choices[0]; c.Message.Content == nil || *c.Message.Content != broken || len(c.Message.ToolCalls) != 0 || c.FinishReason != "stop" {
		t.Errorf("a broken call: %+v", r)
	}

	// tool_choice "none": the tools are not offered (a shorter prompt)
	// and the reply is text, whatever it spells.
	tm.say(t, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>")
	withTools := s.toolPost(t, ask())
	none := ask()
	none["tool_choice"] = "none"
	r = s.toolPost(t, none)
	if c := r.Choices[0]; len(c.Message.ToolCalls) != 0 || c.Message.Content == nil || !strings.HasPrefix(*c.Message.Content, " <tool_call>") || r.Usage.PromptTokens >= withTools.Usage.PromptTokens {
		t.Errorf("tool_choice none: %+v (prompt %d with tools)", r, withTools.Usage.PromptTokens)
	}
}

// A streamed reply that calls a tool never streams the call's markers as
// content: the text before it streams, the call comes as delta.tool_calls
// (index, id, type and name, then the arguments) and the stream finishes
// with "tool_calls".
func TestToolCallsStreamed(t *testing.T) {
	var tm *toolModel
	s := startServer(t, "", withToolModel(&tm))
	tm.say(t, "Sure.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>")
	body := map[string]any{"model": "qwen-tools", "temperature": 0, "max_tokens": 200, "tools": []any{weatherTool}, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": "Weather in Paris?"}}}
	resp, raw := s.do(t, http.MethodPost, "/v1/chat/completions", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var content strings.Builder
	type piece struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	var pieces []piece
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
					ToolCalls []piece `json:"tool_calls"`
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
			pieces = append(pieces, c.Delta.ToolCalls...)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	if content.String() != " Sure." || finish != "tool_calls" {
		t.Errorf("content %q, finish %q", content.String(), finish)
	}
	if len(pieces) != 2 || pieces[0].Index == nil || *pieces[0].Index != 0 || !strings.HasPrefix(pieces[0].ID, "call_") || pieces[0].Type != "function" ||
		pieces[0].Function.Name != "get_weather" || pieces[1].Index == nil || *pieces[1].Index != 0 || pieces[1].Function.Arguments != `{"location": "Paris"}` {
		t.Errorf("tool call pieces %+v", pieces)
	}
}

// An assistant's call and the tool's result in the history render through
// the template (the prompt grows by them) and the model answers in text.
func TestToolResultInHistory(t *testing.T) {
	var tm *toolModel
	s := startServer(t, "", withToolModel(&tm))
	tm.say(t, "It is sunny.")
	msgs := []map[string]any{{"role": "user", "content": "Weather in Paris?"}}
	first := s.toolPost(t, map[string]any{"model": "qwen-tools", "temperature": 0, "tools": []any{weatherTool}, "messages": msgs})
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": `{"location": "Paris"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": `{"sky": "sunny"}`})
	r := s.toolPost(t, map[string]any{"model": "qwen-tools", "temperature": 0, "tools": []any{weatherTool}, "messages": msgs})
	if c := r.Choices[0]; c.Message.Content == nil || *c.Message.Content != " It is sunny." || c.FinishReason != "stop" {
		t.Errorf("reply %+v", r)
	}
	want := len(tm.tok.Encode("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>"))
	if grew := r.Usage.PromptTokens - first.Usage.PromptTokens; grew <= want {
		t.Errorf("the prompt grew by %d tokens with a call and its result; the call alone is %d", grew, want)
	}
}

// Bad tools and tool choices, and tools for a model whose template has no
// tool support, are each a 400 naming the field.
func TestToolErrors(t *testing.T) {
	var tm *toolModel
	s := startServer(t, "", withToolModel(&tm))
	fn := func(f map[string]any) map[string]any { return map[string]any{"type": "function", "function": f} }
	cases := []struct {
		model  string
		tools  []any
		choice any
		msgs   []map[string]any
		param  string
		says   string
	}{
		{"stories260K", []any{weatherTool}, nil, nil, "tools", "no tool support"},
		{"qwen-tools", []any{fn(map[string]any{"description": "nameless"})}, nil, nil, "tools[0].function.name", "required"},
		{"qwen-tools", []any{fn(map[string]any{"name": "bad name!"})}, nil, nil, "tools[0].function.name", "letters"},
		{"qwen-tools", []any{weatherTool, weatherTool}, nil, nil, "tools[1].function.name", "unique"},
		{"qwen-tools", []any{fn(map[string]any{"name": "f", "parameters": "a string"})}, nil, nil, "tools[0].function.parameters", "JSON schema"},
		{"qwen-tools", []any{fn(map[string]any{"name": "f", "parameters": map[string]any{"type": "object", "properties": []int{1}}})}, nil, nil, "tools[0].function.parameters", "properties"},
		{"qwen-tools", []any{map[string]any{"type": "retrieval"}}, nil, nil, "tools[0].type", "function"},
		{"qwen-tools", []any{json.RawMessage(`{"type": "function", "function": {"name": "f", "x": 123456789012345678901234567890}}`)}, nil, nil, "tools[0]", "out of range"},
		{"qwen-tools", []any{weatherTool}, map[string]any{"type": "function", "function": map[string]any{"name": "nope"}}, nil, "tool_choice.function.name", "nope"},
		{"qwen-tools", []any{weatherTool}, "sometimes", nil, "tool_choice", "sometimes"},
		{"qwen-tools", []any{fn(map[string]any{"name": "f", "strict": true, "parameters": map[string]any{"type": "object",
			"properties": map[string]any{"q": map[string]any{"type": "string", "pattern": "^a"}}}})}, "required", nil, "tools[0].function.parameters.properties.q.pattern", "not supported"},
		{"qwen-tools", nil, "required", nil, "tool_choice", "needs tools"},
		{"qwen-tools", []any{weatherTool}, nil, []map[string]any{{"role": "tool", "content": "x"}}, "messages[0].tool_call_id", "required"},
		{"qwen-tools", []any{weatherTool}, nil, []map[string]any{{"role": "assistant", "tool_calls": []any{map[string]any{"type": "function", "function": map[string]any{"arguments": "{}"}}}}},
			"messages[0].tool_calls[0].function.name", "required"},
		{"stories260K", nil, nil, []map[string]any{{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c", "content": "x"}}, "messages", "tool support"},
	}
	for i, c := range cases {
		body := map[string]any{"model": c.model, "max_tokens": 4, "messages": c.msgs}
		if c.msgs == nil {
			body["messages"] = []map[string]any{{"role": "user", "content": "hi"}}
		}
		if c.tools != nil {
			body["tools"] = c.tools
		}
		if c.choice != nil {
			body["tool_choice"] = c.choice
		}
		r := s.post(t, "/v1/chat/completions", body, http.StatusBadRequest)
		if r.Error == nil || r.Error.Param == nil || *r.Error.Param != c.param || !strings.Contains(r.Error.Message, c.says) {
			t.Errorf("case %d: error %+v, want param %s saying %q", i, r.Error, c.param, c.says)
		}
	}
}

// realClientsEnv, set to 1, runs TestRealClients: `make api-clients` sets it
// after build/scripts/deps-openai.sh installed the openai client.
const realClientsEnv = "ANECHAT_REAL_CLIENTS"

// TestRealClients runs the official openai Python client's function calling
// against the server: a call in a reply (non-streamed, streamed chunk by
// chunk and through the client's stream helper, which reassemble the
// delta.tool_calls), the tool's result sent back, and a 400 for a model
// without tool support.
func TestRealClients(t *testing.T) {
	if os.Getenv(realClientsEnv) != "1" {
		t.Skipf("make api-clients runs it (%s=1), with the openai client that build/scripts/deps-openai.sh installs", realClientsEnv)
	}
	python := filepath.Join(testres.RepoRoot(t), ".tools", "openai-venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("the openai client venv is missing (%s): run bash build/scripts/deps-openai.sh", python)
	}
	var tm *toolModel
	s := startServer(t, "", withToolModel(&tm))
	tm.say(t, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "openai_tools.py"), s.url+"/v1", testToken)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("openai client: %v\n%s", err, stderr.String())
	}
	type call struct{ ID, Type, Name, Arguments string }
	var got struct {
		Version string
		Call    struct {
			Content *string
			Calls   []call
			Finish  string
			Prompt  int
		}
		RoundTrip struct {
			Finish string
			Prompt int
			Calls  []call
		} `json:"round_trip"`
		Stream struct {
			Content string
			Calls   []call
			Finish  string
		}
		Helper struct {
			Calls  []call
			Finish string
			Events []string
		}
		NoToolSupport *struct {
			Status int
			Param  *string
		} `json:"no_tool_support"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("openai client printed %q: %v", raw, err)
	}
	t.Logf("openai %s", got.Version)
	args := `{"location": "Paris"}`
	isCall := func(what string, cs []call) {
		if len(cs) != 1 || !strings.HasPrefix(cs[0].ID, "call_") || cs[0].Name != "get_weather" || cs[0].Arguments != args {
			t.Errorf("%s: calls %+v", what, cs)
		}
	}
	isCall("create", got.Call.Calls)
	if got.Call.Finish != "tool_calls" || got.Call.Content == nil || *got.Call.Content != " Sure." || got.Call.Calls[0].Type != "function" {
		t.Errorf("create: %+v", got.Call)
	}
	isCall("round trip", got.RoundTrip.Calls)
	if got.RoundTrip.Finish != "tool_calls" || got.RoundTrip.Prompt <= got.Call.Prompt {
		t.Errorf("round trip: %+v after a prompt of %d", got.RoundTrip, got.Call.Prompt)
	}
	isCall("stream", got.Stream.Calls)
	if got.Stream.Content != " Sure." || got.Stream.Finish != "tool_calls" {
		t.Errorf("stream: %+v", got.Stream)
	}
	isCall("stream helper", got.Helper.Calls)
	if got.Helper.Finish != "tool_calls" || !slices.Contains(got.Helper.Events, "tool_calls.function.arguments.done") {
		t.Errorf("stream helper: %+v", got.Helper)
	}
	if e := got.NoToolSupport; e == nil || e.Status != 400 || e.Param == nil || *e.Param != "tools" {
		t.Errorf("tools for stories260K: %+v", e)
	}
}

// tool_choice "required" and a named function are enforced by constrained
// decoding: stories260K, which knows nothing of tools, answers with a call
// in Qwen's format whose arguments follow the schema, the same at every
// speculation width, streamed or not.
func TestForcedToolCall(t *testing.T) {
	var tm *toolModel
	s := startServer(t, "", withToolModel(&tm))
	search := map[string]any{"type": "function", "function": map[string]any{"name": "search",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string", "enum": []string{"cats", "dogs"}},
			"n": map[string]any{"type": "integer"}}, "required": []string{"q", "n"}, "additionalProperties": false}}}
	ask := func(choice any, width int) map[string]any {
		return map[string]any{"model": "qwen-tools", "temperature": 0, "max_tokens": 120, "tools": []any{weatherTool, search},
			"tool_choice": choice, "anechat": map[string]any{"width": width},
			"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}}}
	}
	var first string
	for _, width := range []int{1, 3, 0} {
		r := s.toolPost(t, ask("required", width))
		c := r.Choices[0]
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
			t.Fatalf("width %d: %+v", width, r)
		}
		call := c.Message.ToolCalls[0]
		var args map[string]any
		if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
			t.Fatalf("arguments %q: %v", call.Function.Arguments, err)
		}
		switch call.Function.Name {
		case "get_weather":
			if _, ok := args["location"].(string); !ok {
				t.Errorf("get_weather %v", args)
			}
		case "search":
			if q := args["q"]; (q != "cats" && q != "dogs") || len(args) != 2 {
				t.Errorf("search %v", args)
			}
		default:
			t.Errorf("a call to %q", call.Function.Name)
		}
		got := call.Function.Name + call.Function.Arguments
		if first == "" {
			first = got
			t.Logf("stories260K, forced: %s", got)
		} else if got != first {
			t.Errorf("width %d: %s, width 1: %s", width, got, first)
		}
	}
	r := s.toolPost(t, ask(map[string]any{"type": "function", "function": map[string]any{"name": "search"}}, 0))
	if c := r.Choices[0]; len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "search" {
		t.Errorf("named: %+v", r)
	}
	body := ask("required", 0)
	body["stream"] = true
	resp, raw := s.do(t, http.MethodPost, "/v1/chat/completions", body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"finish_reason":"tool_calls"`) || strings.Contains(string(raw), `"content":" \u003ctool_call`) {
		t.Errorf("streamed: %s", raw)
	}
}

// A forced call's grammar is compiled once for the same tools and choice
// (its matcher's masks are then reused); other tools or another function
// get their own.
func TestForcedCallGrammarKept(t *testing.T) {
	raw, _ := json.Marshal(weatherTool)
	spaced := []byte(strings.ReplaceAll(string(raw), ",", ", "))
	tj := func(tool []byte, mode, name string) toolJob {
		return toolJob{tools: []chat.Tool{tool}, choice: toolChoice{mode: mode, name: name}}
	}
	a, e := forcedCall(chat.ToolsHermes, tj(raw, "required", ""))
	if e != nil {
		t.Fatal(e)
	}
	b, _ := forcedCall(chat.ToolsHermes, tj(spaced, "required", ""))
	c, _ := forcedCall(chat.ToolsHermes, tj(raw, "function", "get_weather"))
	d, _ := forcedCall(chat.ToolsLlama3, tj(raw, "required", ""))
	if a != b || a == c || a == d || c == d {
		t.Errorf("grammars %p %p %p %p: want the first two shared, the others apart", a, b, c, d)
	}
}
