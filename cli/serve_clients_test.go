package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"anechat/internal/testres"
)

// realClientsEnv, set to 1, runs TestRealClients: `make api-clients` (a step
// of make test) sets it after build/scripts/deps-openai.sh installed the
// client, so the test runs once per make test rather than again in go test.
const realClientsEnv = "ANECHAT_REAL_CLIENTS"

// TestRealClients drives `anechat serve` on stories260K with real clients:
// the official openai Python package (a chat completion, a streamed one,
// usage, errors, a stream cancelled halfway, a text completion), the
// official ollama one on the Ollama routes (realOllamaClient) and curl, for
// the raw server-sent events.
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
		Models      []string
		Interleaved [][]struct {
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
}
