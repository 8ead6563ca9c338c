package tokenizer

import "strings"

// TokenBytes is the text id adds where it stands inside a decoded text, as
// bytes: a byte-level piece's raw bytes (possibly part of a UTF-8
// character), a byte-fallback piece's one byte, a SentencePiece piece with
// "▁" as space. ok is false for special and control tokens (they decode to
// nothing) and ids out of range. The leading space Decode strips from the
// very start of a text (SentencePiece's dummy prefix) is not stripped here:
// it is a property of the text's start, not of the token. Constrained
// decoding (engine/constrain) matches a grammar against these bytes.
func (t *Tokenizer) TokenBytes(id int32) (text []byte, ok bool) {
	if !t.valid(id) || t.skip[id] {
		return nil, false
	}
	d := t.dec
	if d.byteLevel {
		return byteLevelBytes(nil, t.text[id]), true
	}
	if d.byteFallback && t.byteOf[id] >= 0 {
		return []byte{byte(t.byteOf[id])}, true
	}
	p := t.text[id]
	if d.metaToSpace {
		p = strings.ReplaceAll(p, metaspace, " ")
	}
	return []byte(p), true
}
