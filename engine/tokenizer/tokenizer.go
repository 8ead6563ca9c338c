// Package tokenizer turns text into token ids and back, exactly as the
// reference implementations do: Hugging Face tokenizer.json BPE models (with
// byte fallback, as Gemma uses, or byte-level as GPT-2 uses) and the GGUF
// vocabularies of llama.cpp (`llama`: SentencePiece BPE with scores; `gpt2`:
// byte-level BPE with merges).
//
// A Tokenizer is immutable after loading and safe for concurrent use. Encode
// treats every character of its input as text (a user who types
// "<end_of_turn>" gets the tokens of those characters, never the control
// token); EncodeSpecial recognises special and added tokens written inline, as
// Hugging Face's tokenizers do by default. Neither adds BOS: raw prompt ids are
// [BOS if AddsBOS()] + Encode(text).
//
// Streaming decode (NewStream) emits text as tokens arrive and never a broken
// UTF-8 sequence; its concatenated output equals Decode of the same ids.
//
// Invalid UTF-8 follows Hugging Face's rule on both sides: Decode and the
// stream write U+FFFD where bytes do not form characters (one per maximal
// ill-formed subpart for byte-level text, as String::from_utf8_lossy; one per
// byte of an invalid run of byte-fallback pieces, as the ByteFallback
// decoder), and Encode first replaces each maximal ill-formed subpart of its
// input with U+FFFD, as a caller who decoded the bytes lossily would hold.
package tokenizer

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"slices"
	"sync"
	"unicode/utf8"
)

// metaspace is SentencePiece's visible space, U+2581.
const metaspace = "\u2581"

// Tokenizer encodes and decodes text for one vocabulary.
type Tokenizer struct {
	source string // file the tokenizer came from, for messages
	kind   string // "hf-bpe", "gguf-llama", "gguf-gpt2" (part of the fingerprint)

	pieces []string    // id -> piece (model vocabulary and added tokens)
	text   []string    // id -> validText(piece), what Decode writes (shares pieces when all are valid)
	vocab  *pieceIndex // piece -> id (model vocabulary and added tokens)
	byteOf []int16     // id -> byte value of a <0xXX> piece, else -1
	skip   []bool      // id decodes to nothing (special / control tokens)

	added addedMatcher

	norm []normOp  // HF normalizer, applied to each text segment
	pre  []preStep // HF pre-tokenizer steps, applied in order

	// byteLevel: words are mapped byte -> printable rune (GPT-2) before BPE.
	byteLevel bool

	bpe *bpeModel // merges-ranked BPE (HF, GGUF gpt2)
	spm *spmModel // score-ranked BPE (GGUF llama)

	dec decodeSpec

	bos    int32
	addBOS bool
	eos    []int32

	fpOnce sync.Once
	fp     string
}

// Source is the file the tokenizer was loaded from.
func (t *Tokenizer) Source() string { return t.source }

// AddsBOS reports whether the model expects BOS at the start of a prompt
// (Hugging Face's add_special_tokens=True; GGUF's tokenizer.ggml.add_bos_token).
func (t *Tokenizer) AddsBOS() bool { return t.addBOS && t.bos >= 0 }

// BOS is the beginning-of-sequence id, or -1 if the vocabulary has none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS lists the ids that end generation (for Gemma 3: <eos> and <end_of_turn>).
func (t *Tokenizer) EOS() []int32 { return append([]int32(nil), t.eos...) }

// VocabSize is one more than the largest token id.
func (t *Tokenizer) VocabSize() int { return len(t.pieces) }

// TokenID returns the id of a piece exactly as the vocabulary spells it
// (e.g. "<start_of_turn>", "▁the", "<0x0A>").
func (t *Tokenizer) TokenID(piece string) (int32, bool) {
	return t.vocab.get(piece)
}

// Piece returns the vocabulary entry of id ("" if id is out of range),
// exactly as stored: a damaged GGUF vocabulary can hold pieces that are not
// valid UTF-8 (Decode writes those as validText would).
func (t *Tokenizer) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// Encode tokenizes text as plain text: every character, including text that
// looks like a special token, becomes ordinary tokens. Non-special added
// tokens (Gemma's "\n\n", "<unused0>", ...) are still used, as Hugging Face
// does with encode_special_tokens=True. No BOS.
//
// Text that is not valid UTF-8 is first made valid as validText does (each
// maximal ill-formed subpart becomes U+FFFD), for every kind of vocabulary
// and by EncodeSpecial and EncodeTrusted too: the ids are those Hugging Face
// gives a caller who decoded the same bytes lossily, and no byte is dropped
// or passed on as a stray byte piece.
func (t *Tokenizer) Encode(text string) []int32 { return t.encode(text, nil) }

// EncodeSpecial tokenizes text recognising special and added tokens written
// inline (Hugging Face's default). No BOS.
func (t *Tokenizer) EncodeSpecial(text string) []int32 {
	return t.encode(text, func(int, int) bool { return true })
}

