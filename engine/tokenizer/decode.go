package tokenizer

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// decodeSpec is the decoder pipeline, reduced to the behaviours the supported
// vocabularies use.
type decodeSpec struct {
	// byteLevel: pieces are GPT-2 byte-level text; all bytes are joined and
	// converted with U+FFFD for each maximal invalid subsequence (Rust's
	// from_utf8_lossy, which Hugging Face's ByteLevel decoder uses).
	byteLevel bool
	// metaToSpace: "▁" becomes " " in every piece (HF Replace decoder).
	metaToSpace bool
	// replaceBytes: the replacement also applies to text made of
	// byte-fallback bytes (ByteFallback ran before Replace).
	replaceBytes bool
	// byteFallback: "<0xAB>" pieces are bytes; each run of them is one
	// string if it is valid UTF-8, else one U+FFFD per byte (HF ByteFallback).
	byteFallback bool
	// stripLeft: up to this many leading spaces of the whole text are
	// removed (HF Strip decoder after Fuse).
	stripLeft int
	// metaFirst: a leading space of the first piece is removed (HF
	// Metaspace decoder with a prepend scheme).
	metaFirst bool
	// stripAfterBOS: when the ids start with BOS, one leading space of the
	// text is removed (SentencePiece's dummy prefix, as llama.cpp does).
	stripAfterBOS bool
}

// Decode turns ids into text. Special and control tokens decode to nothing
// (Hugging Face's skip_special_tokens=True); ids out of range are ignored.
// The text is always valid UTF-8: bytes that do not form characters become
// U+FFFD exactly as in Hugging Face's decoders (byteRunText, appendLossy),
// and a vocabulary piece that is not valid UTF-8 decodes as validText of it.
func (t *Tokenizer) Decode(ids []int32) string {
	d := t.dec
	strip := d.stripLeft
	if d.stripAfterBOS && len(ids) > 0 && ids[0] == t.bos && t.bos >= 0 {
		strip++
	}
	if d.byteLevel {
		var raw []byte
		for _, id := range ids {
			if !t.valid(id) || t.skip[id] {
				continue
			}
			raw = byteLevelBytes(raw, t.text[id])
		}
		out, _ := appendLossy(nil, raw, true)
		return stripSpaces(string(out), strip)
	}
	var b strings.Builder
	var run []byte
	firstPiece := true
	flush := func() {
		if len(run) > 0 {
			b.WriteString(t.byteRunText(run))
			run = run[:0]
		}
	}
	for _, id := range ids {
		if !t.valid(id) || t.skip[id] {
			continue
		}
		if d.byteFallback && t.byteOf[id] >= 0 {
			run = append(run, byte(t.byteOf[id]))
			firstPiece = false
			continue
		}
		flush()
		p := t.text[id]
		if d.metaToSpace {
			p = strings.ReplaceAll(p, metaspace, " ")
		}
		if firstPiece && d.metaFirst {
			p = strings.TrimPrefix(p, " ")
		}
		firstPiece = false
		b.WriteString(p)
	}
	flush()
	return stripSpaces(b.String(), strip)
}

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < len(t.pieces) }

// TokenBytes returns the bytes one token stands for on its own: a
// byte-level piece's bytes, a byte-fallback piece's one byte, a piece's
// text with "▁" as a space, a special token's own spelling. Unlike Decode
// nothing is stripped or replaced, so the bytes of a token that holds part
// of a UTF-8 character are that part (an API's per-token logprobs carry
// them for a client to join); the tokens of a text, joined, are its
// Decode but for the leading space Decode may strip. nil for an id outside
// the vocabulary.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	p := t.text[id]
	switch {
	case t.skip[id]:
		return []byte(p)
	case t.dec.byteLevel:
		return byteLevelBytes(nil, p)
	case t.dec.byteFallback && t.byteOf[id] >= 0:
		return []byte{byte(t.byteOf[id])}
	case t.dec.metaToSpace:
		p = strings.ReplaceAll(p, metaspace, " ")
	}
	return []byte(p)
}

