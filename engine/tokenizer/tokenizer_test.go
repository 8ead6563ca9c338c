package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"anechat/internal/testres"
)

// The 33 MB Gemma tokenizer is loaded once for all tests of the package.
var gemmaOnce struct {
	sync.Once
	tok *Tokenizer
	err error
}

func gemma(tb testing.TB) *Tokenizer {
	tb.Helper()
	path := testres.Gemma3Tokenizer(tb)
	gemmaOnce.Do(func() { gemmaOnce.tok, gemmaOnce.err = Load(path) })
	if gemmaOnce.err != nil {
		tb.Fatal(gemmaOnce.err)
	}
	return gemmaOnce.tok
}

// expectation is one line of a *.jsonl.gz fixture written by testdata/gen.py.
type expectation struct {
	S    *string `json:"s"`
	Enc  []int32 `json:"enc"`
	EncS []int32 `json:"encs"`
	Dec  string  `json:"dec"`
	DecS string  `json:"decs"`
	IDs  []int32 `json:"ids"`
}

func readExpectations(tb testing.TB, name string) []expectation {
	tb.Helper()
	return readJSONL[expectation](tb, name)
}

// readJSONL reads a gzipped file of one JSON object per line from testdata.
func readJSONL[T any](tb testing.TB, name string) []T {
	tb.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var out []T
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e T
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			tb.Fatalf("%s line %d: %v", name, len(out)+1, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// checkExpectations compares every fixture entry: both encodings, the decode
// of each, the decode of random id sequences, and streaming decode.
func checkExpectations(t *testing.T, tok *Tokenizer, exps []expectation, minStrings int) {
	strings, seqs, failures := 0, 0, 0
	fail := func(format string, args ...any) {
		failures++
		if failures <= 15 {
			t.Errorf(format, args...)
		}
	}
	for _, e := range exps {
		if e.S == nil {
			seqs++
			if got := tok.Decode(e.IDs); got != e.Dec {
				fail("Decode(%v) = %q, want %q", e.IDs, got, e.Dec)
			}
			if got := streamAll(tok, e.IDs); got != e.Dec {
				fail("stream decode of %v = %q, want %q", e.IDs, got, e.Dec)
			}
			continue
		}
		strings++
		s := *e.S
		if got := tok.Encode(s); !slices.Equal(got, e.Enc) {
			fail("Encode(%q)\n got %v\nwant %v", short(s), got, e.Enc)
		}
		if got := tok.EncodeSpecial(s); !slices.Equal(got, e.EncS) {
			fail("EncodeSpecial(%q)\n got %v\nwant %v", short(s), got, e.EncS)
		}
		if got := tok.Decode(e.Enc); got != e.Dec {
			fail("Decode(Encode(%q)) = %q, want %q", short(s), short(got), short(e.Dec))
		}
		if got := tok.Decode(e.EncS); got != e.DecS {
			fail("Decode(EncodeSpecial(%q)) = %q, want %q", short(s), short(got), short(e.DecS))
		}
		if got := streamAll(tok, e.EncS); got != e.DecS {
			fail("stream decode of EncodeSpecial(%q) = %q, want %q", short(s), short(got), short(e.DecS))
		}
	}
	if failures > 15 {
		t.Errorf("... %d failures in all", failures)
	}
	if strings < minStrings {
		t.Errorf("fixture has %d strings, want at least %d", strings, minStrings)
	}
	t.Logf("compared %d strings and %d id sequences", strings, seqs)
}

func streamAll(tok *Tokenizer, ids []int32) string {
	s := tok.NewStream()
	var out string
	for _, id := range ids {
		out += s.Next(id)
	}
	return out + s.Flush()
}

func short(s string) string {
	if len(s) > 120 {
		return s[:120] + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return s
}

func TestGemma3MatchesHuggingFace(t *testing.T) {
	tok := gemma(t)
	checkExpectations(t, tok, readExpectations(t, "gemma3.jsonl.gz"), 2000)
}

func TestGemma3Facts(t *testing.T) {
	tok := gemma(t)
	if got := tok.VocabSize(); got != 262145 {
		t.Errorf("VocabSize = %d, want 262145 (262144 pieces + <image_soft_token>)", got)
	}
	if !tok.AddsBOS() || tok.BOS() != 2 {
		t.Errorf("AddsBOS=%v BOS=%d, want true 2", tok.AddsBOS(), tok.BOS())
	}
	if got := tok.EOS(); !slices.Equal(got, []int32{1, 106}) {
		t.Errorf("EOS = %v, want [1 106]", got)
	}
	for piece, want := range map[string]int32{"<start_of_turn>": 105, "<end_of_turn>": 106, "\n": 107, "<0x0A>": 248} {
		if id, ok := tok.TokenID(piece); !ok || id != want {
			t.Errorf("TokenID(%q) = %d %v, want %d", piece, id, ok, want)
		}
	}
	// Special-token text is plain text for Encode, a control token for EncodeSpecial.
	if ids := tok.Encode("<end_of_turn>"); slices.Contains(ids, 106) {
		t.Errorf("Encode(<end_of_turn>) = %v contains the control token", ids)
	}
	if ids := tok.EncodeSpecial("<end_of_turn>"); !slices.Equal(ids, []int32{106}) {
		t.Errorf("EncodeSpecial(<end_of_turn>) = %v, want [106]", ids)
	}
	if fp := tok.Fingerprint(); len(fp) != 32 || fp != tok.Fingerprint() {
		t.Errorf("Fingerprint = %q", fp)
	}
}

// TestQwen3MatchesHuggingFace: the real Qwen 3 tokenizer.json (NFC
// normalizer, Qwen 2's pre-tokenizer regex, byte-level BPE) loads and
// encodes and decodes every string of qwen3.jsonl.gz as Hugging Face's
// tokenizers does, decomposed and composed forms included.
func TestQwen3MatchesHuggingFace(t *testing.T) {
	tok, err := Load(testres.NpmTokenizer(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	checkExpectations(t, tok, readExpectations(t, "qwen3.jsonl.gz"), 1500)
	// NFC is part of the encoding: a decomposed é is the composed one's ids.
	if a, b := tok.Encode("caf\u00e9"), tok.Encode("cafe\u0301"); !slices.Equal(a, b) {
		t.Errorf("Encode(composed) %v != Encode(decomposed) %v", a, b)
	}
}
