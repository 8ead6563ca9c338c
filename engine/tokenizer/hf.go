package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"anechat/engine/model/mmap"
)

// Bounds on what is read whole into memory: the largest tokenizer.json
// files (multilingual vocabularies of 256k pieces and their merges) are
// tens of MiB; the configs beside them are KiBs to a few MiB.
const (
	maxTokenizerFile = 512 << 20
	maxSideConfig    = 64 << 20
)

// ErrUnsupported marks a tokenizer file that is well formed but uses a
// feature this package does not implement (the message names it).
var ErrUnsupported = errors.New("unsupported tokenizer feature")

// ErrMalformed marks a tokenizer file that is not what it claims to be.
var ErrMalformed = errors.New("malformed tokenizer file")

// Load reads a Hugging Face tokenizer.json with a BPE model. If a
// tokenizer_config.json (and generation_config.json) sits beside it, its
// eos_token and add_bos_token settings are used too.
func Load(path string) (*Tokenizer, error) {
	data, err := mmap.ReadFile(path, maxTokenizerFile)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parseHF(path, data)
	if err != nil {
		return nil, err
	}
	t.readSideConfig(filepath.Dir(path))
	return t, nil
}

// hfFile holds the small sections of tokenizer.json, decoded with encoding/json.
type hfAddedToken struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type hfPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type hfNormalizer struct {
	Type        string         `json:"type"`
	Normalizers []hfNormalizer `json:"normalizers"`
	Pattern     hfPattern      `json:"pattern"`
	Content     string         `json:"content"`
	Prepend     string         `json:"prepend"`
}

type hfPreTokenizer struct {
	Type             string           `json:"type"`
	Pretokenizers    []hfPreTokenizer `json:"pretokenizers"`
	Pattern          hfPattern        `json:"pattern"`
	Behavior         string           `json:"behavior"`
	Invert           bool             `json:"invert"`
	AddPrefixSpace   bool             `json:"add_prefix_space"`
	UseRegex         *bool            `json:"use_regex"`
	IndividualDigits bool             `json:"individual_digits"`
	Replacement      string           `json:"replacement"`
	PrependScheme    string           `json:"prepend_scheme"`
	Split            *bool            `json:"split"`
}

type hfDecoder struct {
	Type          string      `json:"type"`
	Decoders      []hfDecoder `json:"decoders"`
	Pattern       hfPattern   `json:"pattern"`
	Content       string      `json:"content"`
	Start         int         `json:"start"`
	Stop          int         `json:"stop"`
	Replacement   string      `json:"replacement"`
	PrependScheme string      `json:"prepend_scheme"`
}

type hfTemplatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

type hfPostProcessor struct {
	Type          string            `json:"type"`
	Single        []hfTemplatePiece `json:"single"`
	Processors    []hfPostProcessor `json:"processors"`
	SpecialTokens map[string]struct {
		IDs []int64 `json:"ids"`
	} `json:"special_tokens"`
}

type hfModelOptions struct {
	Type                    string   `json:"type"`
	Dropout                 *float64 `json:"dropout"`
	UnkToken                *string  `json:"unk_token"`
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	FuseUnk                 bool     `json:"fuse_unk"`
	ByteFallback            bool     `json:"byte_fallback"`
	IgnoreMerges            bool     `json:"ignore_merges"`
}

