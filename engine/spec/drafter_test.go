package spec

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLookupLongestThenMostRecent(t *testing.T) {
	l := NewLookup()
	// "1 2 3 9" then "5 2 3 7", now ending in "2 3": the latest occurrence
	// of "2 3" is followed by 7.
	l.Reset([]int32{1, 2, 3, 9, 5, 2, 3, 7, 8, 2, 3})
	p := l.Propose(4)
	if p.Match != 2 || !slices.Equal(p.Tokens, []int32{7, 8, 2, 3}) {
		t.Fatalf("got %+v", p)
	}
	// Ending in "1 2 3": the longer match (n=3) wins over the more recent
	// "2 3".
	l.Append(4)
	l.Append(1)
	l.Append(2)
	l.Append(3)
	p = l.Propose(2)
	if p.Match != 3 || !slices.Equal(p.Tokens, []int32{9, 5}) {
		t.Fatalf("got %+v", p)
	}
	// Nothing before matches the last token: no proposal.
	l.Reset([]int32{1, 2, 3})
	if p := l.Propose(4); len(p.Tokens) != 0 || p.Match != 0 {
		t.Fatalf("no match, got %+v", p)
	}
	// A proposal runs up to the end of the sequence (overlap allowed).
	l.Reset([]int32{5, 5, 5})
	if p := l.Propose(4); p.Match != 2 || !slices.Equal(p.Tokens, []int32{5}) {
		t.Fatalf("repeat, got %+v", p)
	}
	// MinN: single-token matches can be switched off.
	l = &Lookup{MaxN: 4, MinN: 2}
	l.Reset([]int32{1, 2, 9, 2})
	if p := l.Propose(4); len(p.Tokens) != 0 {
		t.Fatalf("MinN 2, got %+v", p)
	}
	if p := l.Propose(0); len(p.Tokens) != 0 {
		t.Fatalf("limit 0, got %+v", p)
	}
}

// bruteLookup is the definition: longest n (MaxN..1) whose suffix occurred
// earlier, most recent occurrence, what followed.
func bruteLookup(seq []int32, maxN, limit int) Proposal {
	last := len(seq) - 1
	for n := min(maxN, last+1); n >= 1; n-- {
		for end := last - 1; end >= n-1; end-- {
			if slices.Equal(seq[end-n+1:end+1], seq[last-n+1:]) {
				to := min(end+1+limit, len(seq))
				return Proposal{Tokens: seq[end+1 : to], Match: n}
			}
		}
	}
	return Proposal{}
}

func TestLookupMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		vocab := 2 + trial%6
		l := NewLookup()
		l.Reset(nil)
		var seq []int32
		for range 60 {
			tok := int32(r.IntN(vocab))
			seq = append(seq, tok)
			l.Append(tok)
			got, want := l.Propose(5), bruteLookup(seq, 8, 5)
			if got.Match != want.Match || !slices.Equal(got.Tokens, want.Tokens) {
				t.Fatalf("seq %v: got %+v, want %+v", seq, got, want)
			}
		}
	}
}

// bruteSuffix returns the longest suffix of q occurring in some document.
func bruteSuffix(docs [][]int32, q []int32) int {
	best := 0
	for n := 1; n <= len(q); n++ {
		s := q[len(q)-n:]
		found := false
		for _, d := range docs {
			for i := 0; i+n <= len(d); i++ {
				if slices.Equal(d[i:i+n], s) {
					found = true
				}
			}
		}
		if !found {
			break
		}
		best = n
	}
	return best
}

// occursFollowed reports whether s followed by next occurs in some document
// (next may end at the document's end).
func occursFollowed(docs [][]int32, s, next []int32) bool {
	w := append(slices.Clone(s), next...)
	for _, d := range docs {
		for i := 0; i+len(w) <= len(d); i++ {
			if slices.Equal(d[i:i+len(w)], w) {
				return true
			}
		}
	}
	return false
}

func TestSuffixMatcherMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 60 {
		vocab := 2 + trial%5
		corpus := NewCorpus(0)
		var docs [][]int32
		for range 1 + trial%4 {
			d := make([]int32, 5+r.IntN(30))
			for i := range d {
				d[i] = int32(r.IntN(vocab))
			}
			docs = append(docs, d)
			corpus.Add(d)
		}
		m := corpus.Matcher()
		m.MinMatch = 1
		m.Reset(nil)
		var q []int32
		for step := range 40 {
			tok := int32(r.IntN(vocab))
			q = append(q, tok)
			m.Append(tok)
			want := bruteSuffix(docs, q)
			p := m.Propose(4)
			if p.Match != 0 && p.Match != want {
				t.Fatalf("trial %d: query %v: match %d, want %d", trial, q, p.Match, want)
			}
			if p.Match == 0 && want > 0 {
				// Allowed only when the first occurrence ends its document.
				if int(m.n) != want {
					t.Fatalf("trial %d: query %v: tracked %d, want %d", trial, q, m.n, want)
				}
				continue
			}
			if p.Match > 0 && !occursFollowed(docs, q[len(q)-p.Match:], p.Tokens) {
				t.Fatalf("trial %d: proposal %v does not follow %v in the corpus", trial, p.Tokens, q[len(q)-p.Match:])
			}
			// Adding a document mid-request must not break matching.
			if step == 20 && trial%2 == 0 {
				d := slices.Clone(q[len(q)-5:])
				d = append(d, 0, 1)
				docs = append(docs, d)
				corpus.Add(d)
			}
		}
	}
}

