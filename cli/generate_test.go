package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"anechat/engine"
	"anechat/internal/testres"
)

func TestGenerateJSON(t *testing.T) {
	for _, width := range []string{"1", "4"} {
		t.Run("width"+width, func(t *testing.T) { testGenerateJSON(t, width) })
	}
}

func testGenerateJSON(t *testing.T, width string) {
	var out, errb bytes.Buffer
	args := []string{"generate", "--model", testres.Stories(t), "--prompt-ids", "1 403 407 261 378", "--max-tokens", "60", "--json", "--no-cache", "--width", width}
	if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		PromptIDs []int32        `json:"prompt_ids"`
		IDs       []int32        `json:"ids"`
		Text      *string        `json:"text"`
		Stats     map[string]any `json:"stats"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	want := testres.StoriesGreedy()
	if !slices.Equal(got.IDs, want) || !slices.Equal(got.PromptIDs, testres.StoriesPrompt()) || got.Text == nil {
		t.Fatalf("output %s", out.String())
	}
	for _, k := range []string{"width", "stopped", "target_calls", "drafted", "accepted", "declined", "probes", "prefill_tokens", "resumed_tokens", "ttft_ms", "decode_tok_s"} {
		if _, ok := got.Stats[k]; !ok {
			t.Errorf("stats lack %q: %s", k, out.String())
		}
	}
	if got.Stats["prefill_tokens"] != float64(5) || (width == "1" && got.Stats["target_calls"] != float64(59)) ||
		got.Stats["stopped"] != "length" || got.Stats["width"] != float64(map[string]int{"1": 1, "4": 4}[width]) {
		t.Errorf("stats %v", got.Stats)
	}
	// A reply that drafted nothing at width 4 says why; width 1 says nothing.
	note, _ := got.Stats["draft_note"].(string)
	if (width == "1" && note != "") || (width != "1" && got.Stats["drafted"] == float64(0) && note == "") {
		t.Errorf("width %s: drafted %v, draft_note %q", width, got.Stats["drafted"], note)
	}
}

// TestDraftNoteLine: the stats line ends with why the reply drafted less
// than it could, and with nothing when nothing held it back.
func TestDraftNoteLine(t *testing.T) {
	var st engine.Stats
	if got := draftNote(st); got != "" {
		t.Fatalf("no note: %q", got)
	}
	st.DraftNote = "drafting paused: wide calls measured 3.1x width 1"
	if got := draftNote(st); got != "; drafting paused: wide calls measured 3.1x width 1" {
		t.Fatalf("note: %q", got)
	}
}

func TestGenerateErrors(t *testing.T) {
	var out, errb bytes.Buffer
	empty := t.TempDir()
	if code := Run(context.Background(), []string{"generate", "--prompt", "x", "--data-dir", empty}, nil, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "pass --model PATH, or put a .gguf file in "+filepath.Join(empty, "models")) {
		t.Fatalf("no --model and no model in the data dir: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00"), 0o644)
	if code := Run(context.Background(), []string{"generate", "--model", bad, "--prompt-ids", "1", "--no-cache"}, nil, &out, &errb); code != 1 || !strings.Contains(errb.String(), "bad.gguf") {
		t.Fatalf("corrupt model: exit %d, %s", code, errb.String())
	}
}

// TestGenerateText: --prompt with --raw goes through the GGUF tokenizer.
func TestGenerateText(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"generate", "--model", testres.Stories(t), "--prompt", "Once upon a time", "--raw", "--max-tokens", "60", "--json", "--no-cache"}
	if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		PromptIDs []int32 `json:"prompt_ids"`
		Text      string  `json:"text"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily"
	if !slices.Equal(got.PromptIDs, testres.StoriesPrompt()) || got.Text != want {
		t.Fatalf("prompt %v text %q", got.PromptIDs, got.Text)
	}
}

// TestStatsLineWords: the stats line says "drafted N, accepted M" in that
// order, the words and meaning of the window's stats line ("drafted 4 ·
// accepted 3") and the API's drafted/accepted: drafted is the draft tokens
// sent for checking, accepted those the model confirmed (never more).
func TestStatsLineWords(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"generate", "--model", testres.Stories(t), "--prompt", "Once upon a time", "--raw", "--max-tokens", "60", "--width", "4", "--no-cache"}
	if code := Run(context.Background(), args, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	m := regexp.MustCompile(`, drafted (\d+), accepted (\d+), `).FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("stats line without drafted/accepted: %q", errb.String())
	}
	d, _ := strconv.Atoi(m[1])
	a, _ := strconv.Atoi(m[2])
	if a > d {
		t.Fatalf("accepted %d > drafted %d: the two are swapped in %q", a, d, errb.String())
	}
}