// parseHF builds a tokenizer from the bytes of a tokenizer.json; name is used
// in error messages.
func parseHF(name string, data []byte) (t *Tokenizer, err error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("tokenizer %s: %w: %s", name, ErrMalformed, fmt.Sprintf(format, args...))
	}
	unsupported := func(format string, args ...any) error {
		return fmt.Errorf("tokenizer %s: %w: %s", name, ErrUnsupported, fmt.Sprintf(format, args...))
	}
	s := &scanner{data: data}
	var (
		addedRaw, normRaw, preRaw, decRaw, postRaw []byte
		opts                                       hfModelOptions
		pieces                                     []string
		nvocab                                     int
		maxID                                      int32 = -1
		mergesRaw                                  []byte
		sawModel, vocabNotObject, hasVocab         bool
	)
	if s.peek() != '{' {
		return nil, fail("not a JSON object (is this a tokenizer.json?)")
	}
	err = s.object(func(key []byte) error {
		var e error
		switch string(key) {
		case "added_tokens":
			addedRaw, e = s.skipText()
		case "normalizer":
			normRaw, e = s.skipText()
		case "pre_tokenizer":
			preRaw, e = s.skipText()
		case "decoder":
			decRaw, e = s.skipText()
		case "post_processor":
			postRaw, e = s.skipText()
		case "model":
			sawModel = true
			var rest bytes.Buffer
			rest.WriteByte('{')
			e = s.object(func(k []byte) error {
				switch string(k) {
				case "vocab":
					if s.peek() != '{' {
						vocabNotObject = true
						_, err := s.skip()
						return err
					}
					pieces = make([]string, 0, 1<<18)
					hasVocab = true
					return s.object(func(piece []byte) error {
						p := string(piece)
						v, err := s.int()
						if err != nil {
							return err
						}
						if v < 0 || v > 1<<24 {
							return s.errorf("model.vocab[%q] = %d is not a valid id", truncate(p, 40), v)
						}
						for int(v) >= len(pieces) {
							pieces = append(pieces, "")
						}
						if pieces[v] != "" {
							return s.errorf("model.vocab has two pieces with id %d", v)
						}
						pieces[v] = p
						nvocab++
						maxID = max(maxID, int32(v))
						return nil
					})
				case "merges":
					var err error
					mergesRaw, err = s.skip()
					return err
				default:
					raw, err := s.skipText()
					if err != nil {
						return err
					}
					if rest.Len() > 1 {
						rest.WriteByte(',')
					}
					kj, _ := json.Marshal(string(k))
					rest.Write(kj)
					rest.WriteByte(':')
					rest.Write(raw)
					return nil
				}
			})
			if e != nil {
				return e
			}
			rest.WriteByte('}')
			if err := json.Unmarshal(rest.Bytes(), &opts); err != nil {
				return fmt.Errorf("model options: %w", err)
			}
		default:
			_, e = s.skipText()
		}
		return e
	})
	if err != nil {
		return nil, fail("%v", err)
	}
	if s.peek() != 0 {
		return nil, fail("trailing data after the JSON object")
	}
	if !sawModel {
		return nil, fail("no \"model\" section")
	}
	// tokenizers reads the file into a Rust String, so it refuses bytes that
	// are not UTF-8 (and serde_json unpaired surrogate escapes, which
	// strBytes refuses too): every piece is valid text. The merges are
	// pieces of the vocabulary, so checking the vocabulary covers them.
	for id, p := range pieces {
		if !utf8.ValidString(p) {
			return nil, fail("model.vocab piece %q (id %d) is not valid UTF-8: the file is damaged (tokenizers refuses it too)", truncate(p, 40), id)
		}
	}
	if opts.Type != "" && opts.Type != "BPE" {
		return nil, unsupported("model type %q (only BPE is supported)", opts.Type)
	}
	if vocabNotObject {
		return nil, fail("model.vocab is not an object")
	}
	if !hasVocab {
		return nil, fail("model has no vocab")
	}
	if opts.Dropout != nil && *opts.Dropout != 0 {
		return nil, unsupported("BPE dropout")
	}
	if opts.ContinuingSubwordPrefix != nil && *opts.ContinuingSubwordPrefix != "" {
		return nil, unsupported("continuing_subword_prefix")
	}
	if opts.EndOfWordSuffix != nil && *opts.EndOfWordSuffix != "" {
		return nil, unsupported("end_of_word_suffix")
	}

	var added []hfAddedToken
	if len(addedRaw) > 0 && string(addedRaw) != "null" {
		if err := json.Unmarshal(addedRaw, &added); err != nil {
			return nil, fail("added_tokens: %v", err)
		}
	}
	for _, a := range added {
		if a.ID < 0 || a.ID > math.MaxInt32-1 {
			return nil, fail("added token %q has id %d", truncate(a.Content, 40), a.ID)
		}
		maxID = max(maxID, int32(a.ID))
	}
	if maxID > 1<<24 {
		return nil, fail("token id %d is implausibly large", maxID)
	}

	t = &Tokenizer{source: name, kind: "hf-bpe", bos: -1}
	for int(maxID) >= len(pieces) {
		pieces = append(pieces, "")
	}
	t.pieces = pieces
	t.vocab = newPieceIndex(&t.pieces, nvocab+len(added))
	m := newBPEModel()
	m.vocab = t.vocab
	m.byteFallback = opts.ByteFallback
	m.fuseUnk = opts.FuseUnk
	m.ignoreMerges = opts.IgnoreMerges
	for id, p := range t.pieces {
		if p == "" {
			continue
		}
		t.vocab.set(p, int32(id))
		m.setPiece(p, int32(id))
	}
	if opts.UnkToken != nil {
		id, ok := t.vocab.get(*opts.UnkToken)
		if !ok {
			return nil, fail("unk_token %q is not in the vocab", *opts.UnkToken)
		}
		m.unk = id
	}
	if err := parseMerges(mergesRaw, t.vocab, m); err != nil {
		return nil, fail("model.merges: %v", err)
	}
	t.bpe = m

	t.added = newAddedMatcher()
	t.skip = make([]bool, len(t.pieces))
	for _, a := range added {
		if a.SingleWord || a.LStrip || a.RStrip {
			return nil, unsupported("added token %q uses single_word/lstrip/rstrip", truncate(a.Content, 40))
		}
		id := int32(a.ID)
		// Added tokens win over the model's piece of the same id, as in
		// HF's id_to_token.
		t.pieces[id] = a.Content
		t.vocab.set(a.Content, id)
		t.added.add(a.Content, id, a.Special)
		if a.Special {
			t.skip[id] = true
		}
	}

	if t.norm, err = parseNormalizer(normRaw); err != nil {
		return nil, unsupported("normalizer: %v", err)
	}
	for _, a := range added {
		if a.Normalized && len(t.norm) > 0 {
			return nil, unsupported("added token %q is normalized", truncate(a.Content, 40))
		}
	}
	if t.pre, t.byteLevel, err = parsePreTokenizer(preRaw); err != nil {
		return nil, unsupported("pre_tokenizer: %v", err)
	}
	if t.byteLevel {
		for b := 0; b < 256; b++ {
			if id, ok := t.vocab.get(string(byteToRune[b])); ok {
				m.bl[b] = id
			}
		}
	}
	if t.dec, err = parseDecoder(decRaw); err != nil {
		return nil, unsupported("decoder: %v", err)
	}
	if t.byteLevel != t.dec.byteLevel {
		return nil, unsupported("a ByteLevel pre-tokenizer needs a ByteLevel decoder and vice versa")
	}
	if bos, ok, err := parsePost(postRaw, t.vocab); err != nil {
		return nil, unsupported("post_processor: %v", err)
	} else if ok {
		t.bos, t.addBOS = bos, true
	}
	m.prepareChunking(t.pieces)
	t.finish()
	t.eos = t.defaultEOS()
	return t, nil
}