// IsSpecial reports whether id is a special or control token (an end of
// turn, a template marker): Decode writes nothing for it, and constrained
// decoding never allows it inside the text it matches. False for an id
// outside the vocabulary.
func (t *Tokenizer) IsSpecial(id int32) bool { return t.valid(id) && t.skip[id] }

// byteRunText is the text of one run of byte-fallback pieces: Hugging Face's
// ByteFallback decoder takes the run whole, its text if it is valid UTF-8,
// else one U+FFFD per byte.
func (t *Tokenizer) byteRunText(run []byte) string {
	if !utf8.Valid(run) {
		return strings.Repeat("\uFFFD", len(run))
	}
	s := string(run)
	if t.dec.replaceBytes && t.dec.metaToSpace {
		s = strings.ReplaceAll(s, metaspace, " ")
	}
	return s
}

func stripSpaces(s string, n int) string {
	for n > 0 && strings.HasPrefix(s, " ") {
		s = s[1:]
		n--
	}
	return s
}

// utf8Seq examines the UTF-8 sequence that starts at src[i]. A complete,
// valid character gives its length and valid. Otherwise n is the length of
// the maximal subpart of an ill-formed sequence (the lead byte and the
// continuation bytes that fit it, at least 1), the span that the Unicode
// Standard's recommended practice (and so Rust's from_utf8_lossy, Python's
// errors="replace" and WHATWG) replaces with one U+FFFD; incomplete says
// that src ended inside that subpart, so more bytes could still complete it.
func utf8Seq[T ~string | ~[]byte](src T, i int) (n int, valid, incomplete bool) {
	c := src[i]
	if c < 0x80 {
		return 1, true, false
	}
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0 // no overlong forms
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F // no surrogates
	case c == 0xF0:
		need, lo = 3, 0x90 // no overlong forms
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F // nothing above U+10FFFF
	default:
		return 1, false, false // 80..C1, F5..FF never start a character
	}
	j := i + 1
	for k := 0; k < need; k++ {
		if j >= len(src) {
			return j - i, false, true
		}
		b := src[j]
		if b < lo || b > hi {
			return j - i, false, false
		}
		lo, hi = 0x80, 0xBF
		j++
	}
	return j - i, true, false
}

// appendLossy appends src to dst as valid UTF-8, replacing each maximal
// subpart of an ill-formed sequence with U+FFFD (utf8Seq). With final false,
// an incomplete sequence at the end is left unconsumed so that a later call
// can complete it; consumed says how many bytes were used.
func appendLossy[T ~string | ~[]byte](dst []byte, src T, final bool) (out []byte, consumed int) {
	i := 0
	for i < len(src) {
		if c := src[i]; c < 0x80 {
			dst = append(dst, c)
			i++
			continue
		}
		n, valid, incomplete := utf8Seq(src, i)
		switch {
		case valid:
			dst = append(dst, src[i:i+n]...)
		case incomplete && !final:
			return dst, i
		default:
			dst = append(dst, "\uFFFD"...)
		}
		i += n
	}
	return dst, i
}

// validText returns s if it is valid UTF-8, else s with each maximal subpart
// of an ill-formed sequence replaced by U+FFFD: the text a Rust or Python
// caller of Hugging Face's tokenizers holds after decoding the same bytes
// lossily (String::from_utf8_lossy, bytes.decode(errors="replace")).
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out, _ := appendLossy(make([]byte, 0, len(s)+8), s, true)
	return string(out)
}

// validTextOffsets is validText for s that is not valid UTF-8, with a map
// from a byte offset of the result that is not inside a U+FFFD it wrote
// back to the same place in s.
func validTextOffsets(s string) (string, func(int) int) {
	out := make([]byte, 0, len(s)+8)
	// ends[k] is the end, in out, of the k-th U+FFFD written; shift[k] how
	// many bytes longer out is than s up to there.
	var ends, shift []int
	for i := 0; i < len(s); {
		n, valid, _ := utf8Seq(s, i)
		if valid {
			out = append(out, s[i:i+n]...)
		} else {
			out = append(out, "\uFFFD"...)
			ends = append(ends, len(out))
			shift = append(shift, len(out)-(i+n))
		}
		i += n
	}
	return string(out), func(x int) int {
		k, _ := slices.BinarySearch(ends, x+1) // replacements that end at or before x
		if k == 0 {
			return x
		}
		return x - shift[k-1]
	}
}