func TestCorpusLimitRebuilds(t *testing.T) {
	c := NewCorpus(100)
	for i := range 20 {
		d := []int32{int32(i), 1, 2, 3, 4, 5, 6, 7, 8}
		c.Add(d)
	}
	if c.Len() > 100 {
		t.Fatalf("corpus holds %d tokens, limit 100", c.Len())
	}
	m := c.Matcher()
	m.Reset([]int32{19, 1, 2})
	if p := m.Propose(3); p.Match != 3 || !slices.Equal(p.Tokens, []int32{3, 4, 5}) {
		t.Fatalf("newest document lost: %+v", p)
	}
	m.Reset([]int32{0, 1, 2})
	if p := m.Propose(3); p.Match == 3 {
		t.Fatalf("oldest document still matched fully: %+v", p)
	}
	// A document longer than the limit keeps its end.
	long := make([]int32, 300)
	for i := range long {
		long[i] = int32(i)
	}
	c.Add(long)
	m.Reset([]int32{290, 291})
	if p := m.Propose(2); !slices.Equal(p.Tokens, []int32{292, 293}) {
		t.Fatalf("long document: %+v", p)
	}
}

func TestGateScore(t *testing.T) {
	g := newGate(1)
	q0 := g.rate(0, 5)
	g.score(0, Proposal{Tokens: []int32{1, 2, 3}, Match: 5}, []int32{1, 2})
	// Two successes, the third token unknown: up twice.
	q1 := q0 + rateStep*(1-q0)
	q1 += rateStep * (1 - q1)
	if g.rate(0, 5) != q1 {
		t.Fatalf("rate %v, want %v", g.rate(0, 5), q1)
	}
	g.score(0, Proposal{Tokens: []int32{1, 2, 3}, Match: 5}, []int32{9, 2})
	if g.rate(0, 5) != q1*(1-rateStep) {
		t.Fatalf("rate after a miss %v", g.rate(0, 5))
	}
	if g.rate(0, 1) != priorRate[0] {
		t.Fatal("other buckets moved")
	}
}

func BenchmarkLookupStep(b *testing.B) {
	seq := make([]int32, 4096)
	for i := range seq {
		seq[i] = int32(i*7919) % 500
	}
	l := NewLookup()
	l.Reset(seq)
	i := 0
	for b.Loop() {
		l.Append(seq[i%len(seq)])
		l.Propose(7)
		i++
	}
}

func BenchmarkSuffixStep(b *testing.B) {
	c := NewCorpus(0)
	doc := make([]int32, 50000)
	for i := range doc {
		doc[i] = int32(i*7919) % 500
	}
	c.Add(doc)
	m := c.Matcher()
	m.Reset(nil)
	i := 0
	for b.Loop() {
		m.Append(doc[(i*3)%len(doc)])
		m.Propose(7)
		i++
	}
}

// FuzzLookup checks prompt lookup against its definition on arbitrary
// sequences (bytes as token ids over a small vocabulary, so matches abound).
func FuzzLookup(f *testing.F) {
	f.Add([]byte{1, 2, 3, 1, 2, 3, 1, 2}, uint8(4))
	f.Add([]byte("abracadabra abracadabra"), uint8(7))
	f.Fuzz(func(t *testing.T, data []byte, vocab uint8) {
		if len(data) > 300 {
			data = data[:300]
		}
		v := int32(vocab%16) + 1
		l := &Lookup{MaxN: 6, MinN: 1}
		l.Reset(nil)
		var seq []int32
		for _, b := range data {
			tok := int32(b) % v
			seq = append(seq, tok)
			l.Append(tok)
			got, want := l.Propose(5), bruteLookup(seq, 6, 5)
			if got.Match != want.Match || !slices.Equal(got.Tokens, want.Tokens) {
				t.Fatalf("seq %v: got %+v, want %+v", seq, got, want)
			}
		}
	})
}

// FuzzCorpus checks the suffix automaton's matcher against brute force: data
// is split into documents at 0xFF bytes; the last part is the query.
func FuzzCorpus(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 0xFF, 2, 3, 4, 5, 0xFF, 3, 4, 2, 3})
	f.Add([]byte("the cat sat\xffthe hat\xffthe ca"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 400 {
			data = data[:400]
		}
		parts := [][]int32{nil}
		for _, b := range data {
			if b == 0xFF {
				parts = append(parts, nil)
				continue
			}
			parts[len(parts)-1] = append(parts[len(parts)-1], int32(b%8))
		}
		docs, query := parts[:len(parts)-1], parts[len(parts)-1]
		c := NewCorpus(0)
		for _, d := range docs {
			c.Add(d)
		}
		var kept [][]int32
		for _, d := range docs {
			if len(d) > 0 {
				kept = append(kept, d)
			}
		}
		m := c.Matcher()
		m.MinMatch = 1
		m.Reset(nil)
		for i, tok := range query {
			m.Append(tok)
			q := query[:i+1]
			if want := bruteSuffix(kept, q); int(m.n) != want {
				t.Fatalf("docs %v query %v: match %d, want %d", kept, q, m.n, want)
			}
			if p := m.Propose(4); p.Match > 0 && !occursFollowed(kept, q[len(q)-p.Match:], p.Tokens) {
				t.Fatalf("docs %v query %v: proposal %v not in the corpus", kept, q, p.Tokens)
			}
		}
	})
}
