package cli

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"anechat/internal/testres"
)

// TestGenerateResume runs `anechat generate` twice with the same long prompt
// and a data dir: the second run resumes the stored prefix and prints the
// same ids; --no-cache prefills everything.
func TestGenerateResume(t *testing.T) {
	model := testres.Stories(t)
	home := t.TempDir()
	gen := func(extra ...string) generateJSON {
		t.Helper()
		return genJSON(t, append([]string{"--model", model, "--prompt-ids", longPromptIDs(), "--max-tokens", "20", "--data-dir", home}, extra...)...)
	}
	first := gen()
	if first.Stats.ResumedTokens != 0 || first.Stats.PrefillTokens != 150 {
		t.Errorf("first run: %+v", first.Stats)
	}
	second := gen()
	// The first run saved prompt + 19 generated tokens (the last one is not
	// in the cache); the second resumes all but the prompt's last token.
	if second.Stats.ResumedTokens != 149 || second.Stats.PrefillTokens != 1 {
		t.Errorf("second run: %+v", second.Stats)
	}
	if !slices.Equal(first.IDs, second.IDs) || first.Text != second.Text {
		t.Errorf("resumed ids %v, fresh %v", second.IDs, first.IDs)
	}
	third := gen("--no-cache")
	if third.Stats.ResumedTokens != 0 || third.Stats.PrefillTokens != 150 || !slices.Equal(third.IDs, first.IDs) {
		t.Errorf("--no-cache run: %+v %v", third.Stats, third.IDs)
	}
}

// TestGenerateResumeText: a long --raw text prompt resumes on the second run
// with the same ids and text, and a snapshot made from ids does not serve it
// (another binding).
func TestGenerateResumeText(t *testing.T) {
	model := testres.Stories(t)
	home := t.TempDir()
	text := strings.Repeat("Once upon a time, there was a little girl named Lily. She loved to play outside. ", 4)
	run := func(args ...string) generateJSON {
		t.Helper()
		return genJSON(t, append([]string{"--model", model, "--max-tokens", "16", "--data-dir", home}, args...)...)
	}
	first := run("--raw", "--prompt", text)
	if len(first.PromptIDs) <= 64 || first.Stats.ResumedTokens != 0 {
		t.Fatalf("first run: %d prompt ids, %+v", len(first.PromptIDs), first.Stats)
	}
	ids := make([]string, len(first.PromptIDs))
	for i, id := range first.PromptIDs {
		ids[i] = fmt.Sprint(id)
	}
	// Same ids given as --prompt-ids: bound to "ids", not to the tokenizer.
	if g := run("--prompt-ids", strings.Join(ids, " ")); g.Stats.ResumedTokens != 0 || !slices.Equal(g.IDs, first.IDs) {
		t.Errorf("--prompt-ids run used the --raw snapshot: %+v", g.Stats)
	}
	second := run("--raw", "--prompt", text)
	if second.Stats.ResumedTokens != len(first.PromptIDs)-1 || second.Text != first.Text || !slices.Equal(second.IDs, first.IDs) {
		t.Errorf("second run: %+v, text %q vs %q", second.Stats, second.Text, first.Text)
	}
}
