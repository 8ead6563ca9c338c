package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// spmModel is SentencePiece BPE as llama.cpp runs it for `llama` GGUF
// vocabularies: start from characters, repeatedly merge the adjacent pair
// whose concatenation is a vocabulary piece with the highest score (leftmost
// on ties); characters left without a piece become their UTF-8 bytes
// (<0xXX> pieces), or unk.
type spmModel struct {
	vocab       *pieceIndex // pieces that merges may produce
	scores      []float32
	byteID      [256]int32
	unk         int32
	spacePrefix bool // add " " before the text (SentencePiece's dummy prefix)
}

type spmSym struct {
	start, n   int // byte span in the text
	prev, next int
}

type spmBigram struct {
	left, size int
	score      float32
}

// less orders the bigram heap: highest score first, then leftmost.
func (a spmBigram) before(b spmBigram) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.left < b.left
}

func (m *spmModel) encode(out []int32, seg string, first bool) []int32 {
	if m.spacePrefix && first {
		seg = " " + seg
	}
	text := strings.ReplaceAll(seg, " ", metaspace)
	var syms []spmSym
	for i := 0; i < len(text); {
		_, n := utf8.DecodeRuneInString(text[i:])
		syms = append(syms, spmSym{start: i, n: n, prev: len(syms) - 1, next: len(syms) + 1})
		i += n
	}
	if len(syms) == 0 {
		return out
	}
	syms[len(syms)-1].next = -1
	var h []spmBigram
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		piece := text[syms[l].start : syms[r].start+syms[r].n]
		id, ok := m.vocab.get(piece)
		if !ok {
			return
		}
		h = spmPush(h, spmBigram{left: l, size: len(piece), score: m.scores[id]})
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for len(h) > 0 {
		var b spmBigram
		b, h = spmPop(h)
		l := &syms[b.left]
		if l.n == 0 || l.next < 0 {
			continue
		}
		r := &syms[l.next]
		if r.n == 0 || l.n+r.n != b.size {
			continue // stale: one side changed since this bigram was queued
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if l.next >= 0 {
			syms[l.next].prev = b.left
		}
		try(l.prev, b.left)
		try(b.left, l.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		s := syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := m.vocab.get(piece); ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			if id := m.byteID[piece[j]]; id >= 0 {
				out = append(out, id)
			} else if m.unk >= 0 {
				out = append(out, m.unk)
			}
		}
	}
	return out
}

func spmPush(h []spmBigram, v spmBigram) []spmBigram {
	h = append(h, v)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !v.before(h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = v
	return h
}

func spmPop(h []spmBigram) (spmBigram, []spmBigram) {
	top := h[0]
	last := h[len(h)-1]
	h = h[:len(h)-1]
	n := len(h)
	if n == 0 {
		return top, h
	}
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		if r := l + 1; r < n && h[r].before(h[l]) {
			l = r
		}
		if !h[l].before(last) {
			break
		}
		h[i] = h[l]
		i = l
	}
	h[i] = last
	return top, h
}
