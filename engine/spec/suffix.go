package spec

import (
	"maps"
	"sync"
)

// Corpus is the text a request did not see itself but whose structure may
// repeat: earlier conversations, the prompt library. It is a suffix automaton
// over the token ids of its documents, extended incrementally as documents are
// added (amortised O(1) per token), so a request can find, token by token, the
// longest suffix of its own sequence that occurs anywhere in the corpus and
// propose what followed it there.
//
// Documents are separated by ids no tokenizer produces, so no match spans two
// documents. A Corpus is safe for concurrent use: the app adds documents while
// a request reads.
type Corpus struct {
	mu      sync.RWMutex
	limit   int
	docs    [][]int32 // kept to rebuild when the limit is reached
	toks    []int32   // documents and separators, concatenated
	st      []saState
	last    int32
	version uint64 // bumped on every change; matchers resynchronise
}

// saState is a state of the automaton: the set of substrings sharing one set
// of end positions. Most states have a single outgoing edge, kept inline.
type saState struct {
	len   int32 // longest substring in the state
	link  int32 // suffix link
	first int32 // end position of the first occurrence
	tok   int32 // the inline edge's token, when to != 0
	to    int32 // the inline edge's target (0 = none: the root is never a target)
	more  map[int32]int32
}

// DefaultCorpusLimit caps the corpus at about this many tokens (a few tens of
// MB of automaton); older documents are dropped first.
const DefaultCorpusLimit = 1 << 18

// NewCorpus returns an empty corpus holding up to limit tokens (<= 0: the
// default). When a document would exceed the limit, the oldest documents are
// dropped and the automaton rebuilt.
func NewCorpus(limit int) *Corpus {
	if limit <= 0 {
		limit = DefaultCorpusLimit
	}
	c := &Corpus{limit: limit}
	c.reset()
	return c
}

func (c *Corpus) reset() {
	c.toks = c.toks[:0]
	c.st = append(c.st[:0], saState{link: -1, first: -1})
	c.last = 0
}

// Add appends a document. Documents longer than the limit keep their end.
func (c *Corpus) Add(doc []int32) {
	if len(doc) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(doc) >= c.limit {
		doc = doc[len(doc)-c.limit+1:]
	}
	doc = append([]int32(nil), doc...)
	if len(c.toks)+len(doc)+1 > c.limit {
		// Keep the newest documents that fit in half the limit, so
		// rebuilding stays rare.
		keep := len(doc) + 1
		i := len(c.docs)
		for i > 0 && keep+len(c.docs[i-1])+1 <= c.limit/2 {
			i--
			keep += len(c.docs[i]) + 1
		}
		c.docs = append(c.docs[:0:0], c.docs[i:]...)
		c.reset()
		for n, d := range c.docs {
			c.extendDoc(d, n)
		}
	}
	c.docs = append(c.docs, doc)
	c.extendDoc(doc, len(c.docs)-1)
	c.version++
}

// Len is the number of tokens held, separators included.
func (c *Corpus) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.toks)
}

func (c *Corpus) extendDoc(doc []int32, n int) {
	for _, t := range doc {
		c.extend(t)
	}
	// Separators are negative and distinct per document position, so no
	// substring containing one occurs twice.
	c.extend(-1 - int32(n))
}

func (c *Corpus) edge(s, t int32) int32 {
	st := &c.st[s]
	if st.to != 0 && st.tok == t {
		return st.to
	}
	if st.more != nil {
		return st.more[t]
	}
	return 0
}

func (c *Corpus) setEdge(s, t, to int32) {
	st := &c.st[s]
	if st.to == 0 || st.tok == t {
		st.tok, st.to = t, to
		return
	}
	if st.more == nil {
		st.more = make(map[int32]int32, 2)
	}
	st.more[t] = to
}