// parseMerges reads merges as ["a","b"] pairs or legacy "a b" strings.
func parseMerges(raw []byte, vocab *pieceIndex, m *bpeModel) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	// Pre-size the merge map (a pretty-printed merge takes ~40 bytes):
	// growing a 515k-entry map costs more than a generous guess.
	m.merges = make(map[uint64]uint64, len(raw)/32)
	s := &scanner{data: raw}
	var key []byte
	return s.array(func(rank int) error {
		var left, right int32
		look := func(p []byte) (int32, error) {
			id, ok := vocab.quickBytes(p)
			if !ok {
				return 0, fmt.Errorf("merge %d: %q is not in the vocab", rank, truncate(string(p), 40))
			}
			return id, nil
		}
		var err error
		switch s.peek() {
		case '[':
			n := 0
			err = s.array(func(i int) error {
				p, err := s.strBytes()
				if err != nil {
					return err
				}
				if i == 0 {
					key = append(key[:0], p...)
					left, err = look(p)
				} else if i == 1 {
					key = append(key, p...)
					right, err = look(p)
				}
				n++
				return err
			})
			if err == nil && n != 2 {
				err = fmt.Errorf("merge %d has %d parts, want 2", rank, n)
			}
		case '"':
			var p []byte
			if p, err = s.strBytes(); err == nil {
				a, b, ok := strings.Cut(string(p), " ")
				if !ok || strings.Contains(b, " ") {
					return fmt.Errorf("merge %d %q is not two pieces separated by one space", rank, truncate(string(p), 40))
				}
				if left, err = look([]byte(a)); err == nil {
					right, err = look([]byte(b))
				}
				key = append(append(key[:0], a...), b...)
			}
		default:
			err = s.errorf("merge %d is neither a pair nor a string", rank)
		}
		if err != nil {
			return err
		}
		res, ok := vocab.quickBytes(key)
		if !ok {
			return fmt.Errorf("merge %d: result %q is not in the vocab", rank, truncate(string(key), 40))
		}
		m.addMerge(left, right, res, rank, false)
		return nil
	})
}

func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }

