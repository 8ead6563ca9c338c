package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tokenizers refuses a tokenizer.json that is not UTF-8 or has an unpaired
// surrogate escape (serde_json's rules); so does Load, with the file's name
// and the byte offset.
func TestHFFileMustBeUTF8(t *testing.T) {
	const tmpl = `{"model":{"type":"BPE","vocab":{"a":0,%s:1},"merges":[]},"decoder":{"type":"Fuse"}}`
	cases := []struct {
		name, piece, mention string
	}{
		{"raw ff", "\"\xff\"", "UTF-8"},
		{"wtf8 surrogate", "\"\xed\xa0\x80\"", "UTF-8"},
		{"lone high", `"\ud800"`, "surrogate"},
		{"lone low", `"\udc00"`, "surrogate"},
		{"high then a", `"\ud800a"`, "surrogate"},
		{"high high", `"\ud800\ud800"`, "surrogate"},
		{"high then escape", `"\ud800\u0041"`, "surrogate"},
		{"low high", `"\udc00\ud800"`, "surrogate"},
	}
	files := map[string]string{}
	for _, c := range cases {
		files[c.name] = strings.Replace(tmpl, "%s", c.piece, 1)
	}
	// Outside the vocabulary too: an added token, a decoder, a model option.
	for name, data := range map[string]string{
		"added token":  `{"added_tokens":[{"id":1,"content":"` + "\xff" + `","special":true}],"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"decoder":{"type":"Fuse"}}`,
		"decoder":      `{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"decoder":{"type":"Strip","content":"` + "\xe4" + `","start":1}}`,
		"unk":          `{"model":{"type":"BPE","unk_token":"` + "\xc0\xaf" + `","vocab":{"a":0},"merges":[]},"decoder":{"type":"Fuse"}}`,
		"added escape": `{"added_tokens":[{"id":1,"content":"\udfff","special":true}],"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"decoder":{"type":"Fuse"}}`,
	} {
		files[name] = data
		mention := "UTF-8"
		if name == "added escape" {
			mention = "surrogate"
		}
		cases = append(cases, struct{ name, piece, mention string }{name, "", mention})
	}
	dir := t.TempDir()
	for _, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".json")
		if err := os.WriteFile(path, []byte(files[c.name]), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: error %v, want ErrMalformed naming %s and mentioning %q", c.name, err, path, c.mention)
		}
	}
	// A surrogate pair is one character, as in tokenizers.
	path := filepath.Join(dir, "pair.json")
	os.WriteFile(path, []byte(strings.Replace(tmpl, "%s", `"\ud83d\ude00"`, 1)), 0o644)
	tok, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tok.TokenID("😀"); !ok || id != 1 || tok.Decode([]int32{1}) != "😀" {
		t.Errorf("pair: TokenID(😀) = %d %v, Decode = %q", id, ok, tok.Decode([]int32{1}))
	}
}