// EncodeTrusted is EncodeSpecial for text that mixes trusted and untrusted
// bytes (a chat prompt: the template's own text and the messages): a special
// token written inline at text[lo:hi] becomes that token only when
// trusted(lo, hi) reports its bytes as trusted; elsewhere it is plain text, as
// in Encode. The rest of the text is tokenized as one string, so on text
// without untrusted special tokens the ids equal EncodeSpecial's.
func (t *Tokenizer) EncodeTrusted(text string, trusted func(lo, hi int) bool) []int32 {
	if trusted == nil {
		return t.Encode(text)
	}
	return t.encode(text, trusted)
}

func (t *Tokenizer) encode(text string, special func(lo, hi int) bool) []int32 {
	if !utf8.ValidString(text) {
		var orig func(int) int
		text, orig = validTextOffsets(text)
		if trusted := special; trusted != nil {
			// The caller's offsets are in its own text.
			special = func(lo, hi int) bool { return trusted(orig(lo), orig(hi)) }
		}
	}
	out := make([]int32, 0, len(text)/3+1)
	// GGUF llama puts a space prefix before the first text and after each
	// added token (llama.cpp); HF's Metaspace "first" scheme only before
	// text that starts the input.
	afterToken, atStart := true, true
	t.added.split(text, special, func(seg string, id int32) {
		if id >= 0 {
			out = append(out, id)
			afterToken, atStart = true, false
			return
		}
		first := atStart
		if t.spm != nil {
			first = afterToken
		}
		out = t.encodeText(out, seg, first)
		afterToken, atStart = false, false
	})
	return out
}

// encodeText tokenizes one segment with no added tokens in it.
func (t *Tokenizer) encodeText(out []int32, seg string, first bool) []int32 {
	if seg == "" {
		return out
	}
	if t.spm != nil {
		return t.spm.encode(out, seg, first)
	}
	seg = applyNorm(t.norm, seg)
	if seg == "" {
		return out
	}
	words := []string{seg}
	for _, st := range t.pre {
		words = st.apply(words, first)
	}
	for _, w := range words {
		out = t.bpe.encodeWord(out, w, t.byteLevel)
	}
	return out
}

// Fingerprint identifies the tokenizer's behaviour: a hash of its kind,
// vocabulary, merge ranks or scores, added tokens and normalisation. KV
// snapshots bind it, so a cache built with another tokenizer is refused.
func (t *Tokenizer) Fingerprint() string {
	t.fpOnce.Do(func() {
		h := sha256.New()
		var b [8]byte
		wstr := func(s string) {
			binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
			h.Write(b[:])
			h.Write([]byte(s))
		}
		wint := func(v uint64) {
			binary.LittleEndian.PutUint64(b[:], v)
			h.Write(b[:])
		}
		wstr("anechat-tokenizer-v1")
		wstr(t.kind)
		wint(uint64(len(t.pieces)))
		for i, p := range t.pieces {
			wstr(p)
			flags := uint64(0)
			if t.skip[i] {
				flags |= 1
			}
			if t.added.isAdded(int32(i)) {
				flags |= 2
			}
			if t.added.isSpecial(int32(i)) {
				flags |= 4
			}
			wint(flags)
		}
		if t.bpe != nil {
			t.bpe.hash(wint)
		}
		if t.spm != nil {
			for _, s := range t.spm.scores {
				wint(uint64(math.Float32bits(s)))
			}
			wint(boolBit(t.spm.spacePrefix))
		}
		for _, n := range t.norm {
			wint(uint64(n.kind))
			wstr(n.from)
			wstr(n.to)
		}
		for _, p := range t.pre {
			wint(uint64(p.kind))
			wstr(p.pattern)
			wint(uint64(p.behavior) | boolBit(p.flag)<<8 | uint64(p.scheme)<<9)
		}
		wint(boolBit(t.byteLevel))
		d := t.dec
		wint(boolBit(d.byteLevel) | boolBit(d.metaToSpace)<<1 | boolBit(d.byteFallback)<<2 | boolBit(d.stripAfterBOS)<<3 | boolBit(d.replaceBytes)<<4 | uint64(d.stripLeft)<<8 | boolBit(d.metaFirst)<<5)
		wint(uint64(int64(t.bos)))
		wint(boolBit(t.addBOS))
		for _, e := range t.eos {
			wint(uint64(e))
		}
		t.fp = hex.EncodeToString(h.Sum(nil)[:16])
	})
	return t.fp
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// parseBytePiece recognises the byte-fallback spelling "<0xAB>" (as Hugging
// Face's ByteFallback decoder does: 6 bytes, two hex digits of either case).
func parseBytePiece(p string) int16 {
	if len(p) != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>' {
		return -1
	}
	h, ok1 := hexVal(p[3])
	l, ok2 := hexVal(p[4])
	if !ok1 || !ok2 {
		return -1
	}
	return int16(h<<4 | l)
}

func hexVal(c byte) (int, bool) {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0'), true
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

// finish fills the per-id tables once pieces are known.
func (t *Tokenizer) finish() {
	t.byteOf = make([]int16, len(t.pieces))
	t.text = t.pieces
	copied := false
	for i, p := range t.pieces {
		t.byteOf[i] = parseBytePiece(p)
		if v := validText(p); v != p {
			if !copied {
				// Only a damaged vocabulary pays for a second table.
				t.text, copied = slices.Clone(t.pieces), true
			}
			t.text[i] = v
		}
	}
	if t.skip == nil {
		t.skip = make([]bool, len(t.pieces))
	}
}