func parseNormalizer(raw []byte) ([]normOp, error) {
	if isNull(raw) {
		return nil, nil
	}
	var n hfNormalizer
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, err
	}
	var ops []normOp
	var walk func(n hfNormalizer) error
	walk = func(n hfNormalizer) error {
		switch n.Type {
		case "Sequence":
			for _, c := range n.Normalizers {
				if err := walk(c); err != nil {
					return err
				}
			}
		case "Replace":
			if n.Pattern.String == nil {
				return fmt.Errorf("Replace with a regex pattern")
			}
			ops = append(ops, normOp{kind: normReplace, from: *n.Pattern.String, to: n.Content})
		case "Prepend":
			ops = append(ops, normOp{kind: normPrepend, to: n.Prepend})
		case "NFC":
			ops = append(ops, normOp{kind: normNFC})
		default:
			return fmt.Errorf("type %q", n.Type)
		}
		return nil
	}
	return ops, walk(n)
}

var splitBehaviors = map[string]int{
	"Removed": splitRemoved, "Isolated": splitIsolated, "MergedWithPrevious": splitMergedWithPrevious,
	"MergedWithNext": splitMergedWithNext, "Contiguous": splitContiguous,
}

func parsePreTokenizer(raw []byte) (steps []preStep, byteLevel bool, err error) {
	if isNull(raw) {
		return nil, false, nil
	}
	var p hfPreTokenizer
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, false, err
	}
	var walk func(p hfPreTokenizer) error
	walk = func(p hfPreTokenizer) error {
		if byteLevel {
			return fmt.Errorf("%s after ByteLevel", p.Type)
		}
		switch p.Type {
		case "Sequence":
			for _, c := range p.Pretokenizers {
				if err := walk(c); err != nil {
					return err
				}
			}
		case "Split":
			if p.Pattern.Regex != nil {
				// Only the known byte-level patterns, implemented by hand.
				digits := 0
				switch *p.Pattern.Regex {
				case llama3Pattern:
					digits = 3
				case qwen2Pattern:
					digits = 1
				default:
					return fmt.Errorf("Split with a regex pattern other than Llama 3's or Qwen 2's: %q", truncate(*p.Pattern.Regex, 60))
				}
				if p.Invert || p.Behavior != "Isolated" {
					return fmt.Errorf("regex Split with behavior %q invert %v", p.Behavior, p.Invert)
				}
				steps = append(steps, preStep{kind: preLlama3, behavior: digits})
				return nil
			}
			if p.Pattern.String == nil {
				return fmt.Errorf("Split without a pattern")
			}
			if p.Invert {
				return fmt.Errorf("inverted Split")
			}
			b, ok := splitBehaviors[p.Behavior]
			if !ok {
				return fmt.Errorf("Split behavior %q", p.Behavior)
			}
			steps = append(steps, preStep{kind: preSplit, pattern: *p.Pattern.String, behavior: b})
		case "ByteLevel":
			regex := p.UseRegex == nil || *p.UseRegex
			steps = append(steps, preStep{kind: preByteLevel, flag: p.AddPrefixSpace, regex: regex})
			byteLevel = true
		case "Digits":
			steps = append(steps, preStep{kind: preDigits, flag: p.IndividualDigits})
		case "Metaspace":
			rep := p.Replacement
			if rep == "" {
				rep = metaspace
			}
			sch := prependAlways
			switch p.PrependScheme {
			case "", "always":
			case "first":
				sch = prependFirst
			case "never":
				sch = prependNever
			default:
				return fmt.Errorf("Metaspace prepend_scheme %q", p.PrependScheme)
			}
			split := p.Split == nil || *p.Split
			steps = append(steps, preStep{kind: preMetaspace, pattern: rep, flag: split, scheme: sch})
		default:
			return fmt.Errorf("type %q", p.Type)
		}
		return nil
	}
	return steps, byteLevel, walk(p)
}

func parseDecoder(raw []byte) (decodeSpec, error) {
	var d decodeSpec
	if isNull(raw) {
		return d, fmt.Errorf("no decoder")
	}
	var top hfDecoder
	if err := json.Unmarshal(raw, &top); err != nil {
		return d, err
	}
	list := []hfDecoder{top}
	if top.Type == "Sequence" {
		list = top.Decoders
	}
	fused := false
	for i, x := range list {
		switch x.Type {
		case "ByteLevel":
			if len(list) != 1 {
				return d, fmt.Errorf("ByteLevel inside a Sequence")
			}
			d.byteLevel = true
		case "Replace":
			if x.Pattern.String == nil || *x.Pattern.String != metaspace || x.Content != " " {
				return d, fmt.Errorf("Replace other than \"▁\" -> \" \"")
			}
			if fused {
				return d, fmt.Errorf("Replace after Fuse")
			}
			d.metaToSpace = true
			d.replaceBytes = d.byteFallback
		case "ByteFallback":
			if fused {
				return d, fmt.Errorf("ByteFallback after Fuse")
			}
			d.byteFallback = true
		case "Fuse":
			fused = true
		case "Strip":
			if x.Content != " " || x.Stop != 0 || i != len(list)-1 || (!fused && len(list) > 1) {
				return d, fmt.Errorf("Strip other than leading spaces at the end")
			}
			d.stripLeft = x.Start
		case "Metaspace":
			if len(list) != 1 || (x.Replacement != "" && x.Replacement != metaspace) {
				return d, fmt.Errorf("Metaspace inside a Sequence or with replacement %q", x.Replacement)
			}
			d.metaToSpace = true
			d.metaFirst = x.PrependScheme != "never"
		default:
			return d, fmt.Errorf("type %q", x.Type)
		}
	}
	if !d.byteLevel && !fused && len(list) > 1 {
		return d, fmt.Errorf("a Sequence without Fuse")
	}
	return d, nil
}

