package tokenizer

import (
	"fmt"
	"strings"
)

// GGUF token types (tokenizer.ggml.token_type), as llama.cpp numbers them.
const (
	TokenNormal      = 1
	TokenUnknown     = 2
	TokenControl     = 3
	TokenUserDefined = 4
	TokenUnused      = 5
	TokenByte        = 6
)

// Vocab is a GGUF tokenizer description (the tokenizer.ggml.* metadata),
// independent of the file reader so that it can be built in tests too.
type Vocab struct {
	Source string    // file name, for messages
	Model  string    // tokenizer.ggml.model: "llama", "gpt2" or "gemma4"
	Pre    string    // tokenizer.ggml.pre (gpt2 only): "default", "gpt2", "smollm"
	Tokens []string  // tokenizer.ggml.tokens
	Scores []float32 // tokenizer.ggml.scores (llama)
	Types  []int32   // tokenizer.ggml.token_type (optional: all normal)
	Merges []string  // tokenizer.ggml.merges (gpt2, gemma4): "left right"

	BOS, EOS, EOT, UNK int32 // -1 when absent
	AddBOS             *bool // tokenizer.ggml.add_bos_token; nil = model default
	AddSpacePrefix     *bool // tokenizer.ggml.add_space_prefix; nil = model default
}

