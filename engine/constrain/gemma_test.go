package constrain

import (
	"errors"
	"strings"
	"testing"
)

// quoteVocab is byteVocab with GemmaQuote as one more, special, token (its
// last id), as in Gemma 4's vocabulary.
type quoteVocab struct{ byteVocab }

func (v quoteVocab) quote() int32   { return int32(v.byteVocab.VocabSize()) }
func (v quoteVocab) VocabSize() int { return v.byteVocab.VocabSize() + 1 }
func (v quoteVocab) IsSpecial(id int32) bool {
	return id == v.quote() || v.byteVocab.IsSpecial(id)
}

func (v quoteVocab) TokenBytes(id int32) []byte {
	if id == v.quote() {
		return []byte(GemmaQuote)
	}
	return v.byteVocab.TokenBytes(id)
}

func (v quoteVocab) TokenID(p string) (int32, bool) {
	if p == GemmaQuote {
		return v.quote(), true
	}
	return v.byteVocab.TokenID(p)
}

// matchGemma reports whether text is a whole match of e in Gemma's
// notation, fed byte by byte with each GemmaQuote as the quote token,
// checking the mask against Advance at every step.
func matchGemma(t *testing.T, e Element, text string) bool {
	t.Helper()
	g, err := Compile(Gemma(e))
	if err != nil {
		t.Fatal(err)
	}
	v := quoteVocab{}
	m, err := NewMatcher(g, NewVocab(v))
	if err != nil {
		t.Fatal(err)
	}
	s := m.Start()
	for i := 0; i < len(text); {
		id, n := int32(text[i]), 1
		if strings.HasPrefix(text[i:], GemmaQuote) {
			id, n = v.quote(), len(GemmaQuote)
		}
		mask := s.Mask()
		in := mask[id/64]&(1<<(id%64)) != 0
		err := s.Advance(id)
		if in != (err == nil) {
			t.Fatalf("%q at byte %d: mask says %v, Advance says %v", text, i, in, err)
		}
		if err != nil {
			return false
		}
		i += n
	}
	return s.Complete()
}

