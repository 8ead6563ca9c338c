package constrain

import (
	"fmt"
	"slices"
	"strings"
)

// GemmaQuote is the piece of the token Gemma 4 writes on both sides of a
// string in its tool calls (<|"|>). The grammar takes it as that one token
// (a Token element, whether the vocabulary counts it special or not) and
// never as text: a string's text is any text that does not spell it.
const GemmaQuote = `<|"|>`

// Gemma returns e with its JSON values (Schema and AnyObject elements,
// inside Sequence and Choice too) written in Gemma 4's tool-call notation
// instead of JSON, under the same schema rules (types, properties, required,
// enum and const, anyOf, $ref, items):
//
//	{days:3,location:<|"|>Paris<|"|>,note:null,ok:true,units:[<|"|>C<|"|>]}
//
// Properties come in the order Gemma 4's template writes a call's
// arguments, sorted by name ignoring case (Jinja's dictsort), not the
// schema's: the order of every call in the model's history.
// Objects have bare keys (a key with a character that cannot stand bare,
// one of {}[],<>":, is written between GemmaQuote tokens), strings are
// GemmaQuote tokens around their raw text (valid UTF-8 whose only control
// characters are tab, newline and carriage return, never spelling
// GemmaQuote), numbers, true and false are as in JSON, null is null or
// Python's None (which the template writes), and there is no whitespace
// between tokens. It is what Gemma 4's chat template writes for a call's
// arguments and what engine/chat reads back from a reply. An enum or const
// value or a property name that spells GemmaQuote has no spelling in the
// notation: Compile refuses it, naming its path.
func Gemma(e Element) Element {
	switch e.kind {
	case elemSchema:
		e.gemma = true
	case elemSeq, elemChoice:
		parts := make([]Element, len(e.parts))
		for i, p := range e.parts {
			parts[i] = Gemma(p)
		}
		e.parts = parts
	}
	return e
}

// gemmaElement adds a value under s in Gemma's notation after from.
func (b *builder) gemmaElement(from int32, s *schema) (int32, error) {
	r, err := b.gemmaRule(s)
	if err != nil {
		return 0, err
	}
	to := b.newNode()
	b.call(from, r, to)
	return to, b.err
}

// gemmaRule returns the rule of a value under s in Gemma's notation,
// building it once.
func (b *builder) gemmaRule(s *schema) (int32, error) {
	s, err := s.target()
	if err != nil {
		return 0, err
	}
	if r, ok := b.gemmaRules[s]; ok {
		return r, nil
	}
	switch s.kind {
	case kindAny:
		return b.sharedRule("gemma any", b.gemmaAny), b.err
	case kindAnyObject:
		return b.sharedRule("gemma anyobject", b.gemmaAnyObject), b.err
	case kindString:
		return b.sharedRule("gemma string", b.gemmaString), b.err
	case kindNull:
		return b.sharedRule("gemma null", b.gemmaNull), b.err
	case kindNumber, kindInteger, kindBool:
		return b.schemaRule(s) // the same text in both notations
	}
	if b.gemmaRules == nil {
		b.gemmaRules = map[*schema]int32{}
	}
	r := b.newRule(s.path)
	b.gemmaRules[s] = r
	st, end := b.rule(r).start, b.rule(r).end
	switch s.kind {
	case kindEnum:
		if err := b.gemmaEnum(st, end, s); err != nil {
			return 0, err
		}
	case kindAnyOf:
		for _, a := range s.alts {
			ar, err := b.gemmaRule(a)
			if err != nil {
				return 0, err
			}
			b.call(st, ar, end)
		}
	case kindArray:
		item := b.sharedRule("gemma any", b.gemmaAny)
		if s.items != nil {
			if item, err = b.gemmaRule(s.items); err != nil {
				return 0, err
			}
		}
		b.gemmaArray(st, end, item)
	case kindObject:
		if err := b.gemmaObject(st, end, s); err != nil {
			return 0, err
		}
	}
	return r, b.err
}

// gemmaSym is a symbol of Gemma's notation: a byte, or (symQuote) the
// GemmaQuote token.
type gemmaSym int16

const symQuote gemmaSym = 256

// symbols adds syms after from and returns the node after them.
func (b *builder) symbols(from int32, syms []gemmaSym) int32 {
	for _, c := range syms {
		if c == symQuote {
			from = b.token(from, GemmaQuote)
			continue
		}
		n := b.newNode()
		b.byteRange(from, byte(c), byte(c), n)
		from = n
	}
	return from
}

// bareKey reports whether an object key may be written without quotes, as
// Gemma 4's template writes every key of a call: Gemma's reader takes a
// bare key up to the first ':' and refuses one with a bracket, comma, angle
// bracket or double quote.
func bareKey(k string) bool {
	return k != "" && !strings.ContainsAny(k, `{}[],<>":`)
}

