package spec

// Lookup is the prompt-lookup drafter: it matches the last n tokens of the
// sequence (longest n first, from MaxN down to MinN) against everything
// earlier in the same sequence (the prompt and the text generated so far),
// takes the most recent earlier occurrence, and proposes the tokens that
// followed it.
//
// It keeps, for every n, a hash index from n-gram to the end of its latest
// occurrence that has a successor, extended as tokens arrive, so Append and
// Propose cost O(MaxN) whatever the length of the sequence.
type Lookup struct {
	// MaxN and MinN bound the n-gram length tried (defaults 8 and 1).
	MaxN, MinN int

	seq []int32
	idx []map[uint64]int32 // idx[n-1]: hash of an n-gram -> end position of its latest occurrence with a successor
}

// NewLookup returns a prompt-lookup drafter with the default n-gram range.
func NewLookup() *Lookup { return &Lookup{MaxN: 8, MinN: 1} }

// Name identifies the source in statistics.
func (l *Lookup) Name() string { return "lookup" }

// Reset forgets everything and indexes history as the start of a new request.
func (l *Lookup) Reset(history []int32) {
	if l.MaxN <= 0 {
		l.MaxN = 8
	}
	l.MinN = max(l.MinN, 1)
	l.seq = l.seq[:0]
	if len(l.idx) != l.MaxN {
		l.idx = make([]map[uint64]int32, l.MaxN)
	}
	for i := range l.idx {
		if l.idx[i] == nil {
			l.idx[i] = make(map[uint64]int32)
		} else {
			clear(l.idx[i])
		}
	}
	for _, t := range history {
		l.Append(t)
	}
}

// hashStep extends a hash of a token run by one more token (taken from the
// run's far end: runs are hashed from their last token backwards).
func hashStep(h uint64, t int32) uint64 {
	h ^= uint64(uint32(t)) + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
	return h * 0xff51afd7ed558ccd
}

// Append adds the next token of the sequence.
func (l *Lookup) Append(t int32) {
	l.seq = append(l.seq, t)
	end := len(l.seq) - 2 // n-grams ending here now have a successor
	if end < 0 {
		return
	}
	var h uint64
	for n := 1; n <= l.MaxN && end-n+1 >= 0; n++ {
		h = hashStep(h, l.seq[end-n+1])
		l.idx[n-1][h] = int32(end)
	}
}

// Propose returns up to limit tokens that followed the latest earlier
// occurrence of the longest matching suffix, and the length of that match;
// nil and 0 when no suffix of at least MinN tokens occurred before.
func (l *Lookup) Propose(limit int) Proposal {
	if limit <= 0 {
		return Proposal{}
	}
	end, n := l.find()
	if n == 0 {
		return Proposal{}
	}
	from := end + 1
	to := min(from+limit, len(l.seq))
	return Proposal{Tokens: l.seq[from:to:to], Match: n}
}

// find returns the end position of the latest earlier occurrence of the
// longest suffix of at least MinN tokens, and its length (0 if none).
func (l *Lookup) find() (end, n int) {
	last := len(l.seq) - 1
	if last < 0 {
		return 0, 0
	}
	// Hash the suffixes from length 1 upwards, then look them up longest
	// first.
	var hs [64]uint64
	top := min(l.MaxN, last+1, len(hs))
	var h uint64
	for k := 1; k <= top; k++ {
		h = hashStep(h, l.seq[last-k+1])
		hs[k-1] = h
	}
	for k := top; k >= l.MinN; k-- {
		e, ok := l.idx[k-1][hs[k-1]]
		if !ok || !l.same(int(e), last, k) {
			continue // absent, or a hash collision: try shorter
		}
		return int(e), k
	}
	return 0, 0
}

// same reports whether the n tokens ending at a equal the n ending at b.
func (l *Lookup) same(a, b, n int) bool {
	if a-n+1 < 0 {
		return false
	}
	for i := range n {
		if l.seq[a-i] != l.seq[b-i] {
			return false
		}
	}
	return true
}