// Gemma's notation: bare keys, quoted strings of any text but the quote,
// JSON's numbers and literals, no whitespace, the schema's rules.
func TestGemmaNotation(t *testing.T) {
	q := GemmaQuote
	schema := `{"type":"object","properties":{
		"city":{"type":"string"},
		"days":{"type":"integer"},
		"unit":{"enum":["C","F",null,{"a b":[1,true]}]},
		"tags":{"type":"array","items":{"type":"string"}},
		"where":{"anyOf":[{"type":"number"},{"$ref":"#/$defs/pt"}]},
		"odd key":{"type":"boolean"},
		"x,y":{"type":"null"}},
		"required":["city","days"],"additionalProperties":false,
		"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}}}`
	e, err := Schema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{`{city:` + q + `Paris` + q + `,days:3}`, true},
		{`{city:` + q + `a "quoted" {x:1}, <|"| and \n` + "\n\tü€𝄞" + q + `,days:-0}`, true},
		{`{city:` + q + `<|"|` + q + `,days:1}`, true}, // a prefix of the quote's text, then the quote
		{`{city:` + q + q + `,days:1,unit:` + q + `F` + q + `}`, true},
		{`{city:` + q + q + `,days:1,unit:null}`, true},
		{`{city:` + q + q + `,days:1,unit:{a b:[1,true]}}`, true},                                          // keys bare, as the template writes them
		{`{city:` + q + q + `,days:1,odd key:false,tags:[],where:1.5e3,` + q + `x,y` + q + `:None}`, true}, // sorted, as the template writes them
		{`{city:` + q + q + `,days:1,tags:[],odd key:false}`, false},                                       // the schema's order
		{`{city:` + q + q + `,days:1,` + q + `x,y` + q + `:null}`, true},
		{`{city:` + q + q + `,days:1,unit:None}`, true}, // the template's null
		{`{city:` + q + q + `,days:1,tags:[` + q + `x` + q + `,` + q + `y` + q + `],where:{x:2}}`, true},
		{`{city:` + q + q + `}`, false},                    // days required
		{`{days:1,city:` + q + q + `}`, false},             // out of order
		{`{city:` + q + q + `, days:1}`, false},            // whitespace
		{`{city:"Paris",days:1}`, false},                   // JSON's quotes
		{`{"city":` + q + q + `,days:1}`, false},           // a JSON key
		{`{city:` + q + `a<|"|>b` + q + `,days:1}`, false}, // the quote's text inside a string
		{`{city:` + q + q + `,days:1.5}`, false},           // not an integer
		{`{city:` + q + q + `,days:1,unit:` + q + `K` + q + `}`, false},
		{`{city:` + q + q + `,days:1,x,y:null}`, false},                       // a key that cannot stand bare
		{`{city:` + q + q + `,days:1,` + q + `odd key` + q + `:true}`, false}, // one that stands bare
		{`{city:` + q + q + `,days:1,` + q + `x,y` + q + `:none}`, false},
		{`{city:` + q + "\x01" + q + `,days:1}`, false}, // a control character
		{`{city:` + q + "\xff" + q + `,days:1}`, false}, // not UTF-8
		{`{city:` + q + q + `,days:1,where:{}}`, false},
	} {
		// A string the test spells with the quote's text where the
		// grammar wants text is fed as the token: "<|\"|>" inside a
		// string is refused because the token there closes it.
		if got := matchGemma(t, e, c.text); got != c.ok {
			t.Errorf("%q: accepted %v, want %v", c.text, got, c.ok)
		}
	}

	// Any object, any value.
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{`{}`, true},
		{`{a:1,b_2.x:[` + q + q + `,{}],` + q + `k y` + q + `:null,n:[None]}`, true},
		{`{a:1,}`, false},
		{`{a b:1}`, false},
		{`{:1}`, false},
	} {
		if got := matchGemma(t, AnyObject(), c.text); got != c.ok {
			t.Errorf("any object %q: accepted %v, want %v", c.text, got, c.ok)
		}
	}

	// Compile names what the notation cannot write.
	var ce *Error
	bad, _ := Schema([]byte(`{"type":"object","properties":{"x":{"enum":["a","b<|\"|>"]}}}`))
	if _, err := Compile(Gemma(bad)); !errors.As(err, &ce) || ce.Path != "properties.x.enum[1]" {
		t.Errorf("an enum value spelling the quote: %v", err)
	}
	bad, _ = Schema([]byte(`{"type":"object","properties":{"<|\"|>":{"type":"string"}}}`))
	if _, err := Compile(Gemma(bad)); !errors.As(err, &ce) || !strings.Contains(ce.Msg, "name") {
		t.Errorf("a property name spelling the quote: %v", err)
	}
	// The JSON notation of the same schema is untouched.
	if g, err := Compile(e); err != nil || !g.Match([]byte(`{"city": "Paris", "days": 3}`)) {
		t.Errorf("JSON: %v", err)
	}
}

// Any schema compiles in Gemma's notation or is refused with an error, and
// a walk of its grammar (the tokens chosen by picks) never gets stuck.
func FuzzGemmaSchema(f *testing.F) {
	f.Add([]byte(personSchema), []byte{0, 5, 9, 200})
	f.Add([]byte(`{"type":"object","properties":{"a b":{"enum":[null,{"x,y":["<|\"|",1]}]}}}`), []byte{1, 2, 3})
	f.Add([]byte(`{"$defs":{"n":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$ref":"#/$defs/n"}`), []byte{7})
	f.Fuzz(func(t *testing.T, src, picks []byte) {
		e, err := Schema(src)
		if err != nil {
			return
		}
		g, err := Compile(Gemma(e))
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("%s: %v is no *Error", src, err)
			}
			return
		}
		m, err := NewMatcher(g, NewVocab(quoteVocab{}))
		if err != nil {
			t.Fatal(err)
		}
		s := m.Start()
		for i := 0; i < 60; i++ {
			var allowed []int32
			for w, x := range s.Mask() {
				for b := 0; b < 64; b++ {
					if x&(1<<b) != 0 {
						allowed = append(allowed, int32(w*64+b))
					}
				}
			}
			if len(allowed) == 0 {
				if !s.Complete() {
					t.Fatalf("%s: stuck", src)
				}
				return
			}
			pick := 0
			if i < len(picks) {
				pick = int(picks[i])
			}
			if err := s.Advance(allowed[pick%len(allowed)]); err != nil {
				t.Fatal(err)
			}
		}
	})
}
