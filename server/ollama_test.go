package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"anechat/engine"
	"anechat/engine/load"
	"anechat/internal/sessions"
	"anechat/internal/testres"
)

// ollamaLine is a reply of /api/chat or /api/generate (or a line of its
// stream) as an Ollama client reads it.
type ollamaLine struct {
	Model     string `json:"model"`
	CreatedAt string `json:"created_at"`
	Message   *struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"message"`
	Response           *string  `json:"response"`
	Done               bool     `json:"done"`
	DoneReason         string   `json:"done_reason"`
	Context            []int32  `json:"context"`
	TotalDuration      int64    `json:"total_duration"`
	LoadDuration       int64    `json:"load_duration"`
	PromptEvalCount    int      `json:"prompt_eval_count"`
	PromptEvalDuration int64    `json:"prompt_eval_duration"`
	EvalCount          int      `json:"eval_count"`
	EvalDuration       int64    `json:"eval_duration"`
	Anechat            *figures `json:"anechat"`
	Error              *string  `json:"error"`
}

// text is the line's text: the message's content or the response.
func (l ollamaLine) text() string {
	if l.Message != nil {
		return l.Message.Content
	}
	if l.Response != nil {
		return *l.Response
	}
	return ""
}

// ollama posts body to path and decodes the whole (not streamed) reply,
// failing unless the status is want.
func (s *testServer) ollama(t *testing.T, path string, body map[string]any, want int) (ollamaLine, []byte) {
	t.Helper()
	if _, ok := body["stream"]; !ok {
		body["stream"] = false
	}
	resp, b := s.do(t, http.MethodPost, path, body)
	if resp.StatusCode != want {
		t.Fatalf("%s %v: status %d, want %d: %s", path, body, resp.StatusCode, want, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q", path, ct)
	}
	var l ollamaLine
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("%s: %q: %v", path, b, err)
	}
	return l, b
}

// ollamaStream posts body (streamed: Ollama's default, so "stream" is left
// out) and reads every NDJSON line, checking that each is one JSON object
// and that only the last is done.
func (s *testServer) ollamaStream(t *testing.T, path string, body map[string]any) []ollamaLine {
	t.Helper()
	delete(body, "stream")
	req := s.request(t, context.Background(), http.MethodPost, path, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%s: status %d, Content-Type %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var lines []ollamaLine
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l ollamaLine
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.DisallowUnknownFields()
		if err := d.Decode(&l); err != nil || d.More() {
			t.Fatalf("%s: line %d %q is not one reply object: %v", path, len(lines), sc.Bytes(), err)
		}
		if len(lines) > 0 && lines[len(lines)-1].Done {
			t.Fatalf("%s: a line after the done one: %q", path, sc.Bytes())
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(lines) == 0 || !lines[len(lines)-1].Done {
		t.Fatalf("%s: the stream did not end with a done line: %+v", path, lines)
	}
	return lines
}

// joined is the text of a stream's lines.
func joined(lines []ollamaLine) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.text())
	}
	return b.String()
}

// checkFinal checks a finished reply's shape: done, the reason, the counts
// and durations, the figures.
func checkFinal(t *testing.T, what string, l ollamaLine, reason string, promptTokens, evalTokens int) {
	t.Helper()
	created, err := time.Parse(time.RFC3339Nano, l.CreatedAt)
	if l.Model != "stories260K" || err != nil || time.Since(created) > time.Minute || !l.Done || l.DoneReason != reason {
		t.Fatalf("%s: %+v (created_at %v), want done, %s", what, l, err, reason)
	}
	if l.PromptEvalCount != promptTokens || l.EvalCount != evalTokens {
		t.Fatalf("%s: prompt_eval_count %d, eval_count %d; want %d and %d", what, l.PromptEvalCount, l.EvalCount, promptTokens, evalTokens)
	}
	// Nanoseconds: a reply of stories260K takes well over a microsecond and
	// well under a minute; the parts fit in the total.
	if l.TotalDuration < 1000 || l.TotalDuration > int64(time.Minute) || l.LoadDuration < 0 || l.PromptEvalDuration <= 0 || l.EvalDuration < 0 ||
		l.LoadDuration+l.PromptEvalDuration+l.EvalDuration > l.TotalDuration {
		t.Fatalf("%s: durations total %d, load %d, prompt %d, eval %d", what, l.TotalDuration, l.LoadDuration, l.PromptEvalDuration, l.EvalDuration)
	}
	if f := l.Anechat; f == nil || f.TargetCalls == 0 || f.PrefilledTokens+f.ResumedTokens != promptTokens {
		t.Fatalf("%s: anechat figures %+v", what, l.Anechat)
	}
}

func TestOllamaChat(t *testing.T) {
	s := startServer(t, "")
	msgs := []map[string]any{{"role": "system", "content": "Lily and Tom played in the park."}, {"role": "user", "content": "Once upon a time"}}
	// The same generation as the OpenAI route's.
	want := s.post(t, "/v1/chat/completions", map[string]any{"model": "stories260K", "messages": msgs, "max_tokens": 12}, http.StatusOK)

	body := map[string]any{"model": "stories260K", "messages": msgs, "options": map[string]any{"num_predict": 12}}
	l, raw := s.ollama(t, "/api/chat", body, http.StatusOK)
	if l.Message == nil || l.Message.Role != "assistant" || l.text() != want.text() || l.Response != nil || l.Context != nil {
		t.Fatalf("/api/chat: %s; want the message %q", raw, want.text())
	}
	checkFinal(t, "/api/chat", l, "length", want.Usage.PromptTokens, 12)

	// Streamed: each line a piece of the message, the last done with the
	// figures; together the same text.
	lines := s.ollamaStream(t, "/api/chat", body)
	if joined(lines) != want.text() || len(lines) < 3 {
		t.Fatalf("streamed %q in %d lines, want %q", joined(lines), len(lines), want.text())
	}
	for i, ln := range lines[:len(lines)-1] {
		if ln.Message == nil || ln.Message.Role != "assistant" || ln.Message.Content == "" || ln.DoneReason != "" || ln.EvalCount != 0 || ln.Anechat != nil {
			t.Fatalf("line %d: %+v", i, ln)
		}
	}
	last := lines[len(lines)-1]
	if last.Message == nil || last.Message.Content != "" {
		t.Fatalf("last line %+v: want an empty message", last)
	}
	checkFinal(t, "/api/chat streamed", last, "length", want.Usage.PromptTokens, 12)

	// A conversation's next turn resumes from KV what it shares with the
	// first turn's prompt (stories260K's plain template ends a turn
	// differently once the reply follows it: most, not all, of it).
	next := append(slices.Clone(msgs), map[string]any{"role": "assistant", "content": l.text()}, map[string]any{"role": "user", "content": "And then?"})
	l2, _ := s.ollama(t, "/api/chat", map[string]any{"model": "stories260K", "messages": next, "options": map[string]any{"num_predict": 4}}, http.StatusOK)
	if l2.Anechat == nil || l2.Anechat.ResumedTokens < want.Usage.PromptTokens/2 {
		t.Fatalf("next turn: %+v; want it to resume most of the first turn's %d prompt tokens", l2.Anechat, want.Usage.PromptTokens)
	}

	// Ollama's default tag names the same model.
	body["model"] = "stories260K:latest"
	if tl, raw := s.ollama(t, "/api/chat", body, http.StatusOK); tl.text() != want.text() || tl.Model != "stories260K" {
		t.Fatalf("stories260K:latest: %s", raw)
	}

	// No messages: Ollama's "load the model".
	l3, raw := s.ollama(t, "/api/chat", map[string]any{"model": "stories260K"}, http.StatusOK)
	if !l3.Done || l3.DoneReason != "load" || l3.Message == nil || l3.Message.Content != "" || l3.EvalCount != 0 {
		t.Fatalf("load: %s", raw)
	}
}

func TestOllamaGenerate(t *testing.T) {
	s := startServer(t, "")
	// Templated: the prompt as a user message, the system before it.
	sys := "You tell short stories."
	want := s.post(t, "/v1/chat/completions", map[string]any{"model": "stories260K", "max_tokens": 10,
		"messages": []map[string]any{{"role": "system", "content": sys}, {"role": "user", "content": "Once upon a time"}}}, http.StatusOK)
	body := map[string]any{"model": "stories260K", "prompt": "Once upon a time", "system": sys, "options": map[string]any{"num_predict": 10}}
	l, raw := s.ollama(t, "/api/generate", body, http.StatusOK)
	if l.Response == nil || l.Message != nil || l.text() != want.text() {
		t.Fatalf("/api/generate: %s; want the response %q", raw, want.text())
	}
	checkFinal(t, "/api/generate", l, "length", want.Usage.PromptTokens, 10)
	if len(l.Context) != l.PromptEvalCount+l.EvalCount {
		t.Fatalf("context of %d ids, want the prompt's %d and the reply's %d", len(l.Context), l.PromptEvalCount, l.EvalCount)
	}
	lines := s.ollamaStream(t, "/api/generate", body)
	if last := lines[len(lines)-1]; joined(lines) != want.text() || last.Response == nil || *last.Response != "" || !slices.Equal(last.Context, l.Context) {
		t.Fatalf("streamed %q, context %v; want %q, %v", joined(lines), last.Context, want.text(), l.Context)
	}

	// Raw: the text as `anechat generate --raw`, as /v1/completions.
	wantRaw := s.post(t, "/v1/completions", map[string]any{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 10}, http.StatusOK)
	rl, raw := s.ollama(t, "/api/generate", map[string]any{"model": "stories260K", "prompt": "Once upon a time", "raw": true,
		"options": map[string]any{"num_predict": 10}}, http.StatusOK)
	if rl.text() != wantRaw.text() || rl.PromptEvalCount != len(testres.StoriesPrompt()) {
		t.Fatalf("raw: %s; want %q", raw, wantRaw.text())
	}
	if !slices.Equal(rl.Context[:rl.PromptEvalCount], testres.StoriesPrompt()) {
		t.Fatalf("raw context %v does not begin with the prompt %v", rl.Context, testres.StoriesPrompt())
	}

	// The context sent back: the prompt continues it token for token (its
	// own BOS dropped), resumed from the KV the first reply left.
	cont := " The end."
	var contIDs []int32
	if err := s.run.Do(context.Background(), testres.Stories(t), func(m *sessions.Model) error {
		contIDs = m.Tokenizer().Encode(cont)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cl, raw := s.ollama(t, "/api/generate", map[string]any{"model": "stories260K", "prompt": cont, "raw": true, "context": rl.Context,
		"options": map[string]any{"num_predict": 6}}, http.StatusOK)
	if cl.PromptEvalCount != len(rl.Context)+len(contIDs) || !slices.Equal(cl.Context[:cl.PromptEvalCount], append(slices.Clone(rl.Context), contIDs...)) {
		t.Fatalf("continued: %s; want the prompt %v then %v", raw, rl.Context, contIDs)
	}
	if cl.Anechat.ResumedTokens < rl.PromptEvalCount {
		t.Fatalf("continued: resumed %d tokens, want at least the first prompt's %d", cl.Anechat.ResumedTokens, rl.PromptEvalCount)
	}
	// The same ids through /v1/completions' path from scratch give the same
	// reply: the context is honoured exactly.
	fresh := startServer(t, "", func(_ *testing.T, _ *Config, ts *testServer) { ts.noStore = true })
	var direct []string
	if err := fresh.run.Do(context.Background(), testres.Stories(t), func(m *sessions.Model) error {
		_, err := m.Reply(context.Background(), sessions.Request{Mode: sessions.IDs, Prompt: cl.Context[:cl.PromptEvalCount],
			Options: engine.GenerateOptions{MaxTokens: 6, Width: 1},
			Emit:    func(t engine.Token) error { direct = append(direct, t.Text); return nil }})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(direct, "") != cl.text() {
		t.Fatalf("continued %q, the same ids from scratch %q", cl.text(), strings.Join(direct, ""))
	}

	// No prompt: load the model.
	if l, raw := s.ollama(t, "/api/generate", map[string]any{"model": "stories260K"}, http.StatusOK); l.DoneReason != "load" || l.Response == nil || *l.Response != "" {
		t.Fatalf("load: %s", raw)
	}
}

func TestOllamaOptions(t *testing.T) {
	s := startServer(t, "")
	chatBody := func(opts map[string]any) map[string]any {
		return map[string]any{"model": "stories260K", "messages": []map[string]any{{"role": "user", "content": "Once upon a time"}}, "options": opts}
	}
	// Sampled with a seed: the OpenAI route's reply for the same settings,
	// again the same.
	want := s.post(t, "/v1/chat/completions", user("Once upon a time", "max_tokens", 16, "temperature", 0.9, "top_p", 0.95, "seed", 7), http.StatusOK)
	for range 2 {
		l, _ := s.ollama(t, "/api/chat", chatBody(map[string]any{"num_predict": 16, "temperature": 0.9, "top_p": 0.95, "seed": 7}), http.StatusOK)
		if l.text() != want.text() {
			t.Fatalf("sampled %q, want %q", l.text(), want.text())
		}
	}
	// A stop string ends the reply before it: done_reason stop.
	greedy, _ := s.ollama(t, "/api/chat", chatBody(map[string]any{"num_predict": 24}), http.StatusOK)
	words := strings.Fields(greedy.text())
	if len(words) < 3 {
		t.Fatalf("greedy reply %q: too short to stop in", greedy.text())
	}
	stop := words[2]
	at := strings.Index(greedy.text(), stop)
	for _, stream := range []bool{false, true} {
		body := chatBody(map[string]any{"num_predict": 24, "stop": []string{stop}})
		var l ollamaLine
		if stream {
			lines := s.ollamaStream(t, "/api/chat", body)
			l = lines[len(lines)-1]
			l.Message.Content = joined(lines)
		} else {
			l, _ = s.ollama(t, "/api/chat", body, http.StatusOK)
		}
		if l.text() != greedy.text()[:at] || l.DoneReason != "stop" {
			t.Fatalf("stop %q (stream %v): %q (%s), want %q", stop, stream, l.text(), l.DoneReason, greedy.text()[:at])
		}
	}
	// num_ctx: the reply stops where the window is full.
	n := promptLen(t, s, "Once upon a time")
	l, _ := s.ollama(t, "/api/chat", chatBody(map[string]any{"num_ctx": n + 3}), http.StatusOK)
	if l.EvalCount != 3 || l.DoneReason != "length" || !strings.HasPrefix(greedy.text(), l.text()) {
		t.Fatalf("num_ctx %d: %+v, want 3 tokens of %q", n+3, l, greedy.text())
	}
	// Runtime options and neutral values change nothing.
	l, _ = s.ollama(t, "/api/chat", chatBody(map[string]any{"num_predict": 24, "num_thread": 2, "num_gpu": 99, "top_k": 0, "repeat_penalty": 1,
		"repeat_last_n": 64, "use_mmap": true, "seed": -1, "stop": nil}), http.StatusOK)
	if l.text() != greedy.text() {
		t.Fatalf("with neutral options %q, want %q", l.text(), greedy.text())
	}
	for _, ka := range []any{"5m", 0, -1, "0", 300.5} {
		if l, _ := s.ollama(t, "/api/chat", map[string]any{"model": "stories260K", "keep_alive": ka,
			"messages": []map[string]any{{"role": "user", "content": "Once upon a time"}}, "options": map[string]any{"num_predict": 2}}, http.StatusOK); l.EvalCount != 2 {
			t.Fatalf("keep_alive %v: %+v", ka, l)
		}
	}
}

// An Ollama error: the status and the one field "error", naming the field
// at fault.
func TestOllamaErrors(t *testing.T) {
	s := startServer(t, "")
	var ctxLen int
	if err := s.run.Do(context.Background(), testres.Stories(t), func(m *sessions.Model) error {
		ctxLen = m.Backend().Config().ContextLen
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	msgs := []map[string]any{{"role": "user", "content": "Once upon a time"}}
	chatWith := func(extra ...any) map[string]any {
		m := map[string]any{"model": "stories260K", "messages": msgs, "stream": false}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	genWith := func(extra ...any) map[string]any {
		m := map[string]any{"model": "stories260K", "prompt": "Once upon a time", "stream": false}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
		says   string
		header []string
	}{
		{"not JSON", "POST", "/api/chat", "{", 400, "not valid JSON", nil},
		{"no model", "POST", "/api/chat", map[string]any{"messages": msgs}, 400, "model: required", nil},
		{"unknown model", "POST", "/api/chat", chatWith("model", "llama3"), 404, `model "llama3" not found`, nil},
		{"unknown model, generate", "POST", "/api/generate", genWith("model", "llama3"), 404, `model "llama3" not found`, nil},
		{"unknown model, show", "POST", "/api/show", map[string]any{"model": "llama3"}, 404, `model "llama3" not found`, nil},
		{"another tag", "POST", "/api/chat", chatWith("model", "stories260K:q8"), 404, `model "stories260K:q8" not found`, nil},
		{"show without a model", "POST", "/api/show", map[string]any{}, 400, "model: required", nil},
		{"messages of the wrong type", "POST", "/api/chat", chatWith("messages", "hi"), 400, "messages: want an array", nil},
		{"temperature out of range", "POST", "/api/chat", chatWith("options", map[string]any{"temperature": 5}), 400, "options.temperature: 5", nil},
		{"temperature not a number", "POST", "/api/chat", chatWith("options", map[string]any{"temperature": "hot"}), 400, "options.temperature: want a number", nil},
		{"top_p 0", "POST", "/api/chat", chatWith("options", map[string]any{"top_p": 0}), 400, "options.top_p", nil},
		{"top_k", "POST", "/api/chat", chatWith("options", map[string]any{"top_k": 40}), 400, "options.top_k: 40: not supported", nil},
		{"repeat_penalty", "POST", "/api/chat", chatWith("options", map[string]any{"repeat_penalty": 1.1}), 400, "options.repeat_penalty", nil},
		{"unknown option", "POST", "/api/chat", chatWith("options", map[string]any{"warmth": 1}), 400, "options.warmth: not an option", nil},
		{"options not an object", "POST", "/api/chat", chatWith("options", []int{1}), 400, "options: want an object", nil},
		{"num_predict 0", "POST", "/api/generate", genWith("options", map[string]any{"num_predict": 0}), 400, "options.num_predict: 0", nil},
		{"num_ctx 0", "POST", "/api/generate", genWith("options", map[string]any{"num_ctx": 0}), 400, "options.num_ctx: 0", nil},
		{"num_ctx past the model's", "POST", "/api/generate", genWith("options", map[string]any{"num_ctx": 1 << 20}), 400, "options.num_ctx: 1048576: the model's context holds", nil},
		{"num_ctx under the prompt", "POST", "/api/generate", genWith("options", map[string]any{"num_ctx": 2}), 413, "options.num_ctx: the prompt is", nil},
		{"an empty stop", "POST", "/api/chat", chatWith("options", map[string]any{"stop": []string{"x", ""}}), 400, "options.stop[1]", nil},
		{"too many stops", "POST", "/api/chat", chatWith("options", map[string]any{"stop": strings.Split("abcdefghijklmnopq", "")}), 400, "options.stop: 17 strings", nil},
		{"vocab_only", "POST", "/api/chat", chatWith("options", map[string]any{"vocab_only": true}), 400, "options.vocab_only", nil},
		{"format json", "POST", "/api/chat", chatWith("format", "json"), 400, "format: structured output", nil},
		{"format schema", "POST", "/api/generate", genWith("format", map[string]any{"type": "object"}), 400, "format: structured output", nil},
		{"tools", "POST", "/api/chat", chatWith("tools", []map[string]any{{"type": "function", "function": map[string]any{"name": "f"}}}), 400, "tools: function calling", nil},
		{"a tool message", "POST", "/api/chat", chatWith("messages", []map[string]any{{"role": "tool", "content": "42"}}), 400, "messages[0].role", nil},
		{"tool calls", "POST", "/api/chat", chatWith("messages", []map[string]any{{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{}}}}), 400, "messages[0].tool_calls", nil},
		{"a bad role", "POST", "/api/chat", chatWith("messages", []map[string]any{{"role": "narrator", "content": "x"}}), 400, `messages[0].role: "narrator"`, nil},
		{"images", "POST", "/api/chat", chatWith("messages", []map[string]any{{"role": "user", "content": "x", "images": []string{"aGk="}}}), 400, "messages[0].images", nil},
		{"thinking", "POST", "/api/chat", chatWith("think", true), 400, "think: true", nil},
		{"logprobs", "POST", "/api/chat", chatWith("logprobs", true), 400, "logprobs: log-probabilities", nil},
		{"keep_alive", "POST", "/api/chat", chatWith("keep_alive", "soon"), 400, "keep_alive: want", nil},
		{"prompt on chat", "POST", "/api/chat", chatWith("prompt", "x"), 400, "prompt: a field of /api/generate", nil},
		{"messages on generate", "POST", "/api/generate", genWith("messages", msgs), 400, "messages: a field of /api/chat", nil},
		{"template", "POST", "/api/generate", genWith("template", "{{ .Prompt }}"), 400, "template: not supported", nil},
		{"suffix", "POST", "/api/generate", genWith("suffix", "end"), 400, "suffix: not supported", nil},
		{"system with raw", "POST", "/api/generate", genWith("raw", true, "system", "be brief"), 400, "system: not used with \"raw\": true", nil},
		{"a context id out of range", "POST", "/api/generate", genWith("context", []int{1, 999999}), 400, "context[1]: 999999 is not a token id", nil},
		{"a context id negative", "POST", "/api/generate", genWith("context", []int{-3}), 400, "context[0]: -3", nil},
		{"context not ids", "POST", "/api/generate", genWith("context", "abc"), 400, "context: want an array", nil},
		{"a prompt past the context", "POST", "/api/generate", genWith("prompt", strings.Repeat("dog ", ctxLen+1)), 413, "prompt: the prompt is", nil},
		{"no token", "POST", "/api/chat", chatWith(), 401, "missing or wrong bearer token", []string{"Authorization", ""}},
		{"a rebound Host", "GET", "/api/tags", nil, 403, "the Host header", []string{"Host", "evil.example:80"}},
		{"no such route", "GET", "/api/ps", nil, 404, "no such endpoint: GET /api/ps", nil},
	} {
		resp, b := s.do(t, c.method, c.path, c.body, c.header...)
		var e map[string]any
		err := json.Unmarshal(b, &e)
		msg, _ := e["error"].(string)
		if resp.StatusCode != c.status || err != nil || len(e) != 1 || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %d %.300s; want %d and {\"error\": ...%s...}", c.name, resp.StatusCode, b, c.status, c.says)
		}
		if strings.Contains(msg, testres.Stories(t)) {
			t.Errorf("%s: the error names the model's file: %s", c.name, msg)
		}
	}
}

func TestOllamaTagsShowVersion(t *testing.T) {
	s := startServer(t, "")
	path := testres.Stories(t)
	src, err := load.Detect(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	var tags struct {
		Models []struct {
			Name, Model, ModifiedAt, Digest string
			Size                            int64
			Details                         ollamaDetails
		}
	}
	resp, b := s.do(t, http.MethodGet, "/api/tags", nil)
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&tags); resp.StatusCode != 200 || err != nil || len(tags.Models) != 1 {
		t.Fatalf("/api/tags: %d %s: %v", resp.StatusCode, b, err)
	}
	m := tags.Models[0]
	if m.Name != "stories260K" || m.Model != "stories260K" || m.Size != st.Size() || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(m.Digest) ||
		m.Details.Format != "gguf" || m.Details.Family != "llama" || !slices.Equal(m.Details.Families, []string{"llama"}) ||
		m.Details.QuantizationLevel != src.Quant || m.Details.QuantizationLevel == "" || m.Details.ParameterSize != humanCount(src.Params) {
		t.Fatalf("/api/tags: %s (detected %+v)", b, src)
	}
	// stories260K has about 260 thousand weights.
	if src.Params < 200_000 || src.Params > 320_000 || m.Details.ParameterSize == "" {
		t.Fatalf("parameters %d (%q)", src.Params, m.Details.ParameterSize)
	}

	var show struct {
		Parameters   string
		Details      ollamaDetails
		ModelInfo    map[string]any `json:"model_info"`
		Capabilities []string
	}
	var cfgCtx, cfgVocab int
	if err := s.run.Do(context.Background(), path, func(m *sessions.Model) error {
		cfgCtx, cfgVocab = m.Backend().Config().ContextLen, m.Backend().Config().VocabSize
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"model", "name"} {
		resp, b = s.do(t, http.MethodPost, "/api/show", map[string]any{field: "stories260K"})
		if err := json.Unmarshal(b, &show); resp.StatusCode != 200 || err != nil {
			t.Fatalf("/api/show: %d %s", resp.StatusCode, b)
		}
		mi := show.ModelInfo
		if show.Details.Family != "llama" || show.Details.ParameterSize != m.Details.ParameterSize || mi["general.architecture"] != "llama" ||
			mi["llama.context_length"] != float64(cfgCtx) || mi["llama.vocab_size"] != float64(cfgVocab) || mi["general.parameter_count"] != float64(src.Params) ||
			!slices.Equal(show.Capabilities, []string{"completion"}) || !strings.Contains(show.Parameters, fmt.Sprintf("num_ctx %d\n", cfgCtx)) {
			t.Fatalf("/api/show {%q}: %s", field, b)
		}
	}

	resp, b = s.do(t, http.MethodGet, "/api/version", nil)
	var v map[string]string
	if err := json.Unmarshal(b, &v); resp.StatusCode != 200 || err != nil || len(v) != 1 || !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v["version"]) {
		t.Fatalf("/api/version: %d %s", resp.StatusCode, b)
	}
}

// The parameter counts as Ollama's details write them.
func TestHumanCount(t *testing.T) {
	for n, want := range map[int64]string{0: "", 999: "999", 260_000: "260K", 292_608: "293K", 134_515_008: "134.5M", 8_030_261_248: "8.0B"} {
		if got := humanCount(n); got != want {
			t.Errorf("humanCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzOllamaRequest: no body, however malformed, panics the checks of
// /api/chat or /api/generate.
func FuzzOllamaRequest(f *testing.F) {
	for _, s := range []string{`{"model":"m","messages":[{"role":"user","content":"hi"}],"options":{"temperature":0.5,"stop":["a"],"num_ctx":9}}`,
		`{"model":"m","prompt":"p","raw":true,"context":[1,2],"keep_alive":"5m","format":"json"}`,
		`{"model":"m","options":{"num_predict":-1,"seed":-1,"top_k":0}}`, `{"options":null}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r ollamaRequest
		if json.Unmarshal(b, &r) != nil {
			return
		}
		for _, gen := range []bool{false, true} {
			j, e := r.job(gen, DefaultDefaults())
			if e == nil && (j.ollama == nil || j.p.model == "") {
				t.Fatalf("%s: a job without its model: %+v", b, j)
			}
			if e != nil && (e.status < 400 || e.msg == "") {
				t.Fatalf("%s: error %+v", b, e)
			}
		}
	})
}

