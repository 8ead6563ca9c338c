package tokenizer

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpeModel is merges-ranked BPE (Hugging Face's BPE model; llama.cpp's gpt2
// vocabularies use the same algorithm): start from characters (or bytes, for
// byte-level vocabularies), repeatedly merge the adjacent pair with the
// lowest merge rank, leftmost first.
type bpeModel struct {
	merges map[uint64]uint64 // left<<32|right -> rank<<32|result id

	charLo []int32        // rune < 0x10000 -> id of its one-rune piece, -1 if none
	charHi map[rune]int32 // the same for the astral planes
	byteID [256]int32     // id of "<0xXX>" pieces (byte fallback), -1 if none
	bl     [256]int32     // byte-level: id of the piece of the printable rune standing for each byte
	vocab  *pieceIndex    // ignore_merges lookups

	byteFallback bool
	unk          int32 // -1 if none
	fuseUnk      bool
	ignoreMerges bool
	// wholeNewlines: a word of newlines only that is a vocabulary piece
	// is that piece, whatever the merges say (llama.cpp's rule for the
	// gemma4 GGUF vocabulary).
	wholeNewlines bool

	// A word can be cut between two characters x|y without changing the
	// result when no merge joins a piece ending in x to a piece starting
	// with y: no symbol can ever span that boundary, and merges on either
	// side never interact. prepareChunking collects the (last rune, first
	// rune) pairs of all merges; Gemma has 33,695 of them, so most word
	// boundaries ("x|▁y", except ">" + "▁</") and about half of the
	// boundaries inside CJK text or JSON are cuts. Cutting keeps each BPE
	// small and lets pieces be cached, which is most of the encoding speed.
	chunk          bool
	joinASCII      [128 * 128 / 64]uint64 // bit x*128+y: some merge joins ...x | y...
	join           map[uint64]struct{}    // the same for other rune pairs
	noCutAfterRaw  bool                   // a merge's left piece is a byte/unk piece
	noCutBeforeRaw bool                   // a merge's right piece is a byte/unk piece

	cacheMu sync.Mutex
	cache   map[string][]int32

	pool sync.Pool // *bpeScratch
}

const (
	cacheMaxEntries = 1 << 17
	cacheMaxWordLen = 256
)

type bpeSym struct {
	id         int32
	prev, next int32
}

type bpeScratch struct {
	syms []bpeSym
	heap []uint64
}

func newBPEModel() *bpeModel {
	m := &bpeModel{merges: map[uint64]uint64{}, charHi: map[rune]int32{}, unk: -1, cache: map[string][]int32{}}
	m.charLo = make([]int32, 0x10000)
	for i := range m.charLo {
		m.charLo[i] = -1
	}
	for i := range m.byteID {
		m.byteID[i] = -1
		m.bl[i] = -1
	}
	m.pool.New = func() any { return &bpeScratch{} }
	return m
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// setPiece records a model-vocabulary piece for the character tables.
func (m *bpeModel) setPiece(p string, id int32) {
	r, n := utf8.DecodeRuneInString(p)
	if n == len(p) && r != utf8.RuneError {
		if r < 0x10000 {
			m.charLo[r] = id
		} else {
			m.charHi[r] = id
		}
	} else if p == "\uFFFD" {
		m.charLo[0xFFFD] = id
	}
	if b := parseBytePiece(p); b >= 0 {
		m.byteID[b] = id
	}
}

func (m *bpeModel) charID(r rune) int32 {
	if r >= 0 && r < 0x10000 {
		return m.charLo[r]
	}
	if id, ok := m.charHi[r]; ok {
		return id
	}
	return -1
}

// addMerge records that left+right (ids) make result with the given rank.
// For a pair listed twice, Hugging Face keeps the last rank (its merge map is
// collected from the list) and llama.cpp the first (std::map::emplace).
func (m *bpeModel) addMerge(left, right, result int32, rank int, keepFirst bool) {
	k := pairKey(left, right)
	if keepFirst {
		if _, dup := m.merges[k]; dup {
			return
		}
	}
	m.merges[k] = uint64(rank)<<32 | uint64(uint32(result))
}

// prepareChunking records which character pairs some merge joins; call
// after all merges are added. pieces maps ids to their text.
func (m *bpeModel) prepareChunking(pieces []string) {
	if m.ignoreMerges {
		return // a whole-word lookup comes first: words must stay whole
	}
	m.join = map[uint64]struct{}{}
	// First and last runes per id, in one sequential pass over the pieces,
	// so the pass over the merges touches two small arrays instead of two
	// random strings per merge. -1: empty, byte-fallback or unk piece.
	first := make([]int32, len(pieces))
	last := make([]int32, len(pieces))
	for id, p := range pieces {
		if p == "" || parseBytePiece(p) >= 0 || int32(id) == m.unk {
			first[id], last[id] = -1, -1
			continue
		}
		x, _ := utf8.DecodeRuneInString(p)
		y, _ := utf8.DecodeLastRuneInString(p)
		first[id], last[id] = x, y
	}
	for k := range m.merges {
		x, y := last[uint32(k>>32)], first[uint32(k)]
		if x < 0 {
			m.noCutAfterRaw = true
			continue
		}
		if y < 0 {
			m.noCutBeforeRaw = true
			continue
		}
		if x < 128 && y < 128 {
			bit := x*128 + y
			m.joinASCII[bit/64] |= 1 << (bit % 64)
		} else {
			m.join[uint64(uint32(x))<<32|uint64(uint32(y))] = struct{}{}
		}
	}
	m.chunk = true
}

// canCut reports whether a word may be cut between x and y; raw marks a
// character without a one-rune piece (it becomes byte pieces or unk).
func (m *bpeModel) canCut(x rune, xRaw bool, y rune, yRaw bool) bool {
	switch {
	case xRaw && yRaw:
		// fuse_unk may join two unknowns; byte pieces may merge.
		return !m.fuseUnk && !m.noCutAfterRaw && !m.noCutBeforeRaw
	case xRaw:
		return !m.noCutAfterRaw
	case yRaw:
		return !m.noCutBeforeRaw
	case x < 128 && y < 128:
		bit := x*128 + y
		return m.joinASCII[bit/64]&(1<<(bit%64)) == 0
	}
	_, joined := m.join[uint64(uint32(x))<<32|uint64(uint32(y))]
	return !joined
}

// encodeWord appends the ids of one pre-tokenized word. It cuts before each
// "▁" where allowed (cheap: strings.Index finds them), and only looks for
// cuts between every pair of characters inside pieces longer than
// longPiece bytes (CJK text, URLs, minified code), where they pay off.
func (m *bpeModel) encodeWord(out []int32, w string, byteLevel bool) []int32 {
	if m.wholeNewlines && w != "" && strings.Trim(w, "\n") == "" {
		if id, ok := m.vocab.get(w); ok {
			return append(out, id)
		}
	}
	if !m.chunk || byteLevel {
		return m.encodeChunk(out, w, byteLevel)
	}
	start := 0
	for i := 0; i < len(w); {
		j := strings.Index(w[i:], metaspace)
		if j < 0 {
			break
		}
		p := i + j
		if p > start {
			x, n := utf8.DecodeLastRuneInString(w[:p])
			if x != '▁' && m.canCut(x, m.isRaw(x, n), '▁', false) {
				out = m.encodePiece(out, w[start:p])
				start = p
			}
		}
		i = p + len(metaspace)
	}
	return m.encodePiece(out, w[start:])
}

// longPiece is the length above which encodePiece looks for inner cuts.
const longPiece = 48

func (m *bpeModel) isRaw(r rune, n int) bool {
	return (r == utf8.RuneError && n == 1) || m.charID(r) < 0
}

func (m *bpeModel) encodePiece(out []int32, w string) []int32 {
	if len(w) <= longPiece {
		return m.encodeChunk(out, w, false)
	}
	start := 0
	prev, prevRaw := rune(-1), false
	for i := 0; i < len(w); {
		r, n := rune(w[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(w[i:])
		}
		raw := m.isRaw(r, n)
		if prev >= 0 && m.canCut(prev, prevRaw, r, raw) {
			out = m.encodeChunk(out, w[start:i], false)
			start = i
		}
		prev, prevRaw = r, raw
		i += n
	}
	return m.encodeChunk(out, w[start:], false)
}

func (m *bpeModel) encodeChunk(out []int32, w string, byteLevel bool) []int32 {
	if w == "" {
		return out
	}
	if m.ignoreMerges {
		if id, ok := m.vocab.get(bytesOrRunes(w, byteLevel)); ok {
			return append(out, id)
		}
	}
	cacheable := len(w) <= cacheMaxWordLen
	if cacheable {
		m.cacheMu.Lock()
		ids, ok := m.cache[w]
		m.cacheMu.Unlock()
		if ok {
			return append(out, ids...)
		}
	}
	n0 := len(out)
	out = m.bpe(out, w, byteLevel)
	if cacheable {
		ids := append([]int32(nil), out[n0:]...)
		m.cacheMu.Lock()
		if len(m.cache) >= cacheMaxEntries {
			clear(m.cache)
		}
		m.cache[w] = ids
		m.cacheMu.Unlock()
	}
	return out
}

func bytesOrRunes(w string, byteLevel bool) string {
	if byteLevel {
		return byteLevelString(w)
	}
	return w
}

// bpe runs the merge loop on one word with a binary heap of (rank, position),
// the order Hugging Face's BPE uses: lowest rank first, then leftmost.
func (m *bpeModel) bpe(out []int32, w string, byteLevel bool) []int32 {
	sc := m.pool.Get().(*bpeScratch)
	syms := sc.syms[:0]
	push := func(id int32) {
		if id == m.unk && m.fuseUnk && len(syms) > 0 && syms[len(syms)-1].id == m.unk {
			return
		}
		syms = append(syms, bpeSym{id: id})
	}
	if byteLevel {
		for i := 0; i < len(w); i++ {
			id := m.bl[w[i]]
			if id < 0 {
				id = m.unk
			}
			if id >= 0 {
				push(id)
			}
		}
	} else {
		for i := 0; i < len(w); {
			r, n := utf8.DecodeRuneInString(w[i:])
			id := int32(-1)
			if !(r == utf8.RuneError && n == 1) {
				id = m.charID(r)
			}
			if id < 0 && m.byteFallback {
				ok := true
				for j := i; j < i+n; j++ {
					if m.byteID[w[j]] < 0 {
						ok = false
						break
					}
				}
				if ok {
					for j := i; j < i+n; j++ {
						push(m.byteID[w[j]])
					}
					i += n
					continue
				}
			}
			if id < 0 {
				id = m.unk
			}
			if id >= 0 {
				push(id)
			}
			i += n
		}
	}
	if len(syms) <= smallWord {
		out = m.bpeSmall(out, syms)
		sc.syms = syms
		m.pool.Put(sc)
		return out
	}
	for i := range syms {
		syms[i].prev = int32(i - 1)
		syms[i].next = int32(i + 1)
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if v, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = heapPush(h, v&^0xFFFFFFFF|uint64(i))
		}
	}
	for len(h) > 0 {
		var top uint64
		top, h = heapPop(h)
		rank := top >> 32
		pos := int32(top & 0xFFFFFFFF)
		s := &syms[pos]
		if s.id < 0 || s.next < 0 {
			continue
		}
		nx := s.next
		v, ok := m.merges[pairKey(s.id, syms[nx].id)]
		if !ok || v>>32 != rank {
			continue // stale entry
		}
		s.id = int32(uint32(v))
		s.next = syms[nx].next
		if s.next >= 0 {
			syms[s.next].prev = pos
		}
		syms[nx].id = -1
		if s.prev >= 0 {
			if v, ok := m.merges[pairKey(syms[s.prev].id, s.id)]; ok {
				h = heapPush(h, v&^0xFFFFFFFF|uint64(s.prev))
			}
		}
		if s.next >= 0 {
			if v, ok := m.merges[pairKey(s.id, syms[s.next].id)]; ok {
				h = heapPush(h, v&^0xFFFFFFFF|uint64(pos))
			}
		}
	}
	for i := int32(0); len(syms) > 0 && i >= 0; i = syms[i].next {
		out = append(out, syms[i].id)
	}
	sc.syms, sc.heap = syms, h
	m.pool.Put(sc)
	return out
}

// smallWord is the symbol count up to which bpeSmall's linear scans beat
// the heap (most words of prose).
const smallWord = 24

// bpeSmall is the same merge order as the heap loop (lowest rank, then
// leftmost) for short words: ranks of adjacent pairs in an array, a linear
// scan for the minimum, and only the two new neighbour pairs looked up after
// each merge.
func (m *bpeModel) bpeSmall(out []int32, syms []bpeSym) []int32 {
	var idsBuf [smallWord]int32
	var ranks [smallWord]uint64 // rank<<32 | result, or noMerge
	const noMerge = ^uint64(0)
	n := len(syms)
	ids := idsBuf[:n]
	for i := range syms {
		ids[i] = syms[i].id
	}
	look := func(a, b int32) uint64 {
		if v, ok := m.merges[pairKey(a, b)]; ok {
			return v
		}
		return noMerge
	}
	for i := 0; i+1 < n; i++ {
		ranks[i] = look(ids[i], ids[i+1])
	}
	for n > 1 {
		best := 0
		for i := 1; i+1 < n; i++ {
			if ranks[i]>>32 < ranks[best]>>32 {
				best = i
			}
		}
		v := ranks[best]
		if v == noMerge {
			break
		}
		ids[best] = int32(uint32(v))
		copy(ids[best+1:n], ids[best+2:n])
		copy(ranks[best+1:n-1], ranks[best+2:n])
		n--
		if best > 0 {
			ranks[best-1] = look(ids[best-1], ids[best])
		}
		if best+1 < n {
			ranks[best] = look(ids[best], ids[best+1])
		}
	}
	return append(out, ids[:n]...)
}

func heapPush(h []uint64, v uint64) []uint64 {
	h = append(h, v)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= v {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = v
	return h
}

func heapPop(h []uint64) (uint64, []uint64) {
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
		if r := l + 1; r < n && h[r] < h[l] {
			l = r
		}
		if last <= h[l] {
			break
		}
		h[i] = h[l]
		i = l
	}
	h[i] = last
	return top, h
}

// hash feeds the merge table into the fingerprint in rank order.
func (m *bpeModel) hash(w func(uint64)) {
	type kv struct{ k, v uint64 }
	all := make([]kv, 0, len(m.merges))
	for k, v := range m.merges {
		all = append(all, kv{k, v})
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Compare(a.v>>32, b.v>>32) })
	for _, x := range all {
		w(x.k)
		w(x.v)
	}
	w(boolBit(m.byteFallback) | boolBit(m.fuseUnk)<<1 | boolBit(m.ignoreMerges)<<2 | boolBit(m.wholeNewlines)<<3)
	w(uint64(int64(m.unk)))
}
