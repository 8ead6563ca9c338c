package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseHF: any bytes as a tokenizer.json either fail with an error or
// give a tokenizer that encodes in range and decodes and streams to the
// same valid UTF-8 (a model directory is user input). The seeds are the
// committed fixtures.
func FuzzParseHF(f *testing.F) {
	for _, name := range []string{"bytelevel.json", "bytelevel_llama3.json", "spm_metaspace.json", "spm_prepend.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`))
	f.Add([]byte(`{"model":{"type":"BPE","byte_fallback":true,"vocab":{"<0x41>":0,"▁":1},"merges":[]},"decoder":{"type":"ByteFallback"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := parseHF("fuzz.json", data)
		if err != nil {
			return
		}
		ids := tok.Encode("Hello wörld 😀 ab\n")
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("Encode gave id %d outside 0..%d", id, tok.VocabSize()-1)
			}
		}
		ids = append(ids, -1, int32(tok.VocabSize()), 0, 1, 2, 3)
		text := tok.Decode(ids)
		if !utf8.ValidString(text) {
			t.Fatalf("Decode gave invalid UTF-8 %q", text)
		}
		checkStream(t, tok, ids, text)
	})
}

// FuzzFromVocab: any GGUF-style vocabulary (pieces, types, scores, merges,
// special ids, both models) either fails with an error or gives a tokenizer
// that encodes in range and decodes and streams to the same valid UTF-8,
// whatever bytes its pieces or the text hold.
func FuzzFromVocab(f *testing.F) {
	f.Add("gpt2", "a\x00b\x00ab\x00Ġ\x00<|end|>", "a b", []byte{1, 1, 1, 1, 3}, int32(4), int32(-1), "hello ab")
	f.Add("llama", "<unk>\x00<s>\x00▁\x00a\x00<0x41>\x00<0xC3>\x00▁a", "", []byte{2, 3, 1, 1, 6, 6, 1}, int32(1), int32(0), "a Ã a")
	f.Add("gpt2", "x\x00y", "x y\x00x", []byte{}, int32(9), int32(-5), "xyx")
	f.Fuzz(func(t *testing.T, modelName, tokens, merges string, types []byte, bos, unk int32, text string) {
		v := Vocab{Model: modelName, Tokens: strings.Split(tokens, "\x00"), BOS: bos, EOS: bos + 1, EOT: -1, UNK: unk}
		if len(types) > 0 {
			v.Types = make([]int32, len(types))
			for i, b := range types {
				v.Types[i] = int32(b % 8)
			}
		}
		v.Scores = make([]float32, len(v.Tokens))
		for i := range v.Scores {
			v.Scores[i] = float32(-i)
		}
		if merges != "" {
			v.Merges = strings.Split(merges, "\x00")
		}
		tok, err := FromVocab(v)
		if err != nil {
			return
		}
		ids := tok.Encode(text)
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("Encode(%q) gave id %d outside 0..%d", text, id, tok.VocabSize()-1)
			}
		}
		ids = append(ids, -1, int32(tok.VocabSize()), 0, 1, 2, 3, 4, 5)
		dec := tok.Decode(ids)
		if !utf8.ValidString(dec) {
			t.Fatalf("Decode gave invalid UTF-8 %q", dec)
		}
		checkStream(t, tok, ids, dec)
	})
}

// checkStream streams ids one by one: every Next is valid UTF-8, the stream
// never holds bytes that can no longer become valid, and the whole is want
// (Decode of the same ids).
func checkStream(t *testing.T, tok *Tokenizer, ids []int32, want string) {
	t.Helper()
	s := tok.NewStream()
	var all strings.Builder
	for _, id := range ids {
		p := s.Next(id)
		if !utf8.ValidString(p) {
			t.Fatalf("Stream.Next(%d) gave invalid UTF-8 %q", id, p)
		}
		if !viable(s.run) {
			t.Fatalf("after Next(%d) the stream holds % x, which can never be valid", id, s.run)
		}
		all.WriteString(p)
	}
	all.WriteString(s.Flush())
	if all.String() != want {
		t.Fatalf("stream of %v = %q, Decode = %q", ids, all.String(), want)
	}
}
