package constrain

import (
	"bytes"
	"fmt"
	"slices"
)

// A TokenSource gives a vocabulary's tokens as the bytes they add to the
// decoded text (tokenizer.Tokenizer implements it, for byte-level BPE and
// SentencePiece vocabularies alike).
type TokenSource interface {
	// VocabSize is one more than the largest id.
	VocabSize() int
	// TokenBytes is the text id adds where it stands inside a text (nil
	// for an id outside the vocabulary).
	TokenBytes(id int32) []byte
	// IsSpecial reports a special or control token: it adds no text, so
	// it is never allowed as text.
	IsSpecial(id int32) bool
	// TokenID is the id of a piece exactly as the vocabulary spells it.
	TokenID(piece string) (int32, bool)
}

// A Vocab is a vocabulary prepared for matching: every text token's bytes
// in a trie. Building one costs a sort of the vocabulary (about 0.1 s for
// Gemma's 262k tokens): build it once per model and share it, it is
// immutable and safe for concurrent use.
type Vocab struct {
	size  int
	text  [][]byte // id -> bytes; nil: never allowed as text
	trie  []trieNode
	ids   []int32 // token ids, grouped by the trie node they end at
	piece func(string) (int32, bool)
}

// trieNode is one byte of the trie, in preorder: its subtree is the nodes
// after it up to skip.
type trieNode struct {
	b        byte
	depth    int32 // bytes from the root (>= 1)
	skip     int32
	idLo, id int32 // ids[idLo:id] end here
}

// NewVocab builds the trie of src's text tokens. Tokens with no bytes and
// special tokens are left out: they are never allowed inside text (a
// grammar's Token element names special tokens by piece).
func NewVocab(src TokenSource) *Vocab {
	n := src.VocabSize()
	v := &Vocab{size: n, text: make([][]byte, n), piece: src.TokenID}
	order := make([]int32, 0, n)
	for id := int32(0); int(id) < n; id++ {
		b := src.TokenBytes(id)
		if src.IsSpecial(id) || len(b) == 0 {
			continue
		}
		v.text[id] = b
		order = append(order, id)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return bytes.Compare(v.text[a], v.text[b]) })
	var path []int32 // trie nodes of the current prefix
	var prev []byte
	for _, id := range order {
		t := v.text[id]
		common := 0
		for common < len(prev) && common < len(t) && prev[common] == t[common] {
			common++
		}
		for len(path) > common {
			v.trie[path[len(path)-1]].skip = int32(len(v.trie))
			path = path[:len(path)-1]
		}
		for d := common; d < len(t); d++ {
			path = append(path, int32(len(v.trie)))
			v.trie = append(v.trie, trieNode{b: t[d], depth: int32(d + 1), idLo: int32(len(v.ids)), id: int32(len(v.ids))})
		}
		last := &v.trie[path[len(path)-1]]
		v.ids = append(v.ids, id)
		last.id = int32(len(v.ids))
		prev = t
	}
	for _, p := range path {
		v.trie[p].skip = int32(len(v.trie))
	}
	return v
}

// Size is the vocabulary size the masks cover.
func (v *Vocab) Size() int { return v.size }

// MaskWords is the length of a mask: one bit per token id.
func (v *Vocab) MaskWords() int { return (v.size + 63) / 64 }

// tokenIDs resolves a grammar's Token pieces.
func (v *Vocab) tokenIDs(g *Grammar) ([]int32, error) {
	ids := make([]int32, len(g.tokens))
	for i, p := range g.tokens {
		id, ok := v.piece(p)
		if !ok {
			return nil, fmt.Errorf("constrain: the grammar names token %q, which the vocabulary lacks", p)
		}
		ids[i] = id
	}
	return ids, nil
}
