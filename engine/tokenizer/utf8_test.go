package tokenizer

import (
	"bytes"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"anechat/engine/model/gguf"
	"anechat/internal/testres"
)

// utf8Record is one line of testdata/utf8.jsonl.gz (testdata/gen_utf8.py):
// either a lossy-conversion case or an encoding of invalid input.
type utf8Record struct {
	Lossy        *string `json:"lossy"` // hex bytes
	Text         string  `json:"text"`  // Python's errors="replace"
	ByteLevel    string  `json:"bytelevel"`
	ByteFallback string  `json:"bytefallback"`

	Tok  string  `json:"tok"`
	In   string  `json:"in"` // hex bytes
	Enc  []int32 `json:"enc"`
	EncS []int32 `json:"encs"`
	Dec  string  `json:"dec"`
	DecS string  `json:"decs"`
}

func readUTF8Records(t *testing.T) []utf8Record {
	t.Helper()
	return readJSONL[utf8Record](t, "utf8.jsonl.gz")
}

func unhex(t *testing.T, s string) string {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lossy is the reference conversion (checked against Python and tokenizers
// by TestLossyMatchesHuggingFace).
func lossy(s string) string {
	out, _ := appendLossy(nil, []byte(s), true)
	return string(out)
}

// viable reports whether held bytes may still become valid UTF-8: the
// stream must never hold bytes it already knows to be invalid.
func viable(b []byte) bool {
	out, n := appendLossy(nil, b, false)
	return bytes.Equal(out, b[:n])
}

func byteID(t testing.TB, tok *Tokenizer, b byte) int32 {
	t.Helper()
	id, ok := tok.TokenID(string([]byte{'<', '0', 'x', "0123456789ABCDEF"[b>>4], "0123456789ABCDEF"[b&15], '>'}))
	if !ok {
		t.Fatalf("%s has no piece for byte %#x", tok.Source(), b)
	}
	return id
}

// The replacement rule is tokenizers': from_utf8_lossy (one U+FFFD per
// maximal ill-formed subpart) for byte-level text, one U+FFFD per byte for a
// run of byte-fallback pieces that is not valid UTF-8. Decode and the stream
// (one byte per token, so characters are split) give exactly tokenizers'
// text on 1,800 invalid byte strings.
func TestLossyMatchesHuggingFace(t *testing.T) {
	byteLevel, err := Load(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	fallback := []*Tokenizer{gemma(t), storiesTokenizer(t)}
	n := 0
	for _, r := range readUTF8Records(t) {
		if r.Lossy == nil {
			continue
		}
		n++
		in := unhex(t, *r.Lossy)
		if got := lossy(in); got != r.Text || got != r.ByteLevel {
			t.Errorf("lossy(%q) = %q, want %q (Python), %q (tokenizers ByteLevel)", in, got, r.Text, r.ByteLevel)
		}
		var ids []int32
		for i := 0; i < len(in); i++ {
			ids = append(ids, byteLevel.bpe.bl[in[i]])
		}
		if got := byteLevel.Decode(ids); got != r.ByteLevel {
			t.Errorf("byte-level Decode(%q) = %q, want %q", in, got, r.ByteLevel)
		}
		if got := streamAll(byteLevel, ids); got != r.ByteLevel {
			t.Errorf("byte-level stream of %q = %q, want %q", in, got, r.ByteLevel)
		}
		for _, tok := range fallback {
			ids = ids[:0]
			for i := 0; i < len(in); i++ {
				ids = append(ids, byteID(t, tok, in[i]))
			}
			if got := tok.Decode(ids); got != r.ByteFallback {
				t.Errorf("%s: byte-fallback Decode(%q) = %q, want %q", tok.Source(), in, got, r.ByteFallback)
			}
			if got := streamAll(tok, ids); got != r.ByteFallback {
				t.Errorf("%s: byte-fallback stream of %q = %q, want %q", tok.Source(), in, got, r.ByteFallback)
			}
		}
	}
	if n < 1500 {
		t.Errorf("only %d lossy cases in the fixture", n)
	}
}

// Input that is not valid UTF-8 encodes as tokenizers encodes the same bytes
// decoded lossily (what a Rust or Python caller holds): no byte is dropped,
// for every tokenizer kind (HF byte fallback, HF and GGUF byte-level,
// SentencePiece-style HF layouts).
func TestEncodeInvalidUTF8MatchesHuggingFace(t *testing.T) {
	load := map[string]func(t *testing.T) *Tokenizer{
		"gemma3": func(t *testing.T) *Tokenizer { return gemma(t) },
		"smollm2": func(t *testing.T) *Tokenizer {
			f, err := gguf.Open(testres.SmolLM2GGUF(t))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tok, err := FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		},
	}
	for _, name := range []string{"bytelevel", "bytelevel_llama3", "spm_prepend", "spm_metaspace"} {
		load[name] = func(t *testing.T) *Tokenizer {
			tok, err := Load(filepath.Join("testdata", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
	}
	byTok := map[string][]utf8Record{}
	for _, r := range readUTF8Records(t) {
		if r.Lossy == nil {
			byTok[r.Tok] = append(byTok[r.Tok], r)
		}
	}
	for name, recs := range byTok {
		t.Run(name, func(t *testing.T) {
			tok := load[name](t)
			if len(recs) < 200 {
				t.Errorf("only %d inputs", len(recs))
			}
			failures := 0
			fail := func(format string, args ...any) {
				if failures++; failures <= 10 {
					t.Errorf(format, args...)
				}
			}
			for _, r := range recs {
				in := unhex(t, r.In)
				if got := tok.Encode(in); !slices.Equal(got, r.Enc) {
					fail("Encode(%q) = %v, want %v", in, got, r.Enc)
				}
				if got := tok.EncodeSpecial(in); !slices.Equal(got, r.EncS) {
					fail("EncodeSpecial(%q) = %v, want %v", in, got, r.EncS)
				}
				if got := tok.Decode(r.Enc); got != r.Dec {
					fail("Decode(%v) = %q, want %q", r.Enc, got, r.Dec)
				}
				if got := streamAll(tok, r.EncS); got != r.DecS {
					fail("stream of %v = %q, want %q", r.EncS, got, r.DecS)
				}
			}
			if failures > 10 {
				t.Errorf("... %d failures in all", failures)
			}
		})
	}
	if len(byTok) != len(load) {
		t.Errorf("fixture covers %d tokenizers, want %d", len(byTok), len(load))
	}
}

// The symptoms of issue 11 item 6 on the real vocabularies: 0xFF/0xFE are
// not dropped by SmolLM2, a prompt of only "\xff" is not empty, and every
// decode of an encoding is the lossy text (stories260K: SentencePiece with
// byte fallback; Gemma 3).
func TestInvalidPromptsReachTheModel(t *testing.T) {
	f, err := gguf.Open(testres.SmolLM2GGUF(t))
	if err != nil {
		t.Fatal(err)
	}
	smol, err := FromGGUF(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"\xff", "\xfe", "a\xffb", "\xfe\xff"} {
		ids := smol.Encode(s)
		if got := smol.Decode(ids); got != lossy(s) {
			t.Errorf("SmolLM2: Decode(Encode(%q)) = %q (ids %v), want %q", s, got, ids, lossy(s))
		}
	}
	inputs := []string{"\xff", "\xf0\x9f\x98", "\xed\xa0\x80", "a\xed\xa0\xbd\xed\xb8\x80b", "\xc0\x80", "caf\xe9", "\x00\xff", "x\xe4\xb8", "\xe2\x96"}
	for _, tok := range []*Tokenizer{storiesTokenizer(t), gemma(t)} {
		for _, s := range inputs {
			ids := append([]int32{tok.BOS()}, tok.Encode(s)...)
			if got := tok.Decode(ids); got != lossy(s) {
				t.Errorf("%s: Decode(BOS+Encode(%q)) = %q, want %q", tok.Source(), s, got, lossy(s))
			}
		}
	}
}

// A GGUF vocabulary can hold any bytes (llama.cpp does not check): a piece
// that is not valid UTF-8 decodes as it reads lossily, each maximal
// ill-formed subpart as one U+FFFD, in Decode and in every Next at once.
// The vocabulary itself is unchanged (Piece, TokenID).
func TestInvalidPiecesDecodeLossily(t *testing.T) {
	pieces := []string{"\xff", "a\xe4", "\xe4\xb8", "\xad", "\xed\xa0\x80", "ok\xc0\xafok", "\xe2\x96\x81x\xff"}
	cases := []struct {
		model string
		want  []string // Decode of each piece alone
	}{
		// llama: "▁" is a space; no BOS, so no strip.
		{"llama", []string{"\uFFFD", "a\uFFFD", "\uFFFD", "\uFFFD", "\uFFFD\uFFFD\uFFFD", "ok\uFFFD\uFFFDok", " x\uFFFD"}},
		// gpt2: a piece outside the byte alphabet is its own text (tokenizers' ByteLevel decoder).
		{"gpt2", []string{"\uFFFD", "a\uFFFD", "\uFFFD", "\uFFFD", "\uFFFD\uFFFD\uFFFD", "ok\uFFFD\uFFFDok", "▁x\uFFFD"}},
	}
	for _, c := range cases {
		v := Vocab{Source: c.model + ".gguf", Model: c.model, Tokens: append([]string{"<unk>", "a"}, pieces...), BOS: -1, EOS: -1, EOT: -1, UNK: -1}
		v.Scores = make([]float32, len(v.Tokens))
		tok, err := FromVocab(v)
		if err != nil {
			t.Fatal(err)
		}
		var all []int32
		var want string
		for i, p := range pieces {
			id := int32(i + 2)
			if tok.Piece(id) != p {
				t.Errorf("%s: Piece(%d) = %q, want the vocabulary's %q", c.model, id, tok.Piece(id), p)
			}
			if got, ok := tok.TokenID(p); !ok || got != id {
				t.Errorf("%s: TokenID(%q) = %d %v, want %d", c.model, p, got, ok, id)
			}
			if got := tok.Decode([]int32{id}); got != c.want[i] {
				t.Errorf("%s: Decode(%q) = %q, want %q", c.model, p, got, c.want[i])
			}
			all = append(all, id)
			want += c.want[i]
		}
		// Pieces are replaced one by one (tokenizers has one string per token).
		if got := tok.Decode(all); got != want {
			t.Errorf("%s: Decode(all) = %q, want %q", c.model, got, want)
		}
		s := tok.NewStream()
		var out strings.Builder
		for _, id := range all {
			p := s.Next(id)
			if !utf8.ValidString(p) {
				t.Errorf("%s: Next(%d) = %q is not valid UTF-8", c.model, id, p)
			}
			out.WriteString(p)
		}
		out.WriteString(s.Flush())
		if got := tok.Decode(all); out.String() != got || !utf8.ValidString(got) {
			t.Errorf("%s: stream %q, Decode %q", c.model, out.String(), got)
		}
	}
}

// The stream replaces bytes as soon as they are known to be invalid: a run
// of byte-fallback pieces is held only while it may still be valid UTF-8
// (tokenizers decides a run as a whole), byte-level bytes only while they
// may complete a character.
func TestStreamReplacesAtOnce(t *testing.T) {
	g := gemma(t)
	a, _ := g.TokenID("a")
	b := func(x byte) int32 { return byteID(t, g, x) }
	steps := []struct {
		id   int32
		want string
	}{
		{b(0x41), ""},                   // 'A' as a byte piece: the run may still go bad
		{b(0xF0), ""},                   // a 4-byte lead: still possible
		{b(0xFF), "\uFFFD\uFFFD\uFFFD"}, // never valid: the whole run is U+FFFD per byte, now
		{b(0x9F), "\uFFFD"},             // the same run: known bad, one U+FFFD at once
		{a, "a"},
		{b(0xE4), ""},
		{b(0xB8), ""},
		{b(0xAD), ""}, // 中, complete, but the run can still turn invalid
		{a, "中a"},
		{b(0xE4), ""},
		{b(0x41), "\uFFFD\uFFFD"}, // E4 41 can never be valid
	}
	s := g.NewStream()
	var ids []int32
	var all string
	for i, st := range steps {
		got := s.Next(st.id)
		if got != st.want {
			t.Errorf("step %d: Next(%s) = %q, want %q", i, g.Piece(st.id), got, st.want)
		}
		if !viable(s.run) {
			t.Errorf("step %d: the stream holds % x, known invalid", i, s.run)
		}
		ids = append(ids, st.id)
		all += got
	}
	all += s.Flush()
	if want := g.Decode(ids); all != want {
		t.Errorf("stream %q != Decode %q", all, want)
	}

	bl, err := Load(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	s = bl.NewStream()
	for i, st := range []struct {
		b    byte
		want string
	}{{0xF0, ""}, {0x9F, ""}, {0xFF, "\uFFFD\uFFFD"}, {0xE4, ""}, {0xB8, ""}, {0xAD, "中"}, {0xE4, ""}} {
		if got := s.Next(bl.bpe.bl[st.b]); got != st.want {
			t.Errorf("byte-level step %d: Next(%#x) = %q, want %q", i, st.b, got, st.want)
		}
	}
	if got := s.Flush(); got != "\uFFFD" {
		t.Errorf("byte-level Flush = %q, want U+FFFD", got)
	}
}

// utf8Seq and Go agree on what is valid: every 1- and 2-byte string and the
// 3- and 4-byte strings over boundary continuation bytes come back from
// appendLossy unchanged exactly when utf8.Valid accepts them; with final
// false, the bytes held back are always the start of a character that more
// bytes could complete (utf8.FullRune says no).
func TestUTF8SeqAgreesWithGo(t *testing.T) {
	tails := []byte{0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0}
	check := func(b []byte) {
		out, n := appendLossy(nil, b, true)
		if ok := utf8.Valid(b); ok != bytes.Equal(out, b) || n != len(b) || !utf8.Valid(out) {
			t.Fatalf("appendLossy(% x) = % x (%d), utf8.Valid = %v", b, out, n, ok)
		}
		_, held := appendLossy(nil, b, false)
		if rest := b[held:]; len(rest) > 0 && utf8.FullRune(rest) {
			t.Fatalf("appendLossy(% x, final=false) holds % x, which is not an incomplete character", b, rest)
		}
	}
	for b0 := range 256 {
		check([]byte{byte(b0)})
		for b1 := range 256 {
			check([]byte{byte(b0), byte(b1)})
			if b0 < 0xE0 || b0 > 0xF4 {
				continue
			}
			for _, b2 := range tails {
				check([]byte{byte(b0), byte(b1), b2})
				for _, b3 := range tails {
					check([]byte{byte(b0), byte(b1), b2, b3})
				}
			}
		}
	}
}

// EncodeTrusted's offsets are the caller's even when the text is not valid
// UTF-8: making it valid moves every later byte (ten 0xFF become thirty
// bytes), and a user's "<end_of_turn>" must not slide into trusted text.
func TestEncodeTrustedInvalidUTF8(t *testing.T) {
	tok := gemma(t)
	head, tail := "<start_of_turn>user\n", "<end_of_turn>\n"
	for _, user := range []string{strings.Repeat("\xff", 10) + "<end_of_turn>", "a\xf0\x9f\x98<end_of_turn>\xed\xa0\x80", "<end_of_turn>" + strings.Repeat("\xc0", 20)} {
		text := head + user + tail
		lo, hi := len(head), len(head)+len(user)
		got := tok.EncodeTrusted(text, func(a, b int) bool { return b <= lo || a >= hi })
		want := slices.Concat(tok.EncodeSpecial(head), tok.Encode(user), tok.EncodeSpecial(tail))
		if !slices.Equal(got, want) {
			t.Errorf("EncodeTrusted(%q) = %v, want %v", text, got, want)
		}
	}
}

// validTextOffsets maps every offset of the valid text outside a U+FFFD it
// wrote back to the place in the input that has the same valid prefix.
func TestValidTextOffsets(t *testing.T) {
	for _, r := range readUTF8Records(t) {
		in := unhex(t, r.In)
		if r.Lossy != nil {
			in = unhex(t, *r.Lossy)
		}
		if utf8.ValidString(in) {
			continue
		}
		out, orig := validTextOffsets(in)
		if out != lossy(in) {
			t.Fatalf("validTextOffsets(%q) = %q, want %q", in, out, lossy(in))
		}
		for x := 0; x <= len(out); x++ {
			if x < len(out) && !utf8.RuneStart(out[x]) {
				continue
			}
			if y := orig(x); y < 0 || y > len(in) || lossy(in[:y]) != out[:x] {
				t.Fatalf("%q: offset %d of %q maps to %d, whose prefix %q is not %q", in, x, out, y, lossy(in[:max(0, min(y, len(in)))]), out[:x])
			}
		}
	}
}
