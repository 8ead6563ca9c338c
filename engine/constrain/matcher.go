package constrain

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// MaxConfigs bounds the parses a State follows at once (the alternatives of
// an ambiguous anyOf): a token that would need more is not allowed, so the
// work per byte stays bounded.
const MaxConfigs = 1024

// maskCacheBytes bounds the memory each of a Matcher's two mask caches holds.
const maskCacheBytes = 32 << 20

// ErrNotAllowed is the error State.Advance returns for a token the grammar
// does not allow next.
var ErrNotAllowed = errors.New("constrain: token not allowed by the grammar")

// A Matcher is a grammar bound to a vocabulary. It caches the masks it
// computes (bounded), so one Matcher per schema and model serves every
// request with that schema; it is safe for concurrent use.
type Matcher struct {
	g      *Grammar
	v      *Vocab
	tokIDs []int32 // grammar token index -> vocabulary id

	mu    sync.Mutex
	local map[string]*localMask // by the stack-relative key
	full  map[string][]uint64   // by the whole state
}

// localMask is what a state allows up to the frame below which it does not
// look: the tokens allowed by the parses that stay above that frame or
// return from it exactly at their end, and the trie nodes where a parse
// returns from it mid-token (continued from there with the real stack).
type localMask struct {
	mask    []uint64
	escapes []int32
}

// NewMatcher binds g to v. It fails when g names a Token piece v lacks.
func NewMatcher(g *Grammar, v *Vocab) (*Matcher, error) {
	ids, err := v.tokenIDs(g)
	if err != nil {
		return nil, err
	}
	return &Matcher{g: g, v: v, tokIDs: ids, local: map[string]*localMask{}, full: map[string][]uint64{}}, nil
}

// Vocab is the vocabulary the matcher masks.
func (m *Matcher) Vocab() *Vocab { return m.v }

// frame is one entry of a parse's call stack: the node to return to. Stacks
// are persistent (shared tails), so cloning a State copies no stack.
type frame struct {
	ret    int32
	depth  int32
	hash   uint64
	parent *frame
}

func push(st *frame, ret int32) *frame {
	var h uint64 = 0x9E3779B97F4A7C15
	d := int32(1)
	if st != nil {
		h, d = st.hash, st.depth+1
	}
	h ^= uint64(uint32(ret)) + 0x9E3779B97F4A7C15 + h<<6 + h>>2
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 31
	return &frame{ret: ret, depth: d, hash: h, parent: st}
}

func sameStack(a, b *frame) bool {
	return a == b || (a != nil && b != nil && a.depth == b.depth && a.hash == b.hash)
}

// config is one parse: a node of the grammar and its stack. Node accept
// (-1, empty stack) is the whole grammar matched.
type config struct {
	n  int32
	st *frame
}

const accept = -1

// A State is where matching stands after some tokens: the parses still
// alive. States are values to Clone and Advance; a State is not safe for
// concurrent use, its Matcher is.
type State struct {
	m    *Matcher
	cfgs []config
	mask []uint64 // memo of Mask
}

// Start returns the state before any token.
func (m *Matcher) Start() *State {
	s := &State{m: m}
	var scratch []config
	s.cfgs, _, _ = m.close(nil, scratch, config{n: m.g.root}, nil)
	return s
}

// Clone returns an independent copy (cheap: the stacks are shared).
func (s *State) Clone() *State {
	return &State{m: s.m, cfgs: slices.Clone(s.cfgs), mask: s.mask}
}

// Complete reports whether the tokens so far match the whole grammar: the
// point where a stop token may end the text (more tokens may still be
// allowed, as digits after a number).
func (s *State) Complete() bool {
	for _, c := range s.cfgs {
		if c.n == accept {
			return true
		}
	}
	return false
}

// Advance moves past token id, or returns ErrNotAllowed (leaving s as it
// was) when the grammar does not allow it next.
func (s *State) Advance(id int32) error {
	m := s.m
	var next []config
	for i, tid := range m.tokIDs {
		if tid != id {
			continue
		}
		for _, c := range s.cfgs {
			if c.n == accept {
				continue
			}
			for _, e := range m.g.nodes[c.n].edges {
				if e.kind == edgeToken && e.arg == int32(i) {
					var ok bool
					if next, _, ok = m.close(next, nil, config{e.to, c.st}, nil); !ok {
						return fmt.Errorf("%w: more than %d parses at once", ErrNotAllowed, MaxConfigs)
					}
				}
			}
		}
	}
	if id >= 0 && int(id) < len(m.v.text) && m.v.text[id] != nil {
		cur := s.cfgs
		var buf [2][]config
		for i, c := range m.v.text[id] {
			var ok bool
			buf[i&1], _, ok = m.step(buf[i&1][:0], cur, c, nil)
			if !ok {
				return fmt.Errorf("%w: more than %d parses at once", ErrNotAllowed, MaxConfigs)
			}
			cur = buf[i&1]
			if len(cur) == 0 {
				break
			}
		}
		for _, c := range cur {
			next = addConfig(next, c)
		}
	}
	if len(next) == 0 {
		return fmt.Errorf("%w: id %d", ErrNotAllowed, id)
	}
	s.cfgs, s.mask = slices.Clip(next), nil
	return nil
}

