package constrain

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// feed advances a new state of m past text, one byte token at a time.
func feed(t *testing.T, m *Matcher, text string) *State {
	t.Helper()
	s := m.Start()
	for i := 0; i < len(text); i++ {
		if err := s.Advance(int32(text[i])); err != nil {
			t.Fatalf("%q: byte %d (%q): %v", text, i, text[i], err)
		}
	}
	return s
}

const forcedSchema = `{"type":"object","properties":{
	"name":{"type":"string"},
	"sentiment":{"enum":["positive","negative","neutral"]},
	"kind":{"const":"cat"},
	"tags":{"type":"array","items":{"type":"integer"}},
	"note":{"type":"string"}},
	"required":["name","sentiment","kind","tags"],"additionalProperties":false}`

// Forced gives the text only the grammar decides, and stops at every
// choice it leaves the model: whitespace (without a guess), a string's
// content, an optional property, the end of the text.
func TestForced(t *testing.T) {
	m, err := NewMatcher(mustSchema(t, forcedSchema), NewVocab(byteVocab{}))
	if err != nil {
		t.Fatal(err)
	}
	none := func([]byte) ([]byte, bool) { return nil, false }
	compact := func([]byte) ([]byte, bool) { return []byte{}, true }
	space := func([]byte) ([]byte, bool) { return []byte(" "), true }
	pretty := func([]byte) ([]byte, bool) { return []byte("\n  "), true }
	for _, c := range []struct {
		text    string
		spacing func([]byte) ([]byte, bool)
		limit   int
		want    string
	}{
		{``, nil, 99, ``},              // optional leading whitespace
		{` `, nil, 99, `{`},            // after a space, the object opens
		{`{`, nil, 99, ``},             // whitespace or the first key
		{`{"`, nil, 99, `name"`},       // the only property that can come
		{`{"`, none, 99, `name"`},      // no guess: stop at the gap
		{`{"`, compact, 99, `name":"`}, // compact: colon, quote, then a string
		{`{"`, space, 99, `name" : "`}, // a space at each gap
		{`{"`, pretty, 99, "name\"\n  :\n  \""},
		{`{"`, compact, 3, `nam`}, // limit
		{`{"name":"x"`, compact, 99, `,"sentiment":"`},
		{`{"name":"x","sentiment":"ne`, nil, 99, ``}, // negative or neutral
		{`{"name":"x","sentiment":"neg`, nil, 99, `ative"`},
		{`{"name":"x","sentiment":"neg`, compact, 99, `ative","kind":"cat","tags":[`},
		{`{"name":"x","sentiment":"neg`, compact, 10, `ative","ki`},
		{`{"name":"x","sentiment":"negative","kind":"cat","tags":[1]`, compact, 99, ``}, // "," note, or "}"
		{`{"name":"x","sentiment":"negative","kind":"cat","tags":[1],"note":"y"`, compact, 99, `}`},
		{`{"name":"x","sentiment":"negative","kind":"cat","tags":[1],"note":"y"}`, compact, 99, ``}, // complete
	} {
		s := feed(t, m, c.text)
		before := s.Clone()
		got := string(s.Forced([]byte("<"), c.limit, c.spacing))
		if got != "<"+c.want {
			t.Errorf("after %q: Forced = %q, want %q", c.text, got[1:], c.want)
		}
		if !slices.Equal(s.Mask(), before.Mask()) || s.Complete() != before.Complete() {
			t.Errorf("after %q: Forced changed the state", c.text)
		}
	}
}