// Past the queue an Ollama request is refused in Ollama's shape, with
// Retry-After, as the OpenAI routes refuse theirs; the queued ones run.
func TestOllamaQueueFull(t *testing.T) {
	s := startServer(t, "", withGate, func(_ *testing.T, c *Config, _ *testServer) { c.Queue = 1 })
	s.gate.arm(0) // the first request's prefill blocks
	body := func() map[string]any {
		return map[string]any{"model": "stories260K", "stream": false, "messages": []map[string]any{{"role": "user", "content": "Once upon a time"}},
			"options": map[string]any{"num_predict": 4}}
	}
	results := make(chan int, 2)
	send := func() {
		go func() {
			resp, _ := s.do(t, http.MethodPost, "/api/chat", body())
			results <- resp.StatusCode
		}()
	}
	send()
	<-s.gate.blocked
	send()
	for s.srv.queue.waitingN() < 1 {
		time.Sleep(time.Millisecond)
	}
	resp, b := s.do(t, http.MethodPost, "/api/chat", body())
	var e map[string]string
	if err := json.Unmarshal(b, &e); resp.StatusCode != 503 || err != nil || resp.Header.Get("Retry-After") == "" || len(e) != 1 || !strings.Contains(e["error"], "busy") {
		t.Fatalf("a request past the queue: %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	s.gate.open()
	for range 2 {
		if code := <-results; code != 200 {
			t.Fatalf("a queued request got %d", code)
		}
	}
}
