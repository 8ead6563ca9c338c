package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"anechat/engine/model/gguf"
	"anechat/internal/testres"
)

// realClientsEnv, set to 1, runs TestRealClients: `make api-clients` (a step
// of make test) sets it after build/scripts/deps-openai.sh installed the
// client, so the test runs once per make test rather than again in go test.
const realClientsEnv = "ANECHAT_REAL_CLIENTS"

// TestRealClients drives `anechat serve` on stories260K with real clients:
// the official openai Python package (a chat completion, a streamed one,
// usage, errors, a stream cancelled halfway, a text completion, logprobs
// of both whole and streamed), the official ollama one on the Ollama routes
// (realOllamaClient) and curl, for the raw server-sent events.
func TestRealClients(t *testing.T) {
	if os.Getenv(realClientsEnv) != "1" {
		t.Skipf("make api-clients runs it (%s=1), with the openai client that build/scripts/deps-openai.sh installs", realClientsEnv)
	}
	root := testres.RepoRoot(t)
	python := filepath.Join(root, ".tools", "openai-venv", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		// Asked for explicitly: missing is a failure, on CI or not.
		t.Fatalf("the openai client venv is missing (%s): run bash build/scripts/deps-openai.sh", python)
	}
	s := startServe(t, "--data-dir", t.TempDir(), "--model", testres.Stories(t))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", "openai_client.py"), s.url, s.token, "stories260K"}, interleavedOpenings...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("openai client: %v\n%s", err, stderr.String())
	}
	type apiErr struct {
		Status int     `json:"status"`
		Class  string  `json:"class"`
		Param  *string `json:"param"`
	}
	var got struct {
		Version string `json:"version"`
		Chat    struct {
			Role, Content, Finish string
			Usage                 []int
			Anechat               map[string]any // figures, and draft_note: a string
		}
		Stream struct {
			Pieces []string
			Finish string
			Usage  []int
		}
		Errors struct {
			UnknownModel *apiErr `json:"unknown_model"`
			BadValue     *apiErr `json:"bad_value"`
			BadToken     *apiErr `json:"bad_token"`
		}
		Cancelled   []string
		AfterCancel string `json:"after_cancel"`
		Completion  struct {
			Text, Finish string
			Usage        []int
		}
		Models []string
		// Each token: text, logprob, bytes, alternatives (the same but
		// their alternatives).
		ChatLogprobs struct {
			Content         string
			Whole, Streamed [][]any
		} `json:"chat_logprobs"`
		// tokens, token_logprobs, top_logprobs, text_offset.
		TextLogprobs struct {
			Text            string
			Whole, Streamed []any
		} `json:"text_logprobs"`
		LogprobsError *apiErr `json:"logprobs_error"`
		Interleaved   [][]struct {
			Messages []map[string]any
			Content  string
			Prompt   int
			Resumed  int
		}
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("openai client printed %q: %v", raw, err)
	}
	t.Logf("openai %s", got.Version)

	// What the server answers a plain HTTP request with.
	var want apiReply
	s.post(t, "/v1/chat/completions", map[string]any{"model": "stories260K", "max_tokens": 16, "temperature": 0,
		"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}}}, &want)
	c := got.Chat
	calls, _ := c.Anechat["target_calls"].(float64)
	if c.Role != "assistant" || c.Content != want.Choices[0].Message.Content || c.Finish != "length" ||
		!slices.Equal(c.Usage, []int{want.Usage.PromptTokens, 16, want.Usage.PromptTokens + 16}) || calls == 0 {
		t.Errorf("chat through openai: %+v; want %q, 16 tokens, the anechat figures", c, want.Choices[0].Message.Content)
	}
	if st := got.Stream; strings.Join(st.Pieces, "") != c.Content || len(st.Pieces) < 2 || st.Finish != "length" || !slices.Equal(st.Usage, c.Usage) {
		t.Errorf("streamed through openai: %+v; want the chat's text %q and usage %v", st, c.Content, c.Usage)
	}
	for name, c := range map[string]struct {
		got    *apiErr
		status int
		class  string
		param  string
	}{
		"unknown model": {got.Errors.UnknownModel, 404, "NotFoundError", "model"},
		"max_tokens 0":  {got.Errors.BadValue, 400, "BadRequestError", "max_tokens"},
		"wrong token":   {got.Errors.BadToken, 401, "AuthenticationError", ""},
	} {
		if c.got == nil || c.got.Status != c.status || c.got.Class != c.class || (c.param != "" && (c.got.Param == nil || *c.got.Param != c.param)) {
			t.Errorf("%s: openai raised %+v, want %d %s param %q", name, c.got, c.status, c.class, c.param)
		}
	}
	if len(got.Cancelled) != 2 || got.AfterCancel == "" {
		t.Errorf("cancelled stream: %q, then %q", got.Cancelled, got.AfterCancel)
	}
	// The server saw the hang-up and stopped that generation, long before
	// its 1500 tokens.
	if log := s.stderr.String(); !strings.Contains(log, `msg="api request cancelled"`) {
		t.Errorf("the server did not log the cancelled stream:\n%s", log)
	}
	if cp := got.Completion; cp.Text == "" || cp.Finish != "length" || !slices.Equal(cp.Usage, []int{len(testres.StoriesPrompt()), 8}) {
		t.Errorf("text completion through openai: %+v", cp)
	}
	if !slices.Equal(got.Models, []string{"stories260K"}) {
		t.Errorf("models through openai: %v", got.Models)
	}

	// Logprobs as the client reads them: what the server answers a plain
	// request with, the same streamed, and the tokens make the text.
	var plain struct {
		Choices []struct {
			Logprobs struct {
				Content []struct {
					Token       string
					Logprob     float64
					Bytes       []int
					TopLogprobs []struct {
						Token   string
						Logprob float64
						Bytes   []int
					} `json:"top_logprobs"`
				}
			}
		}
	}
	s.post(t, "/v1/chat/completions", map[string]any{"model": "stories260K", "max_tokens": 8, "temperature": 0, "logprobs": true, "top_logprobs": 3,
		"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}}}, &plain)
	cl := got.ChatLogprobs
	if len(plain.Choices) == 0 || len(cl.Whole) != 8 || len(plain.Choices[0].Logprobs.Content) != 8 {
		t.Fatalf("chat logprobs through openai: %d tokens, plain %+v", len(cl.Whole), plain)
	}
	var joined []byte
	for i, e := range cl.Whole {
		want := plain.Choices[0].Logprobs.Content[i]
		var top [][]any
		for _, a := range want.TopLogprobs {
			top = append(top, []any{a.Token, a.Logprob, ints(a.Bytes)})
		}
		if !reflect.DeepEqual(e, []any{want.Token, want.Logprob, ints(want.Bytes), jsonAny(t, top)}) || len(want.TopLogprobs) != 3 || want.TopLogprobs[0].Token != want.Token {
			t.Errorf("chat logprob %d through openai: %v, plain %+v", i, e, want)
		}
		for _, b := range want.Bytes {
			joined = append(joined, byte(b))
		}
	}
	if !reflect.DeepEqual(cl.Streamed, cl.Whole) || strings.TrimPrefix(string(joined), " ") != strings.TrimPrefix(cl.Content, " ") {
		t.Errorf("chat logprobs through openai: streamed %v, whole %v; tokens make %q, the reply is %q", cl.Streamed, cl.Whole, joined, cl.Content)
	}
	if tl := got.TextLogprobs; len(tl.Whole) != 4 || !reflect.DeepEqual(tl.Streamed, tl.Whole) || len(tl.Whole[0].([]any)) != 6 || len(tl.Whole[2].([]any)[0].(map[string]any)) != 2 {
		t.Errorf("text completion logprobs through openai: %+v", tl)
	}
	if e := got.LogprobsError; e == nil || e.Status != 400 || e.Param == nil || *e.Param != "top_logprobs" {
		t.Errorf("top_logprobs 21 through openai: %+v, want a 400 naming top_logprobs", e)
	}

	// The official ollama client on the same server: the same generation.
	realOllamaClient(t, ctx, root, s, c.Content, want.Usage.PromptTokens)

	// Interleaved conversations: each next turn resumed its last prompt from
	// memory (too short for a snapshot on disk), and every reply is what a
	// server writes from scratch: one keeping a single session, asked an
	// unrelated question first so that it resumes nothing.
	if len(got.Interleaved) != len(interleavedOpenings) {
		t.Fatalf("interleaved conversations through openai: %d, want %d", len(got.Interleaved), len(interleavedOpenings))
	}
	ref := startServe(t, "--data-dir", t.TempDir(), "--model", testres.Stories(t), "--warm-sessions", "1", "--no-cache")
	for i, turns := range got.Interleaved {
		if len(turns) != 2 || turns[1].Resumed < turns[0].Prompt {
			t.Errorf("conversation %d through openai: %+v; want its next turn to resume its first prompt's %d tokens", i, turns, turns[0].Prompt)
			continue
		}
		for k, tn := range turns {
			var other, r resumedReply
			ref.post(t, "/v1/chat/completions", map[string]any{"model": "stories260K", "max_tokens": 2, "temperature": 0,
				"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}}}, &other)
			if code := ref.post(t, "/v1/chat/completions", map[string]any{"model": "stories260K", "max_tokens": 8, "temperature": 0,
				"messages": tn.Messages}, &r); code != 200 || len(r.Choices) == 0 || r.Anechat.ResumedTokens != 0 || r.Choices[0].Message.Content != tn.Content {
				t.Errorf("conversation %d, turn %d: %q through openai, interleaved; from scratch %d %+v", i, k+1, tn.Content, code, r)
			}
		}
	}

	// curl: the raw server-sent events, exactly "data: JSON" blocks and a
	// final "data: [DONE]".
	body := `{"model": "stories260K", "max_tokens": 16, "temperature": 0, "stream": true, "messages": [{"role": "user", "content": "Once upon a time"}]}`
	out, err := exec.CommandContext(ctx, "curl", "-sS", "-N", "-i", s.url+"/chat/completions", "-H", "Authorization: Bearer "+s.token,
		"-H", "Content-Type: application/json", "-d", body).Output()
	if err != nil {
		t.Fatalf("curl: %v", err)
	}
	head, events, ok := strings.Cut(strings.ReplaceAll(string(out), "\r\n", "\n"), "\n\n")
	if !ok || !strings.HasPrefix(head, "HTTP/1.1 200") || !strings.Contains(strings.ToLower(head), "content-type: text/event-stream") {
		t.Fatalf("curl headers:\n%s", head)
	}
	if !strings.HasSuffix(events, "data: [DONE]\n\n") {
		t.Fatalf("curl events do not end with data: [DONE]:\n%s", events)
	}
	var text strings.Builder
	for i, ev := range strings.Split(strings.TrimSuffix(events, "data: [DONE]\n\n"), "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		var chunk struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if !ok || strings.Contains(data, "\n") || json.Unmarshal([]byte(data), &chunk) != nil || chunk.Object != "chat.completion.chunk" {
			t.Fatalf("curl event %d is not one data line of a chunk: %q", i, ev)
		}
		if i == 0 && (len(chunk.Choices) == 0 || chunk.Choices[0].Delta.Role != "assistant") {
			t.Fatalf("curl: the first event %q does not open the assistant's message", ev)
		}
		if len(chunk.Choices) > 0 {
			text.WriteString(chunk.Choices[0].Delta.Content)
		}
	}
	if text.String() != c.Content {
		t.Errorf("curl stream text %q, openai's %q", text.String(), c.Content)
	}
	realClientTools(ctx, t, python)
	realClientStructured(ctx, t, python)
}

// realClientStructured runs testdata/openai_structured.py: every line of
// testdata/structured.jsonl (enums, const, booleans, null, anyOf, $defs and
// $ref, nested objects, a free string) answered under its schema by
// stories260K through the openai client, whole and streamed, each reply
// parsed and validated by the jsonschema package; and json_object once.
func realClientStructured(ctx context.Context, t *testing.T, python string) {
	s := startServe(t, "--data-dir", t.TempDir(), "--model", testres.Stories(t))
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "openai_structured.py"), s.url, s.token, "stories260K",
		filepath.Join("testdata", "structured.jsonl"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("openai client, structured output: %v\n%s", err, stderr.String())
	}
	type reply struct {
		ID, Content, Finish string
		Error               *string
		StreamedSame        bool `json:"streamed_same"`
	}
	var got struct {
		Lines      []reply
		JSONObject reply `json:"json_object"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("openai client printed %q: %v", raw, err)
	}
	if len(got.Lines) != 6 {
		t.Fatalf("structured output: %d replies, want one per workload line (6)", len(got.Lines))
	}
	for _, r := range got.Lines {
		if r.Finish != "stop" || r.Error != nil || !r.StreamedSame {
			t.Errorf("structured output %s: finish %q, jsonschema says %v, streamed the same %v: %q", r.ID, r.Finish, deref(r.Error), r.StreamedSame, r.Content)
		}
	}
	o := got.JSONObject
	if !strings.HasPrefix(strings.TrimSpace(o.Content), "{") || (o.Finish == "stop" && o.Error != nil) {
		t.Errorf("json_object: finish %q, %v: %q", o.Finish, deref(o.Error), o.Content)
	}
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// realClientTools serves stories260K with Qwen 2.5's chat template and runs
// the openai client's function calling on it (testdata/openai_tools.py): a
// call forced by tool_choice "required", the tool's result sent back and
// answered, a named function's call streamed and reassembled by the client.
func realClientTools(ctx context.Context, t *testing.T, python string) {
	tmpl, err := os.ReadFile(testres.Require(t, filepath.Join(testres.RepoRoot(t), "build", "testdeps", "pypi", "llama.cpp", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja"),
		"Qwen 2.5's chat template", "run build/scripts/deps-tokenizer.sh (make test does)"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "stories-tools.gguf")
	if err := gguf.EditFile(testres.Stories(t), path, map[string]any{"tokenizer.chat_template": string(tmpl)}); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--data-dir", t.TempDir(), "--model", path)
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "openai_tools.py"), s.url, s.token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("openai client, tools: %v\n%s", err, stderr.String())
	}
	type call struct{ ID, Name, Arguments string }
	var got struct {
		Call struct {
			Calls  []call
			Finish string
			Prompt int
		}
		Answer struct {
			Content *string
			Calls   []call
			Finish  string
			Prompt  int
		}
		Stream struct {
			Content string
			Calls   []call
			Finish  string
		}
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("openai client printed %q: %v", raw, err)
	}
	isCall := func(what string, cs []call) {
		t.Helper()
		var args struct{ City string }
		if len(cs) != 1 || !strings.HasPrefix(cs[0].ID, "call_") || cs[0].Name != "get_weather" ||
			json.Unmarshal([]byte(cs[0].Arguments), &args) != nil || (args.City != "Paris" && args.City != "Rome") {
			t.Errorf("%s: calls %+v", what, cs)
		}
	}
	isCall("required", got.Call.Calls)
	if got.Call.Finish != "tool_calls" {
		t.Errorf("required: finish %q", got.Call.Finish)
	}
	if a := got.Answer; a.Content == nil || *a.Content == "" || len(a.Calls) != 0 || a.Prompt <= got.Call.Prompt {
		t.Errorf("the answer after the tool's result: %+v (the first prompt %d tokens)", a, got.Call.Prompt)
	}
	isCall("streamed", got.Stream.Calls)
	if got.Stream.Finish != "tool_calls" || strings.Contains(got.Stream.Content, "<tool_call>") {
		t.Errorf("streamed: %+v", got.Stream)
	}
}

// ints is b as JSON decodes a list of numbers into any.
func ints(b []int) []any {
	out := []any{}
	for _, v := range b {
		out = append(out, float64(v))
	}
	return out
}

// jsonAny is v as JSON decodes it into any.
func jsonAny(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
