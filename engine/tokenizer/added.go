package tokenizer

// addedMatcher finds added tokens (special or not) written inside text, with
// the leftmost-longest rule of Hugging Face's AddedVocabulary. It is a byte
// trie: edges live in one map keyed by (node, byte), so the whole matcher is a
// handful of allocations even for Gemma's 6,415 added tokens.
type addedMatcher struct {
	edges   map[uint64]int32 // node<<8 | byte -> child node
	term    []int32          // node -> token id ending here, or -1
	first   [256]bool        // bytes that can start a token
	special map[int32]bool   // ids that Encode treats as plain text
	ids     map[int32]bool   // every added id
	n       int              // number of tokens
}

func newAddedMatcher() addedMatcher {
	return addedMatcher{edges: map[uint64]int32{}, term: []int32{-1}, special: map[int32]bool{}, ids: map[int32]bool{}}
}

// add registers content as token id. Empty contents are ignored (they can
// never match). A later duplicate replaces the earlier id, as in HF.
func (m *addedMatcher) add(content string, id int32, special bool) {
	m.ids[id] = true
	if special {
		m.special[id] = true
	}
	if content == "" {
		return
	}
	node := int32(0)
	for i := 0; i < len(content); i++ {
		k := uint64(node)<<8 | uint64(content[i])
		next, ok := m.edges[k]
		if !ok {
			next = int32(len(m.term))
			m.term = append(m.term, -1)
			m.edges[k] = next
		}
		node = next
	}
	m.term[node] = id
	m.first[content[0]] = true
	m.n++
}

func (m *addedMatcher) isAdded(id int32) bool   { return m.ids[id] }
func (m *addedMatcher) isSpecial(id int32) bool { return m.special[id] }

// longest returns the id and length of the longest token starting at s[i:].
func (m *addedMatcher) longest(s string, i int) (int32, int) {
	best, bestLen := int32(-1), 0
	node := int32(0)
	for j := i; j < len(s); j++ {
		next, ok := m.edges[uint64(node)<<8|uint64(s[j])]
		if !ok {
			break
		}
		node = next
		if id := m.term[node]; id >= 0 {
			best, bestLen = id, j+1-i
		}
	}
	return best, bestLen
}

// split walks text and calls emit with either a text segment (id -1) or a
// matched token (seg ""). A match of a special token text[i:i+n] counts only
// when special(i, i+n) says so; otherwise it is left in the text and scanning
// resumes after it, exactly like tokenizers' encode_special_tokens=True. A
// nil special refuses every special token.
func (m *addedMatcher) split(text string, special func(lo, hi int) bool, emit func(seg string, id int32)) {
	if m.n == 0 {
		emit(text, -1)
		return
	}
	start := 0
	for i := 0; i < len(text); {
		if !m.first[text[i]] {
			i++
			continue
		}
		id, n := m.longest(text, i)
		if n == 0 {
			i++
			continue
		}
		if m.special[id] && (special == nil || !special(i, i+n)) {
			i += n
			continue
		}
		if start < i {
			emit(text[start:i], -1)
		}
		emit("", id)
		i += n
		start = i
	}
	if start < len(text) {
		emit(text[start:], -1)
	}
}