// extend is the standard online suffix-automaton construction.
func (c *Corpus) extend(t int32) {
	pos := int32(len(c.toks))
	c.toks = append(c.toks, t)
	cur := int32(len(c.st))
	c.st = append(c.st, saState{len: c.st[c.last].len + 1, first: pos})
	p := c.last
	for p >= 0 && c.edge(p, t) == 0 {
		c.setEdge(p, t, cur)
		p = c.st[p].link
	}
	switch {
	case p < 0:
		c.st[cur].link = 0
	case c.st[c.edge(p, t)].len == c.st[p].len+1:
		c.st[cur].link = c.edge(p, t)
	default:
		q := c.edge(p, t)
		clone := int32(len(c.st))
		qs := c.st[q]
		c.st = append(c.st, saState{
			len: c.st[p].len + 1, link: qs.link, first: qs.first,
			tok: qs.tok, to: qs.to, more: maps.Clone(qs.more),
		})
		for p >= 0 && c.edge(p, t) == q {
			c.setEdge(p, t, clone)
			p = c.st[p].link
		}
		c.st[q].link = clone
		c.st[cur].link = clone
	}
	c.last = cur
}

// Matcher follows one request's sequence through a Corpus: after each token
// it knows the longest suffix of the sequence that occurs in the corpus. It is
// a drafting Source; a request owns its Matcher.
type Matcher struct {
	c *Corpus
	// MinMatch is the shortest match that proposes (default 2: single
	// tokens recur everywhere in a corpus).
	MinMatch int

	version uint64
	state   int32
	n       int32   // length of the current match
	recent  []int32 // last tokens, to resynchronise after the corpus changed
}

// Matcher returns a new matcher over c.
func (c *Corpus) Matcher() *Matcher { return &Matcher{c: c, MinMatch: 2} }

// Name identifies the source in statistics.
func (m *Matcher) Name() string { return "suffix" }

// maxRecent bounds the match length tracked after a resynchronisation.
const maxRecent = 64

// Reset starts a new request whose sequence so far is history.
func (m *Matcher) Reset(history []int32) {
	m.c.mu.RLock()
	defer m.c.mu.RUnlock()
	m.state, m.n, m.recent = 0, 0, m.recent[:0]
	m.version = m.c.version
	for _, t := range history {
		m.step(t)
	}
}

// Append feeds the next token of the sequence.
func (m *Matcher) Append(t int32) {
	m.c.mu.RLock()
	defer m.c.mu.RUnlock()
	if m.version != m.c.version {
		m.resync()
	}
	m.step(t)
}

func (m *Matcher) resync() {
	old := append([]int32(nil), m.recent...)
	m.state, m.n, m.recent = 0, 0, m.recent[:0]
	m.version = m.c.version
	for _, t := range old {
		m.step(t)
	}
}

func (m *Matcher) step(t int32) {
	if len(m.recent) == 2*maxRecent {
		m.recent = append(m.recent[:0], m.recent[maxRecent:]...)
	}
	m.recent = append(m.recent, t)
	c := m.c
	for m.state != 0 && c.edge(m.state, t) == 0 {
		m.state = c.st[m.state].link
		m.n = c.st[m.state].len
	}
	if next := c.edge(m.state, t); next != 0 {
		m.state = next
		m.n++
	} else {
		m.state, m.n = 0, 0
	}
}

// Propose returns up to limit tokens that followed the first occurrence in the
// corpus of the longest suffix of the sequence, and the match length.
func (m *Matcher) Propose(limit int) Proposal {
	m.c.mu.RLock()
	defer m.c.mu.RUnlock()
	if m.version != m.c.version {
		m.resync()
	}
	if limit <= 0 || m.n < int32(max(m.MinMatch, 1)) {
		return Proposal{}
	}
	c := m.c
	from := int(c.st[m.state].first) + 1
	out := make([]int32, 0, min(limit, max(len(c.toks)-from, 0)))
	for i := from; i < len(c.toks) && len(out) < limit && c.toks[i] >= 0; i++ {
		out = append(out, c.toks[i])
	}
	if len(out) == 0 {
		return Proposal{}
	}
	return Proposal{Tokens: out, Match: int(m.n)}
}
