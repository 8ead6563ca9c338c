package chat

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// fiftyTurns is a 50-turn conversation (a system message, then 50 user
// questions and 49 answers of a few hundred bytes each).
func fiftyTurns() []Message {
	msgs := []Message{{Role: RoleSystem, Content: "You are a helpful assistant."}}
	for i := 0; i < 50; i++ {
		msgs = append(msgs, Message{Role: RoleUser, Content: fmt.Sprintf("Question %d: %s", i, strings.Repeat("why is the sky blue? ", 10))})
		if i < 49 {
			msgs = append(msgs, Message{Role: RoleAssistant, Content: fmt.Sprintf("Answer %d: %s", i, strings.Repeat("because of Rayleigh scattering. ", 12))})
		}
	}
	return msgs
}

// BenchmarkJinja50Turns renders a 50-turn conversation with real templates:
// text only (the Jinja renderer) and ids (renderer + tokenizer).
//
//	go test ./engine/chat -run '^$' -bench Jinja50Turns -benchtime 20x
func BenchmarkJinja50Turns(b *testing.B) {
	msgs := fiftyTurns()
	for _, id := range []string{"smollm2", "gemma4", "qwen3", "llama3.1"} {
		m := hfModel(b, id)
		tmpl, err := ForModel(context.Background(), "any", m.tok, m.spec)
		if err != nil {
			b.Fatal(err)
		}
		j := tmpl.(*Jinja)
		b.Run(id+"/text", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := j.RenderText(context.Background(), msgs, nil, true); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(id+"/ids", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := j.Render(context.Background(), msgs, true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Rendering cost grows linearly with the conversation: the steps a render
// takes for 100 turns are about twice those for 50 (not four times).
func TestJinjaRenderIsLinear(t *testing.T) {
	for _, id := range []string{"gemma4", "qwen3", "llama3.1", "smollm2"} {
		m := hfModel(t, id)
		tmpl, err := ForModel(context.Background(), "any", m.tok, m.spec)
		if err != nil {
			t.Fatal(err)
		}
		j := tmpl.(*Jinja)
		msgs := fiftyTurns()
		long := append(append([]Message(nil), msgs...), msgs[1:]...)
		a, err := j.steps(msgs)
		if err != nil {
			t.Fatal(err)
		}
		b, err := j.steps(long)
		if err != nil {
			t.Fatal(err)
		}
		if r := float64(b) / float64(a); r > 2.3 {
			t.Errorf("%s: %d steps for %d messages, %d for %d (ratio %.2f, want about 2)", id, a, len(msgs), b, len(long), r)
		}
	}
}

func (j *Jinja) steps(msgs []Message) (int, error) {
	out, err := j.render(context.Background(), msgs, nil, true)
	return out.Steps, err
}
