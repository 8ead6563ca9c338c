package cpu_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/cpu"
	"anechat/engine/load"
	"anechat/engine/spec"
)

// TestGemma4EndToEnd drives the fixture the way the app does: the loader
// (safetensors directory + its tokenizer.json), the prompt from text (raw, or
// the Gemma 4 chat template), then a Session's batched prefill and greedy
// generation, plain and speculative. The prompt ids equal the `tokenizers`
// library's and the 64 generated ids transformers' greedy ids.
func TestGemma4EndToEnd(t *testing.T) {
	dir := filepath.Join("testdata", "gemma4")
	m, err := load.NewRegistry(cpu.Loader{}).Open(context.Background(), filepath.Join(dir, "model"), load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, tok := m.Backend, m.Tokenizer
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
	tmpl, err := chat.ForModel(t.Context(), b.Config().Arch, tok, m.Chat)
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for _, c := range ref.Cases {
		var prompt []int32
		if c.ChatUser != "" {
			if prompt, err = tmpl.Render(t.Context(), []chat.Message{{Role: "user", Content: c.ChatUser}}, true); err != nil {
				t.Fatal(err)
			}
		} else {
			prompt = engine.RawPrompt(tok, c.Text)
		}
		if fmt.Sprint(prompt) != fmt.Sprint(c.Prompt) {
			t.Errorf("%s: prompt ids\n%v\ntokenizers\n%v", c.Name, prompt, c.Prompt)
			continue
		}
		// Width 1 (one token per call), then speculation (prompt lookup,
		// every proposal sent) at widths 4 and 8: all three equal
		// transformers' greedy ids.
		for _, width := range []int{1, 4, 8} {
			s, err := engine.NewSession(b, engine.SessionOptions{MaxBatch: 8, Ungated: true,
				Costs: spec.FixedCosts(map[int]float64{1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1})})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Prefill(context.Background(), prompt, nil); err != nil {
				t.Fatal(err)
			}
			var got []int32
			st, err := s.Generate(context.Background(), engine.GenerateOptions{MaxTokens: len(c.Greedy), Width: width},
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
				t.Errorf("%s, width %d: generated\n%v\ntransformers\n%v", c.Name, width, got, c.Greedy)
			}
			if width > 1 {
				accepted += st.Accepted
				t.Logf("%s, width %d: %d calls for %d tokens, %d drafted, %d accepted", c.Name, width, st.TargetCalls, len(got), st.Drafted, st.Accepted)
			}
		}
	}
	if accepted == 0 {
		t.Errorf("no draft was ever accepted: speculation was not exercised")
	}
}
