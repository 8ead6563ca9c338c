package cpu_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"anechat/engine"
	"anechat/engine/chat"
)

// TestGemma4EndToEnd drives the fixture the way the app does: engine.Open
// (safetensors directory + its tokenizer.json), the prompt from text (raw, or
// the Gemma 4 chat template), then a Session's batched prefill and greedy
// generation. The prompt ids equal the `tokenizers` library's and the 64
// generated ids transformers' greedy ids.
func TestGemma4EndToEnd(t *testing.T) {
	dir := filepath.Join("testdata", "gemma4")
	b, tok, err := engine.Open(filepath.Join(dir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.(io.Closer).Close()
	if cfg := b.Config(); cfg.Arch != "gemma4" || tok.VocabSize() != cfg.VocabSize {
		t.Fatalf("arch %q, tokenizer of %d for %d logits", cfg.Arch, tok.VocabSize(), cfg.VocabSize)
	}
	data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Cases []struct {
			Name     string  `json:"name"`
			Text     string  `json:"text"`
			ChatUser string  `json:"chat_user"`
			Prompt   []int32 `json:"prompt_ids"`
			Greedy   []int32 `json:"greedy_ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.ForModel(b.Config().Arch, tok)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ref.Cases {
		var prompt []int32
		if c.ChatUser != "" {
			if prompt, err = tmpl.Render([]chat.Message{{Role: "user", Content: c.ChatUser}}, true); err != nil {
				t.Fatal(err)
			}
		} else {
			prompt = engine.RawPrompt(tok, c.Text)
		}
		if fmt.Sprint(prompt) != fmt.Sprint(c.Prompt) {
			t.Errorf("%s: prompt ids\n%v\ntokenizers\n%v", c.Name, prompt, c.Prompt)
			continue
		}
		s, err := engine.NewSession(b, engine.SessionOptions{MaxBatch: 8})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Prefill(context.Background(), prompt, nil); err != nil {
			t.Fatal(err)
		}
		var got []int32
		_, err = s.Generate(context.Background(), engine.GenerateOptions{MaxTokens: len(c.Greedy), Width: 1},
			func(tk engine.Token) error {
				if tk.ID >= 0 {
					got = append(got, tk.ID)
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.Greedy) {
			t.Errorf("%s: generated\n%v\ntransformers\n%v", c.Name, got, c.Greedy)
		}
	}
}
