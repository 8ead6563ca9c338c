package spec_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
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
// loop, greedy and sampled, on every schema and prompt; every finished
// reply validates against its schema.
func TestConstrainedWidthsEqualPlainLoop(t *testing.T) {
	b, tok, v := constrainedStories(t)
	prompts := storiesPrompts(t, b, 3)
	finished, drafted, accepted := 0, 0, 0
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
						got, st := generate(t, b, &spec.Decoder{Lookahead: w == 0}, p, spec.Request{
							MaxTokens: maxTokens, Width: w, Sampler: newSampler(), Ungated: ungated,
							Constraint: spec.Grammar(m.Start()),
						})
						drafted += st.Drafted
						accepted += st.Accepted
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
