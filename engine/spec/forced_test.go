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
	vocab := pieceVocab{`":`, ` "`, `",`, `name`, "\n ", "\n  "}
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
	// The test's model spells text by longest match, unless a case gives
	// its pieces.
	v := m.Vocab()
	spell := func(text string) []int32 {
		var ids []int32
		for rest := []byte(text); len(rest) > 0; {
			id, n := int32(-1), 0
			for t, k := range v.Prefixes(rest) {
				id, n = t, k
			}
			ids = append(ids, id)
			rest = rest[n:]
		}
		return ids
	}
	piece := func(p string) int32 {
		if len(p) == 1 {
			return int32(p[0])
		}
		return int32(256 + slices.Index(vocab, p))
	}
	for _, c := range []struct {
		reply  string
		pieces []string // the reply's tokens, when not by longest match
		want   []string
		match  int
	}{
		{`{"`, nil, []string{`name`, `":`}, 6},                 // the one gap seen: none after the opening quote
		{`{"name": "x", "`, nil, []string{`b`, `":`, ` "`}, 5}, // colon then space, as after "name"
		{`{"name": "x", "b": "y"`, nil, []string{`,`, ` "`, `c`, `":`, ` "`}, 8},
		{`{"name": "x", "b": "y", "c": "n`, nil, []string{`o`, `"`, `}`}, 3},
		// Pretty-printed: the indent as the reply spelled it ("\n " then ` "`).
		{"{\n  \"name\": \"x\",\n  \"b\": \"y\"", []string{`{`, "\n ", ` "`, `name`, `":`, ` "`, `x`, `",`, "\n ", ` "`, `b`, `":`, ` "`, `y`, `"`},
			[]string{`,`, "\n ", ` "`, `c`, `":`, ` "`}, 10},
		{`{"name":"x","b":"y"`, nil, []string{`,`, `"`, `c`, `":`, `"`}, 6}, // compact
		// The reply wrote `":` as two tokens: so does the draft.
		{`{"name": "x", "`, []string{`{`, `"`, `name`, `"`, `:`, ` "`, `x`, `",`, ` "`}, []string{`b`, `"`, `:`, ` "`}, 5},
		{`{"name": "x", "b": "y", "c": "no"}`, nil, nil, 0}, // complete
	} {
		f.Reset([]int32{1, 2, 3})
		if p := f.Propose(7); len(p.Tokens) != 0 {
			t.Fatalf("proposed %v before a constraint", p.Tokens)
		}
		s := m.Start()
		f.Constrain(Grammar(s))
		ids := spell(c.reply)
		if c.pieces != nil {
			ids = nil
			for _, p := range c.pieces {
				ids = append(ids, piece(p))
			}
		}
		for _, id := range ids {
			if err := s.Advance(id); err != nil {
				t.Fatalf("%q: %v", c.reply, err)
			}
			f.Append(id)
		}
		var want []int32
		for _, p := range c.want {
			want = append(want, piece(p))
		}
		p := f.Propose(7)
		if !slices.Equal(p.Tokens, want) || p.Match != c.match {
			t.Errorf("after %q: proposed %v %q (match %d), want %v %q (%d)", c.reply, p.Tokens, text(p.Tokens), p.Match, want, text(want), c.match)
		}
		for _, id := range p.Tokens {
			if err := s.Advance(id); err != nil {
				t.Errorf("after %q: proposal %q refused", c.reply, text(p.Tokens))
				break
			}
		}
	}
	f.Constrain(nil)
	if p := f.Propose(7); len(p.Tokens) != 0 {
		t.Errorf("proposed %v under no constraint", p.Tokens)
	}
}

// The whitespace guess is the gap after the same punctuation at the same
// nesting (a pretty-printed reply's indent), else the latest.
func TestForcedSpacing(t *testing.T) {
	for _, c := range []struct {
		text, want string
		ok         bool
	}{
		{"{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": [\n    3,", "\n    ", true},
		{"{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": [\n    3\n  ],", "\n  ", true},
		{"{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": [\n    3,\n  ", "  ", true}, // the rest of it
		{`[[1,2], ["x", "y"], [3,4], ["z",`, " ", true},                            // after `",`, not `4,`
		{`[[1,2], ["x", "y"], [3,4], [5,`, "", true},
		{`{"a":`, ``, false},
		{`   `, ``, false},
	} {
		f := NewForced()
		for _, b := range []byte(c.text) {
			f.text = append(f.text, b)
			f.nest = append(f.nest, f.scan.step(b))
		}
		got, ok := f.spacing(nil)
		if string(got) != c.want || ok != c.ok {
			t.Errorf("after %q: %q %v, want %q %v", c.text, got, ok, c.want, c.ok)
		}
	}
}

// FuzzForcedSpacing: on any reply text and forced text (not JSON, cut
// anywhere) the whitespace guess stays in bounds and is whitespace.
func FuzzForcedSpacing(f *testing.F) {
	f.Add([]byte("{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": [\n    3,"), []byte(""))
	f.Add([]byte(`{"a": "\"]", "b": [1,`), []byte(` "c"`))
	f.Add([]byte(`]]]}}"\`), []byte("\n \t"))
	f.Fuzz(func(t *testing.T, text, forced []byte) {
		src := NewForced()
		for _, b := range text {
			src.text = append(src.text, b)
			src.nest = append(src.nest, src.scan.step(b))
		}
		ws, ok := src.spacing(forced)
		for _, b := range ws {
			if !isJSONSpace(b) {
				t.Fatalf("guess %q (ok %v) is not whitespace", ws, ok)
			}
		}
		if !ok && ws != nil {
			t.Fatalf("no guess, but %q", ws)
		}
	})
}
