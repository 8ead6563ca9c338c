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
// brackets), cut into the vocabulary's longest tokens, one after the other.
// At the optional whitespace between JSON tokens it guesses what the reply
// wrote last time after the same punctuation, so that `": "` and the next
// key are drafted too. It proposes nothing for a request without a grammar
// constraint; the gate decides, as for every source, whether its drafts pay.
//
// (The forced text is tokenized by longest match in the vocabulary's trie,
// not by the model's tokenizer: the loop knows only ids, and for JSON
// punctuation and keys the two agree nearly always; a draft split otherwise
// is only rejected.)
type Forced struct {
	con  *constrain.State // the loop's state (read only), nil: unconstrained
	text []byte           // the reply so far
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
	f.con, f.text = nil, f.text[:0]
}

// Constrain gives the source the request's constraint, which the loop
// advances past every emitted token before Append: the source reads it and
// never advances it. Constraints other than Grammar's give no drafts.
func (f *Forced) Constrain(c Constraint) {
	f.con = nil
	if g, ok := c.(grammarState); ok {
		f.con = g.s
	}
}

// Append feeds the next emitted token (its text, for the whitespace guess).
func (f *Forced) Append(t int32) {
	if f.con == nil {
		return
	}
	f.text = append(f.text, f.con.Matcher().Vocab().TokenBytes(t)...)
	if len(f.text) > 2*maxSpacingLook {
		f.text = append(f.text[:0], f.text[len(f.text)-maxSpacingLook:]...)
	}
}

// Propose returns up to limit tokens spelling the forced text; Match is
// its length in bytes (a longer forced text is as sure as a short one, but
// it gates each (source, length) pair on its own rate all the same).
func (f *Forced) Propose(limit int) Proposal {
	if f.con == nil || limit <= 0 {
		return Proposal{}
	}
	f.buf = f.con.Forced(f.buf[:0], maxForcedBytes, f.spacing)
	v := f.con.Matcher().Vocab()
	f.toks = f.toks[:0]
	rest := f.buf
	for len(rest) > 0 && len(f.toks) < limit {
		id, n := v.Longest(rest)
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
// forced, after it) has reached: what the reply wrote after the last
// earlier occurrence of the same punctuation (the last non-whitespace byte,
// with the one before it when that occurred too), less what it has already
// written of this gap. False when the reply has no such earlier gap.
func (f *Forced) spacing(forced []byte) ([]byte, bool) {
	text := f.text
	if len(forced) > 0 {
		text = append(text[:len(text):len(text)], forced...)
	}
	lo := max(0, len(text)-maxSpacingLook)
	text = text[lo:]
	end := len(text)
	for end > 0 && isJSONSpace(text[end-1]) {
		end--
	}
	if end == 0 {
		return nil, false
	}
	written := text[end:]
	prev := end - 2 // the non-space byte before text[end-1], or -1
	for prev >= 0 && isJSONSpace(text[prev]) {
		prev--
	}
	var one []byte // the gap after the latest earlier text[end-1] alone
	for q := end - 2; q >= 0; q-- {
		if text[q] != text[end-1] {
			continue
		}
		g := q + 1
		for g < len(text) && isJSONSpace(text[g]) {
			g++
		}
		if g >= end || !bytes.HasPrefix(text[q+1:g], written) {
			continue
		}
		gap := text[q+1+len(written) : g]
		p := q - 1
		for p >= 0 && isJSONSpace(text[p]) {
			p--
		}
		if prev < 0 || (p >= 0 && text[p] == text[prev]) {
			return gap, true
		}
		if one == nil {
			one = gap[:len(gap):len(gap)]
		}
	}
	return one, one != nil
}

func isJSONSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }
