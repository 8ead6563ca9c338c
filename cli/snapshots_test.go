package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestGenerateResume runs `anechat generate` twice with the same long prompt
// and a data dir: the second run resumes the stored prefix and prints the
// same ids; --no-cache prefills everything.
func TestGenerateResume(t *testing.T) {
	model := storiesForCLI(t)
	home := t.TempDir()
	prompt := make([]string, 150)
	for i := range prompt {
		prompt[i] = fmt.Sprint(3 + (i*37+i*i)%500)
	}
	prompt[0] = "1"
	gen := func(extra ...string) generateJSON {
		t.Helper()
		var out, errb bytes.Buffer
		args := append([]string{"generate", "--model", model, "--prompt-ids", strings.Join(prompt, " "), "--max-tokens", "20", "--json", "--data-dir", home}, extra...)
		if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var g generateJSON
		if err := json.Unmarshal(out.Bytes(), &g); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
		return g
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