func addConfig(dst []config, c config) []config {
	for _, d := range dst {
		if d.n == c.n && sameStack(d.st, c.st) {
			return dst
		}
	}
	return append(dst, c)
}

// close adds to dst the configurations c reaches without consuming a byte
// (through epsilon edges, calls and returns), keeping those that consume
// (or accept). A return from base (a local walk's bottom) is not followed:
// escaped reports it. ok is false past MaxConfigs.
func (m *Matcher) close(dst, scratch []config, c config, base *frame) (out []config, escaped, ok bool) {
	work := append(scratch[:0], c)
	seen := work[:0:0]
	for len(work) > 0 {
		c := work[len(work)-1]
		work = work[:len(work)-1]
		dup := false
		for _, d := range seen {
			if d.n == c.n && sameStack(d.st, c.st) {
				dup = true
				break
			}
		}
		if dup {
			continue
		}
		if len(seen) >= 4*MaxConfigs {
			return dst, escaped, false
		}
		seen = append(seen, c)
		if c.n == accept {
			dst = addConfig(dst, c)
			continue
		}
		nd := &m.g.nodes[c.n]
		if nd.final {
			switch {
			case base != nil && c.st == base:
				escaped = true
			case c.st == nil:
				work = append(work, config{n: accept})
			case base == nil || c.st != base:
				work = append(work, config{c.st.ret, c.st.parent})
			}
			continue
		}
		consumes := false
		for _, e := range nd.edges {
			switch e.kind {
			case edgeEps:
				work = append(work, config{e.to, c.st})
			case edgeCall:
				work = append(work, config{m.g.starts[e.arg], push(c.st, e.to)})
			default:
				consumes = true
			}
		}
		if consumes {
			dst = addConfig(dst, c)
			if len(dst) > MaxConfigs {
				return dst, escaped, false
			}
		}
	}
	return dst, escaped, true
}

// step advances every configuration of cur by byte b into dst.
func (m *Matcher) step(dst, cur []config, b byte, base *frame) (out []config, escaped, ok bool) {
	var scratch [16]config
	for _, c := range cur {
		if c.n == accept {
			continue
		}
		for _, e := range m.g.nodes[c.n].edges {
			if e.kind == edgeByte && e.lo <= b && b <= e.hi {
				var esc bool
				if dst, esc, ok = m.close(dst, scratch[:0], config{e.to, c.st}, base); !ok {
					return dst[:0], false, false
				}
				escaped = escaped || esc
			}
		}
	}
	return dst, escaped, true
}

// Mask returns the tokens allowed next, one bit per id (bit id%64 of word
// id/64), special tokens only where a Token element allows them and stop
// tokens never: the caller adds its stop ids when Complete. The slice is
// shared with the Matcher's cache: read it, never write it.
func (s *State) Mask() []uint64 {
	if s.mask != nil {
		return s.mask
	}
	m := s.m
	s0, rel := s.split()
	key := localKey(rel)
	fullKey := key
	if s0 != nil {
		var b [12]byte
		binary.LittleEndian.PutUint64(b[:], s0.hash)
		binary.LittleEndian.PutUint32(b[8:], uint32(s0.depth))
		fullKey += string(b[:])
	} else {
		fullKey += "\x00"
	}
	m.mu.Lock()
	full, ok := m.full[fullKey]
	lm := m.local[key]
	m.mu.Unlock()
	if ok {
		s.mask = full
		return full
	}
	if lm == nil {
		lm = m.localWalk(rel)
		m.mu.Lock()
		store(m.local, key, lm, func(l *localMask) int { return len(l.mask)*8 + len(l.escapes)*4 })
		m.mu.Unlock()
	}
	full = slices.Clone(lm.mask)
	if s0 != nil && len(lm.escapes) > 0 {
		// Continue each escape's subtree from the frame the parses
		// returned to, with the real stack.
		start, _, ok := m.close(nil, nil, config{s0.ret, s0.parent}, nil)
		if ok {
			for _, i := range lm.escapes {
				m.walk(start, i+1, m.v.trie[i].skip, m.v.trie[i].depth, nil, full, nil)
			}
		}
	}
	// Tokens the grammar names by piece.
	for _, c := range s.cfgs {
		if c.n == accept {
			continue
		}
		for _, e := range m.g.nodes[c.n].edges {
			if e.kind == edgeToken {
				id := m.tokIDs[e.arg]
				if id >= 0 && int(id) < m.v.size {
					full[id/64] |= 1 << (uint(id) % 64)
				}
			}
		}
	}
	m.mu.Lock()
	store(m.full, fullKey, full, func(f []uint64) int { return len(f) * 8 })
	m.mu.Unlock()
	s.mask = full
	return full
}

