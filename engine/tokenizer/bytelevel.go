package tokenizer

import "strings"

// GPT-2's byte-level alphabet: every byte is written as a printable rune so
// that vocabularies can be stored as text. Printable Latin-1 bytes stand for
// themselves; the other 68 bytes map, in order, to U+0100 onwards (space is
// U+0120 "Ġ", newline U+010A "Ċ").
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := make(map[rune]byte, 256)
	keep := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !keep(b) {
			r = rune(256 + n)
			n++
		}
		b2r[b] = r
		r2b[r] = byte(b)
	}
	return b2r, r2b
}()

// byteLevelString maps raw bytes to their byte-level spelling.
func byteLevelString(s string) string {
	var b strings.Builder
	b.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteToRune[s[i]])
	}
	return b.String()
}

// byteLevelBytes maps a byte-level piece back to raw bytes, as Hugging
// Face's ByteLevel decoder does: if any rune is outside the alphabet, the
// piece's own UTF-8 bytes are used unchanged.
func byteLevelBytes(dst []byte, piece string) []byte {
	n0 := len(dst)
	for _, r := range piece {
		b, ok := runeToByte[r]
		if !ok {
			return append(dst[:n0], piece...)
		}
		dst = append(dst, b)
	}
	return dst
}