// parsePost finds the BOS that the post-processor puts before a single
// sequence (TemplateProcessing "single": [<bos>, $A]).
func parsePost(raw []byte, vocab *pieceIndex) (int32, bool, error) {
	if isNull(raw) {
		return -1, false, nil
	}
	var p hfPostProcessor
	if err := json.Unmarshal(raw, &p); err != nil {
		return -1, false, err
	}
	var find func(p hfPostProcessor) (int32, bool)
	find = func(p hfPostProcessor) (int32, bool) {
		switch p.Type {
		case "TemplateProcessing":
			if len(p.Single) > 0 && p.Single[0].SpecialToken != nil {
				name := p.Single[0].SpecialToken.ID
				if st, ok := p.SpecialTokens[name]; ok && len(st.IDs) == 1 {
					return int32(st.IDs[0]), true
				}
				if id, ok := vocab.get(name); ok {
					return id, true
				}
			}
		case "Sequence":
			for _, c := range p.Processors {
				if id, ok := find(c); ok {
					return id, true
				}
			}
		}
		return -1, false
	}
	id, ok := find(p)
	return id, ok, nil
}

// readSideConfig applies tokenizer_config.json / generation_config.json found
// next to tokenizer.json: the end-of-sequence tokens and BOS settings that
// tokenizer.json itself does not record. Missing or odd files are ignored:
// they only refine defaults.
func (t *Tokenizer) readSideConfig(dir string) {
	var eos []int32
	addEOS := func(id int32) {
		for _, e := range eos {
			if e == id {
				return
			}
		}
		if t.valid(id) {
			eos = append(eos, id)
		}
	}
	tokenName := func(v any) string {
		switch x := v.(type) {
		case string:
			return x
		case map[string]any:
			s, _ := x["content"].(string)
			return s
		}
		return ""
	}
	if data, err := mmap.ReadFile(filepath.Join(dir, "tokenizer_config.json"), maxSideConfig); err == nil {
		var cfg map[string]any
		if json.Unmarshal(data, &cfg) == nil {
			if id, ok := t.vocab.get(tokenName(cfg["eos_token"])); ok {
				addEOS(id)
			}
			if b, ok := cfg["add_bos_token"].(bool); ok && !b {
				t.addBOS = false
			} else if ok && b && t.bos < 0 {
				if id, ok := t.vocab.get(tokenName(cfg["bos_token"])); ok {
					t.bos, t.addBOS = id, true
				}
			}
			if t.bos < 0 {
				if id, ok := t.vocab.get(tokenName(cfg["bos_token"])); ok {
					t.bos = id
				}
			}
		}
	}
	if data, err := mmap.ReadFile(filepath.Join(dir, "generation_config.json"), maxSideConfig); err == nil {
		var cfg struct {
			EOS any `json:"eos_token_id"`
		}
		if json.Unmarshal(data, &cfg) == nil {
			switch x := cfg.EOS.(type) {
			case float64:
				addEOS(int32(x))
			case []any:
				for _, v := range x {
					if f, ok := v.(float64); ok {
						addEOS(int32(f))
					}
				}
			}
		}
	}
	t.eos = dedup(append(t.eos, eos...))
}

// defaultEOS are the end-of-sequence pieces that the well-known families
// spell the same way everywhere; only special tokens count.
func (t *Tokenizer) defaultEOS() []int32 {
	var out []int32
	for _, p := range []string{"<eos>", "</s>", "<|endoftext|>", "<end_of_turn>", "<turn|>", "<|im_end|>", "<|eot_id|>"} {
		if id, ok := t.vocab.get(p); ok && t.added.isSpecial(id) {
			out = append(out, id)
		}
	}
	return out
}

func dedup(ids []int32) []int32 {
	seen := map[int32]bool{}
	out := ids[:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