// store puts v in a cache map, emptying the map first when it would pass
// maskCacheBytes (the masks of one request's states repeat; a fresh map
// refills with the ones still in use).
func store[V any](cache map[string]V, key string, v V, size func(V) int) {
	total := 0
	for _, e := range cache {
		total += size(e)
		if total+size(v) > maskCacheBytes {
			clear(cache)
			break
		}
	}
	cache[key] = v
}

// split finds the deepest stack frame s0 below every parse and each parse
// relative to it: its node and the return nodes above s0, bottom first.
func (s *State) split() (s0 *frame, rel [][]int32) {
	var live []config
	for _, c := range s.cfgs {
		if c.n != accept {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return nil, nil
	}
	minDepth := int32(1 << 30)
	for _, c := range live {
		d := int32(0)
		if c.st != nil {
			d = c.st.depth
		}
		minDepth = min(minDepth, d)
	}
	anc := make([]*frame, len(live))
	for i, c := range live {
		f := c.st
		for f != nil && f.depth > minDepth {
			f = f.parent
		}
		anc[i] = f
	}
	for {
		same := true
		for _, a := range anc[1:] {
			if !sameStack(a, anc[0]) {
				same = false
				break
			}
		}
		if same {
			break
		}
		for i := range anc {
			anc[i] = anc[i].parent
		}
	}
	s0 = anc[0]
	d0 := int32(0)
	if s0 != nil {
		d0 = s0.depth
	}
	for _, c := range live {
		r := []int32{c.n}
		for f := c.st; f != nil && f.depth > d0; f = f.parent {
			r = append(r, f.ret)
		}
		slices.Reverse(r[1:])
		rel = append(rel, r)
	}
	slices.SortFunc(rel, slices.Compare[[]int32])
	return s0, rel
}

// localKey spells the relative parses as a map key.
func localKey(rel [][]int32) string {
	var b []byte
	for _, r := range rel {
		b = binary.AppendUvarint(b, uint64(len(r)))
		for _, x := range r {
			b = binary.AppendUvarint(b, uint64(uint32(x)))
		}
	}
	return string(b)
}

// localWalk computes the local mask of the relative parses rel, rooted at a
// fresh bottom frame.
func (m *Matcher) localWalk(rel [][]int32) *localMask {
	base := &frame{hash: 0x5851F42D4C957F2D}
	var start []config
	for _, r := range rel {
		st := base
		for _, ret := range r[1:] {
			st = push(st, ret)
		}
		start = append(start, config{r[0], st})
	}
	lm := &localMask{mask: make([]uint64, m.v.MaskWords())}
	m.walk(start, 0, int32(len(m.v.trie)), 0, base, lm.mask, &lm.escapes)
	return lm
}

// walk runs the parses start through the trie nodes [lo, hi) (subtrees
// whose roots are at depth d0+1), setting the bits of the tokens that
// leave a parse alive. With base set, a parse returning from base is an
// escape: the node is recorded and its tokens allowed.
func (m *Matcher) walk(start []config, lo, hi, d0 int32, base *frame, mask []uint64, escapes *[]int32) {
	trie := m.v.trie
	sets := [][]config{start}
	for i := lo; i < hi; {
		nd := &trie[i]
		k := int(nd.depth - d0)
		for len(sets) <= k {
			sets = append(sets, nil)
		}
		next, esc, ok := m.step(sets[k][:0], sets[k-1], nd.b, base)
		sets[k] = next
		if !ok {
			next = next[:0]
			esc = false
		}
		if esc {
			*escapes = append(*escapes, i)
		}
		if len(next) == 0 && !esc {
			i = nd.skip
			continue
		}
		for _, id := range m.v.ids[nd.idLo:nd.id] {
			mask[id/64] |= 1 << (uint(id) % 64)
		}
		if len(next) == 0 {
			i = nd.skip
			continue
		}
		i++
	}
}