// Along random walks through schemas of every kind, every byte of the forced
// text (without a guess) is the only byte the grammar allows there and the
// text may not end before it, and with any guess the forced text is text the
// grammar allows.
func TestForcedOnlyChoice(t *testing.T) {
	schemas := []string{
		forcedSchema,
		`{"type":"array","items":{"enum":["Lily","Tom","the dog","the cat"]}}`,
		`{"anyOf":[{"type":"object","properties":{"a":{"const":1}},"required":["a"],"additionalProperties":false},{"type":"null"}]}`,
		`{"$defs":{"t":{"anyOf":[{"type":"object","properties":{"l":{"$ref":"#/$defs/t"}},"required":["l"],"additionalProperties":false},{"type":"integer"}]}},"$ref":"#/$defs/t"}`,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sc := range schemas {
		m, err := NewMatcher(mustSchema(t, sc), NewVocab(byteVocab{}))
		if err != nil {
			t.Fatal(err)
		}
		for walk := 0; walk < 20; walk++ {
			s := m.Start()
			for step := 0; step < 60; step++ {
				forced := s.Forced(nil, 64, nil)
				c := s.Clone()
				for i, b := range forced {
					if c.Complete() {
						t.Fatalf("%s: forced %q: complete before byte %d", sc, forced, i)
					}
					mask := c.Mask()
					for id := range 256 {
						if on := mask[id/64]&(1<<(id%64)) != 0; on != (id == int(b)) {
							t.Fatalf("%s: forced %q: byte %q allowed %v at %d", sc, forced, byte(id), on, i)
						}
					}
					if err := c.Advance(int32(b)); err != nil {
						t.Fatal(err)
					}
				}
				guess := []byte(" \n\t  ")[rng.IntN(5):]
				g := s.Clone()
				for _, b := range s.Forced(nil, 64, func([]byte) ([]byte, bool) { return guess, true }) {
					if err := g.Advance(int32(b)); err != nil {
						t.Fatalf("%s: the forced text with guess %q is refused: %v", sc, guess, err)
					}
				}
				var allowed []int32
				for id, w := range s.Mask() {
					for b := 0; b < 64; b++ {
						if w&(1<<b) != 0 {
							allowed = append(allowed, int32(id*64+b))
						}
					}
				}
				if len(allowed) == 0 {
					break
				}
				if err := s.Advance(allowed[rng.IntN(len(allowed))]); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// Prefixes yields the tokens text starts with, shortest first, tokens of
// the same bytes in id order.
func TestVocabPrefixes(t *testing.T) {
	v := NewVocab(byteVocab{extra: []string{"na", "name", `name"`, "a", `":`}})
	for _, c := range []struct {
		text string
		want []int32
	}{
		{`name": "`, []int32{'n', 256, 256 + 1, 256 + 2}},
		{`nam`, []int32{'n', 256}},
		{`a`, []int32{'a', 256 + 3}},
		{`":x`, []int32{'"', 256 + 4}},
		{"\xff", []int32{0xff}},
		{``, nil},
	} {
		var got []int32
		for id, n := range v.Prefixes([]byte(c.text)) {
			if string(v.TokenBytes(id)) != c.text[:n] {
				t.Errorf("Prefixes(%q): %d spells %q, not the first %d bytes", c.text, id, v.TokenBytes(id), n)
			}
			got = append(got, id)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Prefixes(%q) = %v, want %v", c.text, got, c.want)
		}
	}
	for range v.Prefixes([]byte(`name`)) {
		break // stopping early is allowed
	}
	if got := string(v.TokenBytes(256 + 2)); got != `name"` {
		t.Errorf("TokenBytes = %q", got)
	}
	if v.TokenBytes(-1) != nil || v.TokenBytes(1000) != nil || v.TokenBytes(256+5) != nil {
		t.Error("TokenBytes of no text token is not nil")
	}
}

// FuzzForced: from any state a text reaches, the forced text, with any
// whitespace guess, is text the grammar allows, within the limit.
func FuzzForced(f *testing.F) {
	m, err := NewMatcher(mustSchema(f, forcedSchema), NewVocab(byteVocab{}))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"name": "x", "sentiment": "neg`), []byte(" "), 20)
	f.Add([]byte("{\n  \""), []byte("\n    \t"), 99)
	f.Add([]byte(`{"name":"\u00e9","sentiment":"neutral","kind":"cat","tags":[1,`), []byte("x"), 5)
	f.Fuzz(func(t *testing.T, text, guess []byte, limit int) {
		limit %= 200
		s := m.Start()
		for _, b := range text {
			if s.Advance(int32(b)) != nil {
				break
			}
		}
		forced := s.Forced(nil, limit, func([]byte) ([]byte, bool) { return guess, len(guess)%3 != 2 })
		if len(forced) > max(limit, 0) {
			t.Fatalf("%d bytes past the limit %d", len(forced), limit)
		}
		for i, b := range forced {
			if err := s.Advance(int32(b)); err != nil {
				t.Fatalf("forced %q: byte %d refused", forced, i)
			}
		}
	})
}
