package tokenizer

import (
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
			raw = byteLevelBytes(raw, t.pieces[id])
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
		p := t.pieces[id]
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

// byteRunText is the text of one run of byte-fallback pieces.
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

// appendLossy converts raw bytes to valid UTF-8, replacing each maximal
// subpart of an ill-formed sequence with U+FFFD (the Unicode-recommended
// practice, which Rust's from_utf8_lossy follows). With final false, an
// incomplete sequence at the end is left unconsumed so that a later call can
// complete it; consumed says how many bytes were used.
func appendLossy(dst, src []byte, final bool) ([]byte, int) {
	i := 0
	for i < len(src) {
		c := src[i]
		if c < 0x80 {
			dst = append(dst, c)
			i++
			continue
		}
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			need = 2
		case c == 0xED:
			need, hi = 2, 0x9F
		case c == 0xF0:
			need, lo = 3, 0x90
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		case c == 0xF4:
			need, hi = 3, 0x8F
		default:
			dst = append(dst, "\uFFFD"...)
			i++
			continue
		}
		j := i + 1
		bad := false
		for k := 0; k < need; k++ {
			if j >= len(src) {
				if !final {
					return dst, i
				}
				bad = true
				break
			}
			b := src[j]
			l, h := byte(0x80), byte(0xBF)
			if k == 0 {
				l, h = lo, hi
			}
			if b < l || b > h {
				bad = true
				break
			}
			j++
		}
		if bad {
			dst = append(dst, "\uFFFD"...)
			i = j // the maximal subpart: the lead byte and the continuation bytes that fit
			continue
		}
		dst = append(dst, src[i:j]...)
		i = j
	}
	return dst, i
}

// Stream decodes ids one at a time. Each Next returns the text that is final
// so far: bytes of a character split over byte-fallback pieces are held until
// the run of byte pieces ends (only then is it known whether the run is valid
// UTF-8), and byte-level bytes until they complete a character. The
// concatenation of every Next and the final Flush equals Decode of all ids.
type Stream struct {
	t          *Tokenizer
	run        []byte // pending bytes
	buf        []byte // scratch for the byte-level text of one Next
	strip      int    // leading spaces still to remove
	n          int    // ids seen
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
		return ""
	}
	if d.byteLevel {
		s.run = byteLevelBytes(s.run, t.pieces[id])
		var used int
		s.buf, used = appendLossy(s.buf[:0], s.run, false)
		s.run = append(s.run[:0], s.run[used:]...)
		return s.out(string(s.buf))
	}
	if d.byteFallback && t.byteOf[id] >= 0 {
		s.run = append(s.run, byte(t.byteOf[id]))
		s.firstPiece = false
		return ""
	}
	p := t.pieces[id]
	if d.metaToSpace {
		p = strings.ReplaceAll(p, metaspace, " ")
	}
	if s.firstPiece && d.metaFirst {
		p = strings.TrimPrefix(p, " ")
	}
	s.firstPiece = false
	if len(s.run) > 0 {
		// The piece ends a run of byte pieces: the run's text comes first.
		p = t.byteRunText(s.run) + p
		s.run = s.run[:0]
	}
	return s.out(p)
}

// Flush returns whatever is still held (an incomplete character decodes to
// U+FFFD, as in Decode). The stream can continue afterwards.
func (s *Stream) Flush() string {
	if len(s.run) == 0 {
		return ""
	}
	var text string
	if s.t.dec.byteLevel {
		out, _ := appendLossy(nil, s.run, true)
		text = string(out)
	} else {
		text = s.t.byteRunText(s.run)
	}
	s.run = s.run[:0]
	return s.out(text)
}
