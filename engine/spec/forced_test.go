package spec

import (
	"slices"
	"testing"

	"anechat/engine/constrain"
)

// pieceVocab is the 256 single bytes and a few multi-byte pieces.
type pieceVocab []string

func (v pieceVocab) VocabSize() int { return 256 + len(v) }
func (v pieceVocab) TokenBytes(id int32) []byte {
	if id < 256 {
		return []byte{byte(id)}
	}
	return []byte(v[id-256])
}
func (v pieceVocab) IsSpecial(id int32) bool            { return false }
func (v pieceVocab) TokenID(piece string) (int32, bool) { return 0, false }

// The forced source drafts the grammar's forced text in the vocabulary's
// longest tokens, guessing the whitespace of each gap from what the reply
// wrote after the same punctuation before; it proposes nothing without a
// grammar.
func TestForcedSource(t *testing.T) {
	vocab := pieceVocab{`":`, ` "`, `",`, `name`, "\n  "}
	g, err := constrain.CompileSchema([]byte(`{"type":"object","properties":{"name":{"type":"string"},"b":{"type":"string"},"c":{"enum":["yes","no"]}},"required":["name","b","c"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	m, err := constrain.NewMatcher(g, constrain.NewVocab(vocab))
	if err != nil {
		t.Fatal(err)
	}
	text := func(ids []int32) string {
		var s []byte
		for _, id := range ids {
			s = append(s, vocab.TokenBytes(id)...)
		}
		return string(s)
	}
	f := NewForced()
	if f.Name() != ForcedName {
		t.Errorf("name %q", f.Name())
	}
	for _, c := range []struct {
		reply string
		want  string
		match int
	}{
		{`{"`, `name":`, 6},             // the one gap seen: none after the opening quote
		{`{"name": "x", "`, `b": "`, 5}, // colon then space, as after "name"
		{`{"name": "x", "b": "y"`, `, "c": "`, 8},
		{`{"name": "x", "b": "y", "c": "n`, `o"}`, 3},
		{"{\n  \"name\": \"x\",\n  \"b\": \"y\"", ",\n  \"c\": \"", 10}, // pretty-printed
		{`{"name":"x","b":"y"`, `,"c":"`, 6},                            // compact
		{`{"name": "x", "b": "y", "c": "no"}`, ``, 0},                   // complete
	} {
		f.Reset([]int32{1, 2, 3})
		if p := f.Propose(7); len(p.Tokens) != 0 {
			t.Fatalf("proposed %v before a constraint", p.Tokens)
		}
		s := m.Start()
		f.Constrain(Grammar(s))
		for i := 0; i < len(c.reply); i++ {
			if err := s.Advance(int32(c.reply[i])); err != nil {
				t.Fatal(err)
			}
			f.Append(int32(c.reply[i]))
		}
		p := f.Propose(7)
		if got := text(p.Tokens); got != c.want || p.Match != c.match {
			t.Errorf("after %q: proposed %q (match %d), want %q (%d)", c.reply, got, p.Match, c.want, c.match)
		}
		for _, id := range p.Tokens {
			if err := s.Clone().Advance(id); err != nil {
				t.Errorf("after %q: proposal %q refused", c.reply, text(p.Tokens))
			}
			if err := s.Advance(id); err != nil {
				break
			}
		}
	}
	// The longest tokens: "name", then `":`, then ` "`.
	f.Reset(nil)
	s := m.Start()
	f.Constrain(Grammar(s))
	for _, b := range []byte(`{"`) {
		if err := s.Advance(int32(b)); err != nil {
			t.Fatal(err)
		}
		f.Append(int32(b))
	}
	f.text = append(f.text, `"x": "`...) // a gap seen before: colon, space
	if p := f.Propose(7); !slices.Equal(p.Tokens, []int32{256 + 3, 256, 256 + 1}) {
		t.Errorf("proposed %v %q", p.Tokens, text(p.Tokens))
	}
	f.Constrain(nil)
	if p := f.Propose(7); len(p.Tokens) != 0 {
		t.Errorf("proposed %v under no constraint", p.Tokens)
	}
}
