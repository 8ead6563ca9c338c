package engine

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/tokenizer"
	"anechat/internal/testres"
)

// scriptedBackend runs the real backend (so the cache sees real calls) and
// then makes the greedy choice of each call's positions script[call]: what
// is under test is the text Generate attaches to the ids.
type scriptedBackend struct {
	model.Backend
	script []int32
	calls  int
}

func (b *scriptedBackend) Forward(ctx context.Context, tokens []int32, start int, c *kv.Cache, want model.Output) (model.Result, error) {
	res, err := b.Backend.Forward(ctx, tokens, start, c, want)
	if err != nil || b.calls >= len(b.script) {
		return res, err
	}
	id := b.script[b.calls]
	b.calls++
	for i := range res.Argmax {
		res.Argmax[i] = id
	}
	for _, row := range res.Logits {
		clear(row)
		row[id] = 1
	}
	return res, nil
}

// Generated ids whose bytes are not valid UTF-8 reach the user as U+FFFD,
// each as soon as it is known to be invalid, and the text of all the
// tokens (the Flush tail included) is the tokenizer's Decode of them.
func TestGenerateTextIsValidUTF8(t *testing.T) {
	m := openStoriesModel(t)
	b, tok := m.Backend, m.Tokenizer
	id := func(piece string) int32 {
		v, ok := tok.TokenID(piece)
		if !ok {
			t.Fatalf("stories260K has no piece %q", piece)
		}
		return v
	}
	steps := []struct {
		id   int32
		text string
	}{
		{id("<0xF0>"), ""},             // may begin a character
		{id("<0xFF>"), "\uFFFD\uFFFD"}, // cannot: the run is U+FFFD per byte, now
		{id("<0x9F>"), "\uFFFD"},       // the same run
		{id("a"), "a"},                 // ends the run
		{id("<0xE4>"), ""},             // 中 begun...
		{id("<0xB8>"), ""},             // ...and cut off by the end of generation
	}
	var ids []int32
	for _, st := range steps {
		ids = append(ids, st.id)
	}
	s, err := NewSession(&scriptedBackend{Backend: b, script: ids}, SessionOptions{Text: func() TextStream { return tok.NewStream() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prefill(context.Background(), storiesPrompt, nil); err != nil {
		t.Fatal(err)
	}
	var got []Token
	if _, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: len(ids), Width: 1}, func(tk Token) error {
		got = append(got, tk)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(steps)+1 || got[len(got)-1].ID != -1 || got[len(got)-1].Text != "\uFFFD\uFFFD" {
		t.Fatalf("tokens %+v, want %d ids and a Flush tail of two U+FFFD", got, len(steps))
	}
	// The tail carries the last token's counts: the window's counts stay
	// those of the reply.
	if tail, last := got[len(got)-1], got[len(got)-2]; tail.Tokens != len(steps) || tail.Tokens != last.Tokens || tail.Calls != last.Calls || tail.Accepted != last.Accepted || tail.Drafted {
		t.Fatalf("tail %+v after %+v: want the last token's counts", tail, last)
	}
	var all strings.Builder
	for i, tk := range got {
		if !utf8.ValidString(tk.Text) {
			t.Errorf("token %d text %q is not valid UTF-8", i, tk.Text)
		}
		if i < len(steps) && (tk.ID != steps[i].id || tk.Text != steps[i].text) {
			t.Errorf("token %d = %d %q, want %d %q", i, tk.ID, tk.Text, steps[i].id, steps[i].text)
		}
		all.WriteString(tk.Text)
	}
	if want := tok.Decode(ids); all.String() != want {
		t.Errorf("text %q, Decode %q", all.String(), want)
	}
}

// A raw prompt that is not valid UTF-8 is never empty or silently cut: with
// SmolLM2 (byte-level, no BOS, no piece for the bytes 0xFE/0xFF) "\xff" used
// to encode to nothing and Generate failed with "empty sequence".
func TestRawPromptInvalidUTF8(t *testing.T) {
	f, err := gguf.Open(testres.SmolLM2GGUF(t))
	if err != nil {
		t.Fatal(err)
	}
	smol, err := tokenizer.FromGGUF(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	stories := openStoriesModel(t).Tokenizer
	for _, tok := range []*tokenizer.Tokenizer{smol, stories} {
		for p, want := range map[string]string{"\xff": "\uFFFD", "\xfe\xff": "\uFFFD\uFFFD", "a\xffb": "a\uFFFDb"} {
			ids := RawPrompt(tok, p)
			if got := tok.Decode(ids); len(ids) == 0 || got != want {
				t.Errorf("%s: RawPrompt(%q) = %v decodes to %q, want %q", tok.Source(), p, ids, got, want)
			}
		}
	}
}