// Stream decodes ids one at a time. Each Next returns the text that is final
// so far; the concatenation of every Next and the final Flush equals Decode
// of all ids, and every piece is valid UTF-8. Bytes are held only while they
// may still become valid text: byte-level bytes until they complete a
// character, a run of byte-fallback pieces while it is a prefix of valid
// UTF-8 (the run's text is decided as a whole, so even its complete
// characters wait for the run to end). As soon as a run cannot be valid, its
// bytes and every later byte of the same run come out as U+FFFD.
type Stream struct {
	t     *Tokenizer
	run   []byte // held bytes (see above)
	whole int    // byte fallback: run[:whole] is complete characters
	bad   bool   // byte fallback: the current run is known invalid and was emitted
	buf   []byte // scratch for the byte-level text of one Next
	strip int    // leading spaces still to remove
	n     int    // ids seen

	firstPiece bool
}

// NewStream starts a streaming decode.
func (t *Tokenizer) NewStream() *Stream {
	return &Stream{t: t, strip: t.dec.stripLeft, firstPiece: true}
}

func (s *Stream) out(text string) string {
	if s.strip > 0 && text != "" {
		before := len(text)
		text = stripSpaces(text, s.strip)
		s.strip -= before - len(text)
		if text != "" {
			s.strip = 0 // the text has begun; Strip only cuts a prefix
		}
	}
	return text
}

// Next adds one id and returns the text it completes (possibly "").
func (s *Stream) Next(id int32) string {
	t, d := s.t, s.t.dec
	if s.n == 0 && d.stripAfterBOS && id == t.bos && t.bos >= 0 {
		s.strip++
	}
	s.n++
	if !t.valid(id) || t.skip[id] {
		return "" // as in Decode: it neither ends a byte run nor adds text
	}
	if d.byteLevel {
		s.run = byteLevelBytes(s.run, t.text[id])
		var used int
		s.buf, used = appendLossy(s.buf[:0], s.run, false)
		s.run = append(s.run[:0], s.run[used:]...)
		return s.out(string(s.buf))
	}
	if d.byteFallback && t.byteOf[id] >= 0 {
		s.firstPiece = false
		return s.out(s.addByte(byte(t.byteOf[id])))
	}
	p := t.text[id]
	if d.metaToSpace {
		p = strings.ReplaceAll(p, metaspace, " ")
	}
	if s.firstPiece && d.metaFirst {
		p = strings.TrimPrefix(p, " ")
	}
	s.firstPiece = false
	// The piece ends a run of byte pieces: the run's text comes first.
	return s.out(s.endRun() + p)
}

// addByte adds one byte-fallback byte to the current run and returns the
// text that is now certain: "" while the run may still be valid UTF-8, else
// one U+FFFD per byte of the run not yet emitted.
func (s *Stream) addByte(b byte) string {
	if s.bad {
		return "\uFFFD"
	}
	s.run = append(s.run, b)
	for s.whole < len(s.run) {
		n, valid, incomplete := utf8Seq(s.run, s.whole)
		if valid {
			s.whole += n
			continue
		}
		if incomplete {
			return "" // a character still being completed
		}
		text := strings.Repeat("\uFFFD", len(s.run))
		s.run, s.whole, s.bad = s.run[:0], 0, true
		return text
	}
	return ""
}

// endRun ends the current run of byte-fallback pieces and returns the text
// of what was held.
func (s *Stream) endRun() string {
	var text string
	if len(s.run) > 0 {
		text = s.t.byteRunText(s.run)
	}
	s.run, s.whole, s.bad = s.run[:0], 0, false
	return text
}

// Flush returns whatever is still held (an incomplete character decodes to
// U+FFFD, as in Decode). The stream can continue afterwards; a run of byte
// pieces that Flush cut is over.
func (s *Stream) Flush() string {
	if s.t.dec.byteLevel {
		if len(s.run) == 0 {
			return ""
		}
		out, _ := appendLossy(nil, s.run, true)
		s.run = s.run[:0]
		return s.out(string(out))
	}
	return s.out(s.endRun())
}
