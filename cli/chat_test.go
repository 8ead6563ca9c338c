package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"anechat/internal/testres"
)

// smolLM2Path is SmolLM2 as deps-tokenizer.sh installs it under
// build/testdeps (never the user's data directory).
func smolLM2Path(t *testing.T) string {
	t.Helper()
	return testres.SmolLM2GGUF(t)
}

// runChatWith runs `anechat chat` with input and args, in a temporary data
// directory unless args give --data-dir (the last one counts).
func runChatWith(t *testing.T, input string, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	args = append([]string{"chat", "--data-dir", t.TempDir()}, args...)
	if code := Run(context.Background(), args, strings.NewReader(input), &out, &errb); code != 0 {
		t.Fatalf("chat exit %d: %s", code, errb.String())
	}
	return out.String()
}

// TestChatSmolLM2 holds a short two-turn chat with a real instruct model; the
// second answer needs the first turn's context (the session continues).
func TestChatSmolLM2(t *testing.T) {
	out := runChatWith(t, "What is the capital of France?\nAnd of Italy?\n", "--model", smolLM2Path(t), "--max-tokens", "40")
	turns := strings.Split(out, "\n> ")
	if len(turns) < 3 || !strings.Contains(turns[1], "Paris") || !strings.Contains(turns[2], "Rome") {
		t.Fatalf("chat transcript:\n%s", out)
	}
}

// TestChatStories: the plain template on a story model, /reset and /quit.
func TestChatStories(t *testing.T) {
	out := runChatWith(t, "Once upon a time\n/reset\nOnce upon a time\n/quit\nnever read\n", "--model", testres.Stories(t), "--max-tokens", "20")
	turns := strings.Split(out, "\n> ")
	if len(turns) != 5 || !strings.Contains(turns[2], "(conversation reset)") || turns[1] != turns[3] || !strings.Contains(turns[1], "Lily") {
		t.Fatalf("chat transcript (%d parts):\n%q", len(turns), out)
	}
}
