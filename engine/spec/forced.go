package spec

import (
	"bytes"

	"anechat/engine/constrain"
)

// ForcedName is the Forced source's name in Stats.Sources.
const ForcedName = "forced"

// maxForcedBytes bounds the forced text one proposal looks at: more than
// MaxWidth-1 tokens of JSON punctuation and keys.
const maxForcedBytes = 96

// maxSpacingLook bounds how far back in the reply the whitespace guess
// searches, so a proposal's cost does not grow with the reply.
const maxSpacingLook = 4096

// Forced drafts what a constrained request's grammar forces ("jump
// forward"): from the constraint's current state, the text the grammar
// allows as the only continuation (constrain.State.Forced: a property name
// once only one can come, a const, the rest of an enum value, closing
// brackets), cut into tokens. At the optional whitespace between JSON
// tokens it guesses what the reply wrote last time after the same
// punctuation at the same nesting, so that `": "` and the next key are
// drafted too. It proposes nothing for a request without a grammar
// constraint; the gate decides, as for every source, whether its drafts pay.
//
// The forced text is cut into tokens as the model spells it: the longest
// token at each point, unless the reply has written that token's text but
// never as that token: then the longest token it has used. The loop knows
// only ids, not the model's tokenizer, and the model's own spelling is what
// it accepts: SmolLM2 writes an indent as "\n   " then ` "` (the last space
// joins the quote), which the longest match ("\n    ", `"`) misses. A draft
// split otherwise is only rejected.
type Forced struct {
	con  *constrain.State // the loop's state (read only), nil: unconstrained
	text []byte           // the reply so far
	nest []int32          // the JSON nesting after each byte of text
	scan jsonScan         // where the reply's JSON stands after text
	used []uint64         // the ids the reply has used, one bit each
	buf  []byte
	toks []int32
}

// NewForced returns the forced-text drafter.
func NewForced() *Forced { return &Forced{} }

// Name identifies the source in statistics.
func (f *Forced) Name() string { return ForcedName }

// Reset starts a new request; until Constrain gives it a grammar, the
// source proposes nothing.
func (f *Forced) Reset(history []int32) {
	f.con, f.text, f.nest, f.scan = nil, f.text[:0], f.nest[:0], jsonScan{}
}

// Constrain gives the source the request's constraint, which the loop
// advances past every emitted token before Append: the source reads it and
// never advances it. Constraints other than Grammar's give no drafts.
func (f *Forced) Constrain(c Constraint) {
	f.con = nil
	if g, ok := c.(grammarState); ok {
		f.con = g.s
		n := g.s.Matcher().Vocab().MaskWords()
		f.used = append(f.used[:0], make([]uint64, n)...)
	}
}

// Append feeds the next emitted token (its text, for the whitespace guess).
func (f *Forced) Append(t int32) {
	if f.con == nil {
		return
	}
	b := f.con.Matcher().Vocab().TokenBytes(t)
	f.text = append(f.text, b...)
	for _, c := range b {
		f.nest = append(f.nest, f.scan.step(c))
	}
	if t >= 0 && int(t/64) < len(f.used) {
		f.used[t/64] |= 1 << (t % 64)
	}
	if len(f.text) > 2*maxSpacingLook {
		f.text = append(f.text[:0], f.text[len(f.text)-maxSpacingLook:]...)
		f.nest = append(f.nest[:0], f.nest[len(f.nest)-maxSpacingLook:]...)
	}
}

// Propose returns up to limit tokens spelling the forced text; Match is
// their length in bytes, so that the gate rates short proposals (often a
// lone whitespace guess) apart from long ones (a key and its colon).
func (f *Forced) Propose(limit int) Proposal {
	if f.con == nil || limit <= 0 {
		return Proposal{}
	}
	f.buf = f.con.Forced(f.buf[:0], maxForcedBytes, f.spacing)
	v := f.con.Matcher().Vocab()
	f.toks = f.toks[:0]
	rest := f.buf
	for len(rest) > 0 && len(f.toks) < limit {
		// The longest prefix token, and the longest the reply used; of
		// tokens with the same bytes the last, the largest id
		// (SentencePiece vocabularies list their byte-fallback pieces,
		// <0x41>, before the pieces a tokenizer emits).
		id, n, uid, un := int32(-1), 0, int32(-1), 0
		for t, k := range v.Prefixes(rest) {
			id, n = t, k
			if f.used[t/64]&(1<<(t%64)) != 0 {
				uid, un = t, k
			}
		}
		if un == n || (un > 0 && bytes.Contains(f.text, rest[:n])) {
			id, n = uid, un
		}
		if n == 0 {
			break
		}
		f.toks = append(f.toks, id)
		rest = rest[n:]
	}
	if len(f.toks) == 0 {
		return Proposal{}
	}
	return Proposal{Tokens: f.toks, Match: len(f.buf) - len(rest)}
}

// spacing guesses the whitespace to write at the gap the reply (and
// forced, after it) has reached: what the reply wrote after the latest
// earlier occurrence of the same punctuation (the last non-whitespace byte)
// at the same JSON nesting, preceded by the same byte (`",` is not `},`),
// else the latest at the same nesting, else the latest; less what it has
// already written of this gap. The nesting tells a pretty-printed reply's
// indents apart. False when the reply has no such earlier gap.
func (f *Forced) spacing(forced []byte) ([]byte, bool) {
	text, nest := f.text, f.nest
	if len(forced) > 0 {
		text = append(text[:len(text):len(text)], forced...)
		sc := f.scan
		for _, c := range forced {
			nest = append(nest[:len(nest):len(nest)], sc.step(c))
		}
	}
	lo := max(0, len(text)-maxSpacingLook)
	end := len(text)
	for end > lo && isJSONSpace(text[end-1]) {
		end--
	}
	if end == lo {
		return nil, false
	}
	written := text[end:]
	c, d := text[end-1], nest[end-1]
	prev := end - 2 // the non-space byte before c, or < lo
	for prev >= lo && isJSONSpace(text[prev]) {
		prev--
	}
	var best []byte
	bestLevel := 0
	for q := end - 2; q >= lo && bestLevel < 3; q-- {
		if text[q] != c {
			continue
		}
		g := q + 1
		for g < len(text) && isJSONSpace(text[g]) {
			g++
		}
		if g >= end || !bytes.HasPrefix(text[q+1:g], written) {
			continue
		}
		level := 1
		if nest[q] == d {
			level = 2
			p := q - 1
			for p >= lo && isJSONSpace(text[p]) {
				p--
			}
			if prev < lo || (p >= lo && text[p] == text[prev]) {
				level = 3
			}
		}
		if level > bestLevel {
			gap := text[q+1+len(written) : g]
			best, bestLevel = gap[:len(gap):len(gap)], level
		}
	}
	return best, bestLevel > 0
}

// jsonScan follows the nesting of a JSON text byte by byte: the brackets
// open outside strings.
type jsonScan struct {
	depth      int32
	inStr, esc bool
}

// step moves past b and returns the nesting after it.
func (s *jsonScan) step(b byte) int32 {
	switch {
	case s.esc:
		s.esc = false
	case s.inStr && b == '\\':
		s.esc = true
	case b == '"':
		s.inStr = !s.inStr
	case s.inStr:
	case b == '{' || b == '[':
		s.depth++
	case b == '}' || b == ']':
		s.depth--
	}
	return s.depth
}

func isJSONSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }
