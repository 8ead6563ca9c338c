package tokenizer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"anechat/internal/testres"
)

// A malformed or unsupported file gives an error that names the file and the problem.
func TestBadFiles(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, data string
		kind       error
		mention    string
	}{
		{"empty", "", ErrMalformed, "not a JSON object"},
		{"not json", "hello", ErrMalformed, "not a JSON object"},
		{"truncated", string(good[:len(good)/2]), ErrMalformed, "byte"},
		{"trailing", string(good) + "x", ErrMalformed, "trailing"},
		{"no model", `{"version":"1.0"}`, ErrMalformed, "model"},
		{"unigram", `{"model":{"type":"Unigram","vocab":[["a",0.0]]}}`, ErrUnsupported, "Unigram"},
		{"wordpiece vocab", `{"model":{"vocab":{"a":0},"merges":[]}, "decoder":{"type":"WordPiece"}}`, ErrUnsupported, "WordPiece"},
		{"bad id", `{"model":{"type":"BPE","vocab":{"a":-4},"merges":[]}}`, ErrMalformed, "not a valid id"},
		{"float id", `{"model":{"type":"BPE","vocab":{"a":1.5},"merges":[]}}`, ErrMalformed, "integer"},
		{"merge missing", `{"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":[["a","b"]]},"decoder":{"type":"ByteLevel"},"pre_tokenizer":{"type":"ByteLevel"}}`, ErrMalformed, "result \"ab\""},
		{"merge shape", `{"model":{"type":"BPE","vocab":{"a":0},"merges":[["a"]]}}`, ErrMalformed, "1 parts"},
		{"legacy merge", `{"model":{"type":"BPE","vocab":{"a":0},"merges":["a"]}}`, ErrMalformed, "two pieces"},
		{"regex split", `{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Isolated"},"decoder":{"type":"Fuse"}}`, ErrUnsupported, "regex"},
		{"nfkc", `{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"normalizer":{"type":"NFKC"}}`, ErrUnsupported, "NFKC"},
		{"dropout", `{"model":{"type":"BPE","dropout":0.1,"vocab":{"a":0},"merges":[]}}`, ErrUnsupported, "dropout"},
		{"lstrip", `{"added_tokens":[{"id":0,"content":"a","lstrip":true}],"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, ErrUnsupported, "lstrip"},
		{"huge id", `{"added_tokens":[{"id":99999999,"content":"a"}],"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, ErrMalformed, "large"},
		{"bad escape", `{"model":{"type":"BPE","vocab":{"\q":0}}}`, ErrMalformed, "escape"},
		{"deep", strings.Repeat("[", 100000), ErrMalformed, "not a JSON object"},
		{"deep value", `{"x":` + strings.Repeat("[", 1000) + `}`, ErrMalformed, "deep"},
		{"no decoder", `{"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`, ErrUnsupported, "decoder"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".json")
		if err := os.WriteFile(path, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: error %q, want %v naming %s and mentioning %q", c.name, err, c.kind, path, c.mention)
		}
	}
	if _, err := Load(filepath.Join(dir, "absent.json")); err == nil || !strings.Contains(err.Error(), "absent.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestBadVocabs(t *testing.T) {
	base := func() Vocab {
		return Vocab{Source: "x.gguf", Model: "llama", Tokens: []string{"<unk>", "a"}, Scores: []float32{0, 0}, BOS: -1, EOS: -1, EOT: -1, UNK: 0}
	}
	cases := []struct {
		name    string
		edit    func(*Vocab)
		kind    error
		mention string
	}{
		{"no model", func(v *Vocab) { v.Model = "" }, ErrMalformed, "tokenizer.ggml.model"},
		{"bert", func(v *Vocab) { v.Model = "bert" }, ErrUnsupported, "bert"},
		{"no tokens", func(v *Vocab) { v.Tokens = nil }, ErrMalformed, "empty"},
		{"scores", func(v *Vocab) { v.Scores = v.Scores[:1] }, ErrMalformed, "scores"},
		{"types", func(v *Vocab) { v.Types = []int32{1} }, ErrMalformed, "token_type"},
		{"pre", func(v *Vocab) { v.Model, v.Pre = "gpt2", "deepseek-llm" }, ErrUnsupported, "deepseek-llm"},
		{"merge", func(v *Vocab) { v.Model, v.Merges = "gpt2", []string{"a b"} }, ErrMalformed, "merge 0"},
	}
	for _, c := range cases {
		v := base()
		c.edit(&v)
		_, err := FromVocab(v)
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), "x.gguf") || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: error %v, want %v naming x.gguf and %q", c.name, err, c.kind, c.mention)
		}
	}
}

// Invalid UTF-8 encodes as its lossy text (each maximal ill-formed subpart
// one U+FFFD), so Decode gives that text back and valid parts survive.
func TestInvalidUTF8(t *testing.T) {
	tok := gemma(t)
	for _, s := range []string{"\xff", "a\xc3", "\xe4\xb8", "ok \xed\xa0\x80 ok", "\xf0\x9f\x98", string([]byte{0x80, 0x80, 'x'})} {
		ids := tok.EncodeSpecial(s)
		if got := tok.Decode(ids); got != lossy(s) {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", s, got, lossy(s))
		}
	}
}

func TestLossyMaximalSubparts(t *testing.T) {
	// Expected values from Rust's String::from_utf8_lossy.
	cases := map[string]string{
		"\xe2\x82a":         "\uFFFDa",
		"\xf0\x9f\x98":      "\uFFFD",
		"\xed\xa0\x80":      "\uFFFD\uFFFD\uFFFD",
		"\xc0\xaf":          "\uFFFD\uFFFD",
		"a\xf4\x90\x80\x80": "a\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xe0\xa0":          "\uFFFD",
		"\xe0\x80":          "\uFFFD\uFFFD",
		"é\xff":             "é\uFFFD",
	}
	for in, want := range cases {
		got, n := appendLossy(nil, []byte(in), true)
		if string(got) != want || n != len(in) {
			t.Errorf("lossy(%q) = %q (%d), want %q", in, got, n, want)
		}
	}
}

func fuzzSeeds(f *testing.F) {
	for _, s := range []string{"", "hello world", "  spaces  ", "\n\n\t", "日本語", "👨‍👩‍👧", "e\u0301", "<end_of_turn>", "<start_of_turn>user\n", "a>▁</b", "\xff\xfe", "<0x41>", "'s 're 12 34"} {
		f.Add(s)
	}
}

// decode(encode(s)) == s for valid UTF-8 (Gemma: byte fallback covers
// everything) without "▁", which Gemma's decoder turns into a space exactly
// as Hugging Face's does; for any other bytes it is their lossy text (each
// maximal ill-formed subpart one U+FFFD). EncodeSpecial never panics.
func FuzzGemmaRoundTrip(f *testing.F) {
	fuzzSeeds(f)
	tok := gemma(f) // before f.Fuzz: the fuzzer kills a worker whose call takes 10 s
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		_ = tok.EncodeSpecial(s)
		want := lossy(s)
		if strings.Contains(want, metaspace) {
			return
		}
		if got := tok.Decode(ids); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v), want %q", s, got, ids, want)
		}
		if got := streamAll(tok, ids); got != want {
			t.Fatalf("stream(Encode(%q)) = %q, want %q", s, got, want)
		}
	})
}

// Byte-level BPE round-trips everything (invalid bytes as their lossy
// text), and the GPT-2 splitter never drops or duplicates bytes.
func FuzzByteLevelRoundTrip(f *testing.F) {
	fuzzSeeds(f)
	tok, err := Load(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := strings.Join(gpt2Split(nil, s), ""); got != s {
			t.Fatalf("gpt2Split(%q) joined = %q", s, got)
		}
		for _, digits := range []int{1, 3} {
			parts := llama3Split(nil, s, digits)
			if got := strings.Join(parts, ""); got != s {
				t.Fatalf("llama3Split(%q, %d) joined = %q", s, digits, got)
			}
			for _, p := range parts {
				if p == "" {
					t.Fatalf("llama3Split(%q, %d) has an empty piece", s, digits)
				}
			}
		}
		ids := tok.Encode(s)
		_ = tok.EncodeSpecial(s)
		want := lossy(s)
		if got := tok.Decode(ids); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
		if got := streamAll(tok, ids); got != want {
			t.Fatalf("stream(Encode(%q)) = %q, want %q", s, got, want)
		}
	})
}

// Any id sequence streams to valid UTF-8 pieces whose concatenation is
// Decode, and the stream never holds bytes it knows to be invalid (Gemma and
// stories260K: byte fallback; bytelevel.json: byte-level).
func FuzzStreamDecode(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{0xE4, 0, 0xB8, 0, 0xAD, 0})
	f.Add([]byte{0xF0, 0, 0x9F, 0, 0x98, 0, 0x80, 0, 0x41, 0, 2, 1})
	f.Add([]byte{0xF0, 0, 0xFF, 0, 0x41, 0x10, 0xE4, 0})
	testres.Stories(f)
	byteLevel, err := Load(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		f.Fatal(err)
	}
	toks := []*Tokenizer{gemma(f), storiesTokenizer(f), byteLevel}
	// bytePiece[k][b] is tokenizer k's piece for the byte b alone.
	bytePiece := make([][256]int32, len(toks))
	for k, tok := range toks {
		for b := range 256 {
			if tok.bpe != nil && tok.byteLevel {
				bytePiece[k][b] = tok.bpe.bl[b]
			} else {
				bytePiece[k][b] = byteID(f, tok, byte(b))
			}
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for k, tok := range toks {
			// Two bytes per id: (b, 0) is the piece of byte b, so that
			// characters get split and runs go bad; (x, 1..3) the low ids
			// (specials, controls); anything else an id.
			var ids []int32
			for i := 0; i+1 < len(raw); i += 2 {
				id := int32(raw[i]) | int32(raw[i+1])<<8
				switch {
				case raw[i+1] == 0:
					id = bytePiece[k][raw[i]]
				case raw[i+1] < 4:
					id = int32(raw[i])
				}
				ids = append(ids, id%int32(tok.VocabSize()+5))
			}
			checkStream(t, tok, ids, tok.Decode(ids))
		}
	})
}

// The stream holds a character split over byte pieces until it is complete.
func TestStreamHoldsPartialCharacters(t *testing.T) {
	tok := gemma(t)
	id := func(p string) int32 {
		v, ok := tok.TokenID(p)
		if !ok {
			t.Fatalf("no %s", p)
		}
		return v
	}
	// 😀 = F0 9F 98 80, as four byte pieces, then "a".
	ids := []int32{id("<0xF0>"), id("<0x9F>"), id("<0x98>"), id("<0x80>"), id("a")}
	s := tok.NewStream()
	var outs []string
	for _, x := range ids {
		outs = append(outs, s.Next(x))
	}
	outs = append(outs, s.Flush())
	want := []string{"", "", "", "", "😀a", ""}
	if strings.Join(outs, "|") != strings.Join(want, "|") {
		t.Errorf("stream pieces = %q, want %q", outs, want)
	}
	// An incomplete character at the end flushes as U+FFFD per byte, like Decode.
	s = tok.NewStream()
	s.Next(id("<0xF0>"))
	s.Next(id("<0x9F>"))
	if got := s.Flush(); got != "\uFFFD\uFFFD" || tok.Decode(ids[:2]) != got {
		t.Errorf("Flush of a partial character = %q, Decode = %q", got, tok.Decode(ids[:2]))
	}
}

func TestFingerprint(t *testing.T) {
	a, err := Load(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() != b.Fingerprint() {
		t.Errorf("same file, fingerprints %s and %s", a.Fingerprint(), b.Fingerprint())
	}
	c, err := FromVocab(bytelevelVocab(t))
	if err != nil {
		t.Fatal(err)
	}
	v := bytelevelVocab(t)
	v.Merges = v.Merges[:len(v.Merges)-1]
	d, err := FromVocab(v)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tok := range []*Tokenizer{a, c, d} {
		seen[tok.Fingerprint()] = true
	}
	if len(seen) != 3 {
		t.Errorf("HF file, GGUF vocab and GGUF vocab minus a merge share fingerprints: %v", seen)
	}
}

// Encode is safe for concurrent use (the word cache is shared) and gives
// the same ids from every goroutine.
func TestConcurrentEncode(t *testing.T) {
	tok, err := Load(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	exps := readExpectations(t, "bytelevel.jsonl.gz")
	done := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func(g int) {
			for i := g; i < len(exps); i += 2 {
				e := exps[i]
				if e.S == nil {
					continue
				}
				if got := tok.Encode(*e.S); !slices.Equal(got, e.Enc) {
					done <- fmt.Errorf("goroutine %d: Encode(%q) = %v, want %v", g, short(*e.S), got, e.Enc)
					return
				}
			}
			done <- nil
		}(g)
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// stories260K's SentencePiece vocabulary: BOS + Encode(s) decodes to s for
// valid UTF-8 without "▁" (byte fallback covers every character), and to
// the lossy text of any other bytes.
func FuzzStoriesRoundTrip(f *testing.F) {
	fuzzSeeds(f)
	tok := storiesTokenizer(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := append([]int32{tok.BOS()}, tok.Encode(s)...)
		_ = tok.EncodeSpecial(s)
		want := lossy(s)
		if strings.Contains(want, metaspace) {
			return
		}
		if got := tok.Decode(ids); got != want {
			t.Fatalf("Decode(BOS+Encode(%q)) = %q, want %q", s, got, want)
		}
		if got := streamAll(tok, ids); got != want {
			t.Fatalf("stream(BOS+Encode(%q)) = %q, want %q", s, got, want)
		}
	})
}

// Case-insensitive contractions fold like the regex engine does (ſ is s);
// expected splits from tokenizers' Split(Regex(Llama 3 pattern)).
func TestLlama3Contractions(t *testing.T) {
	cases := map[string][]string{
		"'ſx":  {"'ſ", "x"},
		"'Sx":  {"'S", "x"},
		"'REx": {"'RE", "x"},
		"'ﬅ":   {"'ﬅ"},
		"'Kx":  {"'Kx"},
	}
	for in, want := range cases {
		if got := llama3Split(nil, in, 3); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("llama3Split(%q) = %q, want %q", in, got, want)
		}
	}
}

// Cutting words where no merge can join the neighbours never changes the
// result: encodeWord (cuts, cache) equals one BPE over the whole word.
func FuzzCutsAreExact(f *testing.F) {
	fuzzSeeds(f)
	f.Add("我爱北京天安门，天安门上太阳升。伟大领袖毛主席")
	f.Add(`{"key":[1,2,3],"nested":{"a":null},"url":"https://example.org/p?q=1&r=2"}`)
	f.Add("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa>▁</b> x")
	tok := gemma(f)
	f.Fuzz(func(t *testing.T, s string) {
		w := applyNorm(tok.norm, s)
		cut := tok.bpe.encodeWord(nil, w, false)
		whole := tok.bpe.bpe(nil, w, false)
		if !slices.Equal(cut, whole) {
			t.Fatalf("word %q: with cuts %v, whole %v", w, cut, whole)
		}
	})
}