// FromVocab builds a tokenizer from a GGUF-style vocabulary.
func FromVocab(v Vocab) (*Tokenizer, error) {
	name := v.Source
	if name == "" {
		name = "GGUF vocabulary"
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("tokenizer %s: %w: %s", name, ErrMalformed, fmt.Sprintf(format, args...))
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, fail("tokenizer.ggml.tokens is empty")
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fail("tokenizer.ggml.token_type has %d entries for %d tokens", len(v.Types), n)
	}
	typ := func(i int) int32 {
		if v.Types == nil {
			return TokenNormal
		}
		return v.Types[i]
	}
	// inRange maps an id outside the vocabulary to -1: llama.cpp writes -1
	// (0xFFFFFFFF) for "none".
	inRange := func(id int32) int32 {
		if id < 0 || int(id) >= n {
			return -1
		}
		return id
	}
	t := &Tokenizer{source: name, bos: -1}
	t.pieces = append([]string(nil), v.Tokens...)
	t.vocab = newPieceIndex(&t.pieces, n)
	t.skip = make([]bool, n)
	t.added = newAddedMatcher()
	for i, p := range v.Tokens {
		t.vocab.setIfAbsent(p, int32(i))
		switch k := typ(i); {
		case k == TokenControl || (k != TokenByte && eogLooking(p)):
			t.skip[i] = true
			t.added.add(p, int32(i), true)
		case k == TokenUserDefined:
			t.added.add(p, int32(i), false)
		}
	}
	t.bos = inRange(v.BOS)
	unk := inRange(v.UNK)
	for _, e := range []int32{v.EOS, v.EOT} {
		if id := inRange(e); id >= 0 {
			t.eos = append(t.eos, id)
		}
	}
	t.eos = dedup(t.eos)

	switch v.Model {
	case "llama":
		t.kind = "gguf-llama"
		if len(v.Scores) != n {
			return nil, fail("tokenizer.ggml.scores has %d entries for %d tokens", len(v.Scores), n)
		}
		m := &spmModel{vocab: t.vocab, scores: append([]float32(nil), v.Scores...), unk: unk, spacePrefix: true}
		for i := range m.byteID {
			m.byteID[i] = -1
		}
		for i, p := range v.Tokens {
			if b := parseBytePiece(p); b >= 0 && (v.Types == nil || typ(i) == TokenByte) {
				m.byteID[b] = int32(i)
			}
		}
		if v.AddSpacePrefix != nil {
			m.spacePrefix = *v.AddSpacePrefix
		}
		t.spm = m
		t.addBOS = true
		t.dec = decodeSpec{metaToSpace: true, byteFallback: true, stripAfterBOS: m.spacePrefix}
		if unk >= 0 {
			// llama.cpp shows an unknown token as U+2585.
			t.pieces[unk] = "\u2585"
		}
	case "gpt2":
		t.kind = "gguf-gpt2"
		var pre []preStep
		ignoreMerges := false
		switch v.Pre {
		case "", "default", "gpt2":
			pre = []preStep{{kind: preByteLevel, regex: true}}
		case "smollm":
			pre = []preStep{{kind: preDigits, flag: true}, {kind: preByteLevel, regex: true}}
		case "llama-bpe", "llama3":
			// llama.cpp also looks whole words up first for Llama 3.
			pre = []preStep{{kind: preLlama3, behavior: 3}, {kind: preByteLevel}}
			ignoreMerges = true
		case "qwen2":
			pre = []preStep{{kind: preLlama3, behavior: 1}, {kind: preByteLevel}}
		default:
			return nil, fmt.Errorf("tokenizer %s: %w: tokenizer.ggml.pre %q (supported: default, gpt2, smollm, llama-bpe, qwen2)", name, ErrUnsupported, v.Pre)
		}
		t.pre = pre
		t.byteLevel = true
		m := newBPEModel()
		m.merges = make(map[uint64]uint64, len(v.Merges))
		// A byte whose printable rune is not in the vocabulary is dropped:
		// llama.cpp's BPE and HF's BPE without unk_token both do that (the
		// SmolLM2 vocabulary lacks a few bytes).
		m.unk = -1
		m.vocab = t.vocab
		m.ignoreMerges = ignoreMerges
		for i, p := range v.Tokens {
			m.setPiece(p, int32(i))
		}
		for b := 0; b < 256; b++ {
			if id, ok := t.vocab.get(string(byteToRune[b])); ok {
				m.bl[b] = id
			}
		}
		if err := ggufMerges(m, t.vocab, v.Merges, fail); err != nil {
			return nil, err
		}
		t.bpe = m
		t.dec = decodeSpec{byteLevel: true}
	case "gemma4":
		// SentencePiece-style BPE ranked by merges (llama.cpp's gemma4
		// vocabulary): spaces become "▁", the text is cut into runs of
		// newlines and runs of anything else, BPE merges the UTF-8
		// characters of each run, and characters without a piece become
		// their <0xXX> bytes.
		t.kind = "gguf-gemma4"
		t.norm = []normOp{{kind: normReplace, from: " ", to: metaspace}}
		t.pre = []preStep{{kind: preSplit, pattern: "\n", behavior: splitContiguous}}
		m := newBPEModel()
		m.vocab = t.vocab
		m.byteFallback = true
		m.wholeNewlines = true
		for i, p := range v.Tokens {
			if typ(i) == TokenByte {
				if b := parseBytePiece(p); b >= 0 {
					m.byteID[b] = int32(i)
				}
				continue
			}
			m.setPiece(p, int32(i))
		}
		if err := ggufMerges(m, t.vocab, v.Merges, fail); err != nil {
			return nil, err
		}
		m.prepareChunking(t.pieces)
		t.bpe = m
		// llama.cpp adds BOS to every Gemma 4 prompt, whatever
		// tokenizer.ggml.add_bos_token says.
		t.addBOS = true
		v.AddBOS = nil
		t.dec = decodeSpec{metaToSpace: true, byteFallback: true}
	case "":
		return nil, fail("no tokenizer.ggml.model")
	default:
		return nil, fmt.Errorf("tokenizer %s: %w: tokenizer.ggml.model %q (supported: llama, gpt2, gemma4)", name, ErrUnsupported, v.Model)
	}
	if v.AddBOS != nil {
		t.addBOS = *v.AddBOS
	}
	t.finish()
	return t, nil
}

// ggufMerges adds tokenizer.ggml.merges ("left right", rank = index) to m;
// a merge listed twice keeps its first rank, as llama.cpp's bpe_ranks.
func ggufMerges(m *bpeModel, vocab *pieceIndex, merges []string, fail func(string, ...any) error) error {
	m.merges = make(map[uint64]uint64, len(merges))
	for rank, s := range merges {
		a, b, ok := strings.Cut(s, " ")
		if !ok {
			return fail("merge %d %q is not two pieces separated by a space", rank, truncate(s, 40))
		}
		l, ok1 := vocab.get(a)
		r, ok2 := vocab.get(b)
		res, ok3 := vocab.get(a + b)
		if !ok1 || !ok2 || !ok3 {
			return fail("merge %d %q uses pieces that are not in tokenizer.ggml.tokens", rank, truncate(s, 40))
		}
		m.addMerge(l, r, res, rank, true)
	}
	return nil
}

// eogLooking reports whether a piece is one of the end-of-generation
// spellings llama.cpp makes a control token whatever the file's
// token_type says ("</s>" is user-defined in Gemma 3's GGUF, for one):
// its text is then plain text unless special tokens are parsed.
func eogLooking(p string) bool {
	switch p {
	case "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~[":
		return true
	}
	return false
}