// appendGemmaString appends s between quote tokens, or reports false when
// s spells the quote itself.
func appendGemmaString(dst []gemmaSym, s string) ([]gemmaSym, bool) {
	if strings.Contains(s, GemmaQuote) {
		return dst, false
	}
	dst = append(dst, symQuote)
	for i := 0; i < len(s); i++ {
		dst = append(dst, gemmaSym(s[i]))
	}
	return append(dst, symQuote), true
}

// appendGemmaKey appends an object key and its colon.
func appendGemmaKey(dst []gemmaSym, k string) ([]gemmaSym, bool) {
	if bareKey(k) {
		for i := 0; i < len(k); i++ {
			dst = append(dst, gemmaSym(k[i]))
		}
	} else {
		var ok bool
		if dst, ok = appendGemmaString(dst, k); !ok {
			return dst, false
		}
	}
	return append(dst, ':'), true
}

// appendGemma appends v in Gemma's notation, or reports false when one of
// its strings or keys spells the quote.
func (v *value) appendGemma(dst []gemmaSym) ([]gemmaSym, bool) {
	ok := true
	switch v.kind {
	case 'o':
		dst = append(dst, '{')
		order := make([]int, len(v.keys))
		for i := range order {
			order[i] = i
		}
		for n, i := range templateOrder(order, func(i int) string { return v.keys[i] }) {
			if n > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = appendGemmaKey(dst, v.keys[i]); !ok {
				return dst, false
			}
			if dst, ok = v.vals[i].appendGemma(dst); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	case 'a':
		dst = append(dst, '[')
		for i, e := range v.vals {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = e.appendGemma(dst); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case 's':
		return appendGemmaString(dst, v.str)
	}
	for _, c := range v.canonical(nil) { // numbers, true, false, null
		dst = append(dst, gemmaSym(c))
	}
	return dst, true
}

// templateOrder returns a copy of items in the order Gemma 4's template
// writes an object's members (Jinja's dictsort: by key, ignoring case,
// ties in their order).
func templateOrder[T any](items []T, key func(T) string) []T {
	out := slices.Clone(items)
	slices.SortStableFunc(out, func(a, b T) int { return strings.Compare(strings.ToLower(key(a)), strings.ToLower(key(b))) })
	return out
}

// gemmaEnum builds a trie of the values' spellings in Gemma's notation.
func (b *builder) gemmaEnum(st, end int32, s *schema) error {
	type key struct {
		n int32
		c gemmaSym
	}
	next := map[key]int32{}
	for i, raw := range s.enum {
		v, err := parseJSON(raw) // the canonical JSON Schema wrote
		if err != nil {
			return &Error{Path: joinPath(s.path, fmt.Sprintf("enum[%d]", i)), Msg: err.Error()}
		}
		syms, ok := v.appendGemma(nil)
		if !ok {
			return &Error{Path: joinPath(s.path, fmt.Sprintf("enum[%d]", i)),
				Msg: "the value spells " + GemmaQuote + ", which Gemma 4's notation cannot write inside a string"}
		}
		spellings := [][]gemmaSym{syms}
		if v.kind == 'z' {
			spellings = append(spellings, []gemmaSym{'N', 'o', 'n', 'e'})
		}
		for _, syms := range spellings {
			n := st
			for _, c := range syms {
				k := key{n, c}
				m, ok := next[k]
				if !ok {
					m = b.symbols(n, []gemmaSym{c})
					next[k] = m
				}
				n = m
			}
			b.eps(n, end)
		}
	}
	return b.err
}

// gemmaString builds a string: the quote token, text that does not spell
// the quote (valid UTF-8; tab, newline and carriage return the only
// control characters), the quote token.
func (b *builder) gemmaString(st, end int32) {
	open := b.token(st, GemmaQuote)
	// at[k]: the text so far ends with the first k bytes of the quote
	// (k < len), and no earlier byte starts a whole one. The quote starts
	// with its only '<', so a '<' always leads to at[1].
	q := GemmaQuote
	var at [len(GemmaQuote)]int32
	at[0] = open
	for k := 1; k < len(q); k++ {
		at[k] = b.newNode()
	}
	// UTF-8 multi-byte characters, from any state, back to at[0].
	c1, c2, c3 := b.newNode(), b.newNode(), b.newNode()
	b.byteRange(c1, 0x80, 0xBF, at[0])
	b.byteRange(c2, 0x80, 0xBF, c1)
	b.byteRange(c3, 0x80, 0xBF, c2)
	e0, ed, f0, f4 := b.newNode(), b.newNode(), b.newNode(), b.newNode()
	b.byteRange(e0, 0xA0, 0xBF, c1)
	b.byteRange(ed, 0x80, 0x9F, c1)
	b.byteRange(f0, 0x90, 0xBF, c2)
	b.byteRange(f4, 0x80, 0x8F, c2)
	for k := range at {
		n := at[k]
		b.eps(b.token(n, GemmaQuote), end)
		target := func(c byte) int32 {
			switch {
			case c < 0x20 && c != '\t' && c != '\n' && c != '\r', c == 0x7F:
				return -1
			case c == q[0]:
				return at[1]
			case c == q[k] && k == len(q)-1:
				return -1 // the quote's last byte: its text would be whole
			case c == q[k]:
				return at[k+1]
			}
			return at[0]
		}
		// ASCII, as runs of bytes with one target.
		lo := 0
		for c := 1; c <= 0x80; c++ {
			if c == 0x80 || target(byte(c)) != target(byte(lo)) {
				if t := target(byte(lo)); t >= 0 {
					b.byteRange(n, byte(lo), byte(c-1), t)
				}
				lo = c
			}
		}
		b.byteRange(n, 0xC2, 0xDF, c1)
		b.byteRange(n, 0xE0, 0xE0, e0)
		b.byteRange(n, 0xE1, 0xEC, c2)
		b.byteRange(n, 0xED, 0xED, ed)
		b.byteRange(n, 0xEE, 0xEF, c2)
		b.byteRange(n, 0xF0, 0xF0, f0)
		b.byteRange(n, 0xF1, 0xF3, c3)
		b.byteRange(n, 0xF4, 0xF4, f4)
	}
}

// gemmaArray builds '[' (item (',' item)*)? ']'.
func (b *builder) gemmaArray(st, end, item int32) {
	open := b.newNode()
	b.byteRange(st, '[', '[', open)
	b.byteRange(open, ']', ']', end)
	after := b.newNode()
	b.call(open, item, after)
	b.byteRange(after, ']', ']', end)
	comma := b.newNode()
	b.byteRange(after, ',', ',', comma)
	b.call(comma, item, after)
}

// gemmaObject builds '{' then the properties in order (an optional one may
// be left out), each key ':' value, separated by commas, then '}'.
func (b *builder) gemmaObject(st, end int32, s *schema) error {
	open := b.newNode()
	b.byteRange(st, '{', '{', open)
	// at[f]: before the next property; f = 1 once one has been written.
	at := [2]int32{open, b.newNode()}
	for _, p := range templateOrder(s.props, func(p property) string { return p.name }) {
		next := [2]int32{b.newNode(), b.newNode()}
		key := b.newNode()
		b.eps(at[0], key)
		b.byteRange(at[1], ',', ',', key)
		syms, ok := appendGemmaKey(nil, p.name)
		if !ok {
			return &Error{Path: joinPath(s.path, "properties."+p.name),
				Msg: "the property's name spells " + GemmaQuote + ", which Gemma 4's notation cannot write"}
		}
		v, err := b.gemmaElement(b.symbols(key, syms), p.s)
		if err != nil {
			return err
		}
		b.eps(v, next[1])
		if !p.required {
			b.eps(at[0], next[0])
			b.eps(at[1], next[1])
		}
		at = next
	}
	b.byteRange(at[0], '}', '}', end)
	b.byteRange(at[1], '}', '}', end)
	return b.err
}

// gemmaAny builds any value in Gemma's notation.
func (b *builder) gemmaAny(st, end int32) {
	b.call(st, b.sharedRule("gemma anyobject", b.gemmaAnyObject), end)
	b.call(st, b.sharedRule("gemma anyarray", func(st, end int32) { b.gemmaArray(st, end, b.shared["gemma any"]) }), end)
	b.call(st, b.sharedRule("gemma string", b.gemmaString), end)
	b.call(st, b.sharedRule("number", func(st, end int32) { b.number(st, end, true) }), end)
	b.call(st, b.sharedRule("gemma null", b.gemmaNull), end)
	for _, lit := range []string{"true", "false"} {
		b.eps(b.literal(st, lit), end)
	}
}

// gemmaNull builds null, or None: Gemma 4's template writes a null
// argument as Python does, and Gemma's reader takes both.
func (b *builder) gemmaNull(st, end int32) {
	b.eps(b.literal(st, "null"), end)
	b.eps(b.literal(st, "None"), end)
}

// gemmaAnyObject builds any object in Gemma's notation: each key bare
// (printable ASCII that may stand bare) or quoted.
func (b *builder) gemmaAnyObject(st, end int32) {
	any := b.sharedRule("gemma any", b.gemmaAny)
	str := b.sharedRule("gemma string", b.gemmaString)
	open := b.newNode()
	b.byteRange(st, '{', '{', open)
	b.byteRange(open, '}', '}', end)
	key, bare := b.newNode(), b.newNode()
	b.eps(open, key)
	b.call(key, str, bare) // a quoted key, then the colon
	name := b.newNode()
	for lo := byte('!'); lo <= '~'; lo++ {
		if !bareKey(string([]byte{lo})) {
			continue
		}
		hi := lo
		for hi+1 <= '~' && bareKey(string([]byte{hi + 1})) {
			hi++
		}
		b.byteRange(key, lo, hi, name)
		b.byteRange(name, lo, hi, name)
		lo = hi
	}
	b.eps(name, bare)
	colon := b.newNode()
	b.byteRange(bare, ':', ':', colon)
	after := b.newNode()
	b.call(colon, any, after)
	b.byteRange(after, '}', '}', end)
	b.byteRange(after, ',', ',', key)
}
