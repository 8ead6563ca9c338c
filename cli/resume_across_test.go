package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"anechat/internal/testres"
)

// apiFigures is what the resume tests read of a chat completion: its text
// and anechat's figures.
type apiFigures struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Anechat *struct {
		ResumedTokens   int `json:"resumed_tokens"`
		PrefilledTokens int `json:"prefilled_tokens"`
	} `json:"anechat"`
}

// chatAPI sends msgs (role, content pairs) to the server's chat completions,
// greedy, for up to 20 tokens, and returns the reply.
func chatAPI(t *testing.T, s *served, msgs ...string) apiFigures {
	t.Helper()
	var m []map[string]string
	for i := 0; i+1 < len(msgs); i += 2 {
		m = append(m, map[string]string{"role": msgs[i], "content": msgs[i+1]})
	}
	var r apiFigures
	if code := s.post(t, "/v1/chat/completions", map[string]any{"model": "stories260K", "max_tokens": 20, "temperature": 0, "messages": m}, &r); code != 200 || len(r.Choices) != 1 || r.Anechat == nil {
		t.Fatalf("chat completion %v: %d %+v", msgs, code, r)
	}
	return r
}

// chatStats runs a one-turn `anechat chat --stats` with args and returns
// its answer and the prompt tokens its stats line says it prefilled.
func chatStats(t *testing.T, msg string, args ...string) (string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"chat", "--stats"}, args...)
	if code := Run(context.Background(), args, strings.NewReader(msg+"\n"), &out, &errb); code != 0 {
		t.Fatalf("chat exit %d: %s", code, errb.String())
	}
	turns := strings.Split(out.String(), "\n> ")
	var n int
	if _, err := fmt.Sscanf(errb.String(), "[%d prompt tokens,", &n); err != nil || len(turns) != 3 {
		t.Fatalf("chat %v: %q, stats %q (%v)", args, out.String(), errb.String(), err)
	}
	return turns[1], n
}

// TestCLIAndAPIResumeEachOther: the CLI and the API run on one manager
// (internal/sessions), so a conversation started in one resumes in the
// other from the KV snapshot it left in the data directory (after the first
// has exited), and writes what a fresh run writes, byte for byte. CLI chat
// to the API: the conversation's second turn sent to the API resumes the
// first turn's prefix. The API to the CLI: generate and chat, given the
// message the API answered, resume it.
func TestCLIAndAPIResumeEachOther(t *testing.T) {
	model := testres.Stories(t)
	// Snapshots are matched by blocks of kv.BlockSize (64) tokens: the
	// messages are longer than one (and trimmed, as chat trims its lines).
	first := strings.TrimSpace(strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside. ", 4))
	second := strings.TrimSpace(strings.Repeat("The little dog ran to the park with his ball and played in the sun. ", 4))

	// The CLI's chat, then the API.
	home := t.TempDir()
	out := runChatWith(t, first+"\n", "--model", model, "--max-tokens", "20", "--data-dir", home)
	turns := strings.Split(out, "\n> ")
	if len(turns) != 3 || strings.TrimSpace(turns[1]) == "" {
		t.Fatalf("chat transcript (%d parts): %q", len(turns), out)
	}
	answer := strings.TrimSpace(turns[1])
	conv := []string{"user", first, "assistant", answer, "user", second}
	fresh := startServe(t, "--data-dir", t.TempDir(), "--model", model)
	want := chatAPI(t, fresh, conv...)
	fresh.stop()
	if want.Anechat.ResumedTokens != 0 || want.Choices[0].Message.Content == "" {
		t.Fatalf("a fresh server's reply: %+v", want)
	}
	s := startServe(t, "--data-dir", home, "--model", model)
	got := chatAPI(t, s, conv...)
	s.stop()
	if got.Anechat.ResumedTokens == 0 || got.Choices[0].Message.Content != want.Choices[0].Message.Content {
		t.Fatalf("the API after the CLI's chat: %q, resumed %d tokens; fresh: %q", got.Choices[0].Message.Content, got.Anechat.ResumedTokens, want.Choices[0].Message.Content)
	}

	// The API, then the CLI's generate and chat.
	freshGen := genJSON(t, "--model", model, "--prompt", second, "--max-tokens", "20", "--no-cache")
	freshChat, freshPrefill := chatStats(t, second, "--model", model, "--max-tokens", "20", "--no-cache")
	for _, cmd := range []string{"generate", "chat"} {
		home := t.TempDir()
		s := startServe(t, "--data-dir", home, "--model", model)
		api := chatAPI(t, s, "user", second)
		s.stop()
		if api.Choices[0].Message.Content != freshGen.Text {
			t.Fatalf("API %q, generate %q", api.Choices[0].Message.Content, freshGen.Text)
		}
		if cmd == "generate" {
			g := genJSON(t, "--model", model, "--prompt", second, "--max-tokens", "20", "--data-dir", home)
			if g.Stats.ResumedTokens == 0 || g.Text != freshGen.Text || g.Stats.ResumedTokens+g.Stats.PrefillTokens != len(freshGen.PromptIDs) {
				t.Fatalf("generate after the API: %q, %+v; fresh: %q (%d prompt ids)", g.Text, g.Stats, freshGen.Text, len(freshGen.PromptIDs))
			}
			continue
		}
		c, prefill := chatStats(t, second, "--model", model, "--max-tokens", "20", "--data-dir", home)
		if c != freshChat || freshPrefill != len(freshGen.PromptIDs) || prefill >= freshPrefill {
			t.Fatalf("chat after the API: %q, %d prompt tokens prefilled; fresh: %q, %d (%d prompt ids)", c, prefill, freshChat, freshPrefill, len(freshGen.PromptIDs))
		}
	}
}
