package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"
)

// FuzzParseHF: any bytes as a tokenizer.json either fail with an error or
// give a tokenizer that encodes, decodes and streams without panicking (a
// model directory is user input). The seeds are the committed fixtures.
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
		s := tok.NewStream()
		for _, id := range ids {
			s.Next(id)
		}
		s.Flush()
	})
}
