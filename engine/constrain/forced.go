package constrain

import (
	"iter"
	"math/bits"
)

// Forced text: what the grammar leaves a model no choice about (a property
// name once only one can come, a const, the rest of an enum value whose
// prefix is unique, closing brackets), for drafting it ahead (spec's Forced
// source). Nothing here changes what a State allows.

// isSpace reports a byte of JSON whitespace.
func isSpace(b byte) bool { return b == ' ' || b == '\n' || b == '\t' || b == '\r' }

// byteSet is a set of bytes, one bit per byte.
type byteSet [4]uint64

func (s *byteSet) add(lo, hi byte) {
	for b := int(lo); b <= int(hi); b++ {
		s[b/64] |= 1 << (b % 64)
	}
}

func (s *byteSet) has(b byte) bool { return s[b/64]&(1<<(b%64)) != 0 }

// only returns the set's one byte not rejected by skip, or false when
// there is none or more than one.
func (s *byteSet) only(skip func(byte) bool) (byte, bool) {
	n, one := 0, byte(0)
	for w, word := range s {
		for word != 0 {
			i := bits.TrailingZeros64(word)
			word &= word - 1
			if b := byte(w*64 + i); skip == nil || !skip(b) {
				n, one = n+1, b
				if n > 1 {
					return 0, false
				}
			}
		}
	}
	return one, n == 1
}

// next is the set of bytes the parses cfgs allow next; open reports that
// the text may also end here or a Token element may come (then no byte is
// forced).
func (m *Matcher) next(cfgs []config) (set byteSet, open bool) {
	for _, c := range cfgs {
		if c.n == accept {
			open = true
			continue
		}
		for _, e := range m.g.nodes[c.n].edges {
			switch e.kind {
			case edgeByte:
				set.add(e.lo, e.hi)
			case edgeToken:
				open = true
			}
		}
	}
	return set, open
}

// Forced appends to dst, and returns, the longest text (at most limit
// bytes) that the grammar allows as the only continuation of s: it stops
// where more than one byte may come next, where the text may end
// (Complete) and where a Token element may come.
//
// The optional whitespace between JSON tokens (one space, or a newline and
// an indent) is a choice the grammar leaves the model, so on its own it
// would end the forced text at nearly every key and colon. When spacing is
// not nil, Forced asks it at such a choice (where the grammar allows a
// newline or a tab next: JSON strings allow neither raw, so this is
// whitespace between tokens) for the whitespace to guess, given the text
// forced so far; spacing returns false to stop there. Forced then takes as
// much of that whitespace as the grammar allows, and after it the next byte
// if it is the only non-whitespace one allowed, and goes on. The guess is a
// proposal for drafting, which the model verifies: it changes nothing the
// grammar allows.
func (s *State) Forced(dst []byte, limit int, spacing func(forced []byte) ([]byte, bool)) []byte {
	m := s.m
	start := len(dst)
	cur := s.cfgs
	var buf [2][]config
	flip := 0
	stepTo := func(b byte) bool {
		next, _, ok := m.step(buf[flip][:0], cur, b, nil)
		buf[flip] = next
		if !ok || len(next) == 0 {
			return false
		}
		cur, flip = next, 1-flip
		dst = append(dst, b)
		return true
	}
	gapDone := false // the guessed whitespace of this gap is written
	for len(dst)-start < limit {
		set, open := m.next(cur)
		if open {
			break
		}
		var skip func(byte) bool
		if gapDone {
			skip = isSpace
		}
		if b, ok := set.only(skip); ok {
			if !stepTo(b) {
				break
			}
			gapDone = gapDone && isSpace(b)
			continue
		}
		if gapDone || spacing == nil || !(set.has('\n') || set.has('\t')) {
			break
		}
		ws, ok := spacing(dst[start:])
		if !ok {
			break
		}
		for _, b := range ws {
			if len(dst)-start >= limit || !isSpace(b) {
				break
			}
			if set, open = m.next(cur); open || !set.has(b) || !stepTo(b) {
				break
			}
		}
		gapDone = true
	}
	return dst
}

// Matcher is the matcher s belongs to.
func (s *State) Matcher() *Matcher { return s.m }

// TokenBytes is the text token id spells (nil for a special token or an
// id outside the vocabulary).
func (v *Vocab) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(v.text) {
		return nil
	}
	return v.text[id]
}

// Prefixes yields every text token that text starts with and its length
// in bytes, shortest first (tokens with the same bytes in id order).
func (v *Vocab) Prefixes(text []byte) iter.Seq2[int32, int] {
	return func(yield func(int32, int) bool) {
		lo, hi := int32(0), int32(len(v.trie))
		for d := 0; d < len(text) && lo < hi; d++ {
			// The children of the current node are [lo, hi): step
			// through the siblings by their skip.
			i := lo
			for i < hi && v.trie[i].b != text[d] {
				i = v.trie[i].skip
			}
			if i >= hi {
				return
			}
			nd := &v.trie[i]
			for _, id := range v.ids[nd.idLo:nd.id] {
				if !yield(id, d+1) {
					return
				}
			}
			lo, hi = i+1, nd.skip
		}
	}
}
