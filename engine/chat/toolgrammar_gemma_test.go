package chat

import (
	"context"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"anechat/engine/constrain"
)

// gemmaVocab is the 256 bytes, a few longer text tokens, and Gemma 4's call
// tokens as special ones (they decode to nothing; their pieces are the
// format's Markers).
type gemmaVocab struct{}

var gemmaSpecials = []string{"<|tool_call>", gemmaClose, gemmaQuote}
var gemmaExtra = []string{"call:", "get_weather", "location", "days", "Paris", "true", "12", ",", "<|", `"|`}

func (gemmaVocab) VocabSize() int { return 256 + len(gemmaExtra) + len(gemmaSpecials) }
func (gemmaVocab) TokenBytes(id int32) []byte {
	switch {
	case id < 256:
		return []byte{byte(id)}
	case int(id) < 256+len(gemmaExtra):
		return []byte(gemmaExtra[id-256])
	}
	return []byte(gemmaSpecials[int(id)-256-len(gemmaExtra)])
}
func (gemmaVocab) IsSpecial(id int32) bool { return int(id) >= 256+len(gemmaExtra) }
func (gemmaVocab) TokenID(p string) (int32, bool) {
	for i, s := range gemmaSpecials {
		if s == p {
			return int32(256 + len(gemmaExtra) + i), true
		}
	}
	return 0, false
}

// gemmaWalk writes a reply under m by random allowed tokens, spelled as the
// server reads them (MarkerText), stopping at random once complete.
func gemmaWalk(t *testing.T, m *constrain.Matcher, rng *rand.Rand) (string, bool) {
	t.Helper()
	v := gemmaVocab{}
	s := m.Start()
	var out strings.Builder
	for step := 0; step < 300; step++ {
		mask := s.Mask()
		var allowed []int32
		for id := int32(0); int(id) < v.VocabSize(); id++ {
			if mask[id/64]&(1<<(id%64)) != 0 {
				allowed = append(allowed, id)
			}
		}
		if s.Complete() && (len(allowed) == 0 || rng.IntN(3) == 0) {
			return out.String(), true
		}
		if len(allowed) == 0 {
			t.Fatalf("after %q: nothing allowed and not complete", out.String())
		}
		// Close strings and objects sooner than chance would.
		id := allowed[rng.IntN(len(allowed))]
		for _, c := range allowed {
			if v.IsSpecial(c) && rng.IntN(4) == 0 || len(v.TokenBytes(c)) == 1 && strings.ContainsRune("}]", rune(v.TokenBytes(c)[0])) && rng.IntN(3) == 0 {
				id = c
			}
		}
		if err := s.Advance(id); err != nil {
			t.Fatalf("after %q: allowed token %d refused: %v", out.String(), id, err)
		}
		text, piece := string(v.TokenBytes(id)), ""
		if v.IsSpecial(id) {
			text, piece = "", string(v.TokenBytes(id))
		}
		out.WriteString(ToolsGemma4.MarkerText(text, piece))
	}
	return out.String(), false
}

// A forced Gemma 4 call's grammar admits only replies that ParseCalls reads
// back as one call to an offered function, with arguments (JSON, once
// read) under its schema; and it admits the calls Gemma 4's template
// writes.
func TestCallGrammarGemma(t *testing.T) {
	nested := `{"type": "function", "function": {"name": "plan", "parameters": {"type": "object", "properties": {
		"stops": {"type": "array", "items": {"$ref": "#/$defs/stop"}},
		"mode": {"enum": ["car", "foot", null, 3]},
		"note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
		"fast": {"type": "boolean"}},
		"required": ["stops", "mode"], "additionalProperties": false,
		"$defs": {"stop": {"type": "object", "properties": {"at": {"type": "string"}, "km": {"type": "number"}}, "required": ["at"], "additionalProperties": false}}}}}`
	free := `{"type": "function", "function": {"name": "free"}}`
	tools := []Tool{Tool(weather), Tool(loose), Tool(nested), Tool(free)}
	schemas := map[string]*constrain.Grammar{}
	for _, tl := range tools {
		var fn struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(tl, &fn); err != nil {
			t.Fatal(err)
		}
		if g, err := constrain.CompileSchema(sortedSchema(t, fn.Function.Parameters)); err == nil {
			schemas[fn.Function.Name] = g
		}
	}
	e, err := ToolsGemma4.CallGrammar(tools, "")
	if err != nil {
		t.Fatal(err)
	}
	g, err := constrain.Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	m, err := constrain.NewMatcher(g, constrain.NewVocab(gemmaVocab{}))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(25, 4))
	names := map[string]int{}
	for i := 0; i < 300; i++ {
		reply, ok := gemmaWalk(t, m, rng)
		if !ok {
			continue
		}
		content, calls := ToolsGemma4.ParseCalls(reply)
		if len(calls) != 1 || strings.TrimSpace(content) != "" {
			t.Fatalf("%q: the grammar admits what ParseCalls reads as %q and %+v", reply, content, calls)
		}
		c := calls[0]
		names[c.Name]++
		if !json.Valid([]byte(c.Arguments)) {
			t.Fatalf("%q: arguments %s", reply, c.Arguments)
		}
		if sg := schemas[c.Name]; sg != nil && !sg.Match([]byte(c.Arguments)) {
			t.Errorf("%q: arguments %s are not under %s's schema", reply, c.Arguments, c.Name)
		}
	}
	for _, n := range []string{"get_weather", "search", "plan", "free"} {
		if names[n] == 0 {
			t.Errorf("no walk called %s (%v)", n, names)
		}
	}

	// Calls as Gemma 4's template writes them (bare keys, <|"|> strings);
	// and what the grammar must refuse though ParseCalls may read it.
	q := gemmaQuote
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{`<|tool_call>call:get_weather{days:3,location:` + q + `Paris` + q + `}<tool_call|>`, true},
		{` <|tool_call>call:get_weather{days:-2,location:` + q + `Paris, "France"` + q + `}<tool_call|>`, true},
		{`<|tool_call>call:plan{fast:true,mode:null,note:None,stops:[{at:` + q + `A` + q + `,km:1.5},{at:` + q + q + `}]}<tool_call|>`, true},
		{`<|tool_call>call:plan{mode:3,stops:[]}<tool_call|>`, true},
		{`<|tool_call>call:search{anything:[1,` + q + `x` + q + `,{k:None,l:null}]}<tool_call|>`, true}, // None: the template's null
		{`<|tool_call>call:free{}<tool_call|>`, true},
		{`<|tool_call>call:get_weather{location:` + q + `Paris` + q + `}<tool_call|>`, false},        // days missing
		{`<|tool_call>call:get_weather{location:` + q + `Paris` + q + `,days:3}<tool_call|>`, false}, // the schema's order, not the template's
		{`<|tool_call>call:get_weather{days:3,location: ` + q + `Paris` + q + `}<tool_call|>`, false},
		{`<|tool_call>call:plan{mode:` + q + `bus` + q + `,stops:[]}<tool_call|>`, false},
		{`<|tool_call>call:nope{}<tool_call|>`, false},
		{`Sure.<|tool_call>call:free{}<tool_call|>`, false},
		{`<|tool_call>call:free{}<tool_call|><|tool_call>call:free{}<tool_call|>`, false},
	} {
		if got := acceptsGemma(t, m, c.text); got != c.ok {
			t.Errorf("%q: accepted %v, want %v", c.text, got, c.ok)
		}
		if _, calls := ToolsGemma4.ParseCalls(c.text); c.ok && len(calls) != 1 {
			t.Errorf("%q: the grammar admits what ParseCalls does not read", c.text)
		}
	}

	named, err := ToolsGemma4.CallGrammar(tools, "free")
	if err != nil {
		t.Fatal(err)
	}
	ng, _ := constrain.Compile(named)
	nm, err := constrain.NewMatcher(ng, constrain.NewVocab(gemmaVocab{}))
	if err != nil {
		t.Fatal(err)
	}
	if !acceptsGemma(t, nm, `<|tool_call>call:free{a:1}<tool_call|>`) || acceptsGemma(t, nm, `<|tool_call>call:plan{mode:3,stops:[]}<tool_call|>`) {
		t.Error("a named function's grammar admits another or refuses it")
	}
	if _, err := ToolsGemma4.CallGrammar([]Tool{Tool(`{"type": "function", "function": {"name": "a b"}}`)}, ""); err == nil || !strings.Contains(err.Error(), "tools[0].function.name") {
		t.Errorf("a name Gemma 4 cannot spell: %v", err)
	}
	quoted := `{"type": "function", "function": {"name": "f", "strict": true, "parameters": {"type": "object", "properties": {"x": {"enum": ["a", "<|\"|>"]}}}}}`
	if _, err := ToolsGemma4.CallGrammar([]Tool{Tool(weather), Tool(quoted)}, ""); err == nil || !strings.HasPrefix(err.Error(), "tools[1].function.parameters.properties.x.enum[1]: ") {
		t.Errorf("an enum value Gemma 4 cannot spell: %v", err)
	}
	// Not strict: any object.
	e, err = ToolsGemma4.CallGrammar([]Tool{Tool(strings.Replace(quoted, `"strict": true, `, "", 1))}, "")
	if err != nil {
		t.Fatal(err)
	}
	g, _ = constrain.Compile(e)
	if m, _ = constrain.NewMatcher(g, constrain.NewVocab(gemmaVocab{})); !acceptsGemma(t, m, `<|tool_call>call:f{y:2}<tool_call|>`) {
		t.Error("a tool that is not strict, with a schema Gemma 4 cannot write, does not take any object")
	}
}

// acceptsGemma feeds text to m, Gemma's special pieces as their tokens and
// other bytes one by one, and reports whether it is a whole match.
func acceptsGemma(t *testing.T, m *constrain.Matcher, text string) bool {
	t.Helper()
	v := gemmaVocab{}
	s := m.Start()
	for i := 0; i < len(text); {
		id, n := int32(text[i]), 1
		for _, p := range gemmaSpecials {
			if strings.HasPrefix(text[i:], p) {
				id, _ = v.TokenID(p)
				n = len(p)
			}
		}
		if s.Advance(id) != nil {
			return false
		}
		i += n
	}
	return s.Complete()
}

// The calls Gemma 4's template writes (bare keys, <|"|> strings, None,
// Python's numbers), tokenized by Gemma 4's own tokenizer, are admitted by
// the forced call's grammar bound to its 262k vocabulary; and random walks
// over that vocabulary parse back as calls under the schema.
func TestCallGrammarGemmaTemplate(t *testing.T) {
	params := `{"type": "object", "properties": {
		"location": {"type": "string"}, "days": {"type": "integer"},
		"hourly": {"type": "array", "items": {"anyOf": [{"type": "boolean"}, {"type": "null"}, {"type": "number"}]}},
		"opts": {"type": "object", "properties": {"unit": {"enum": ["°C", "°F"]}, "odd key": {"type": "string"}}, "required": ["unit"], "additionalProperties": false}},
		"required": ["location", "days"], "additionalProperties": false}`
	tool := Tool(`{"type": "function", "function": {"name": "get_weather", "parameters": ` + params + `}}`)
	sg, err := constrain.CompileSchema(sortedSchema(t, []byte(params)))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"gemma4", "gemma4-31b"} {
		t.Run(id, func(t *testing.T) {
			m := hfModel(t, id)
			tmpl, err := ForModel(context.Background(), "any", m.tok, m.spec)
			if err != nil {
				t.Fatal(err)
			}
			j := tmpl.(*Jinja)
			e, err := ToolsGemma4.CallGrammar([]Tool{tool}, "")
			if err != nil {
				t.Fatal(err)
			}
			g, err := constrain.Compile(e)
			if err != nil {
				t.Fatal(err)
			}
			mt, err := constrain.NewMatcher(g, constrain.NewVocab(m.tok))
			if err != nil {
				t.Fatal(err)
			}
			for _, args := range []string{
				`{"location": "Paris \"centre\", <b>", "days": 3}`,
				`{"location": "", "days": -12, "hourly": [true, null, 2.5, 1e20, 1.0], "opts": {"unit": "°C", "odd key": "a\nb"}}`,
				`{"location": "東京", "days": 0, "hourly": [], "opts": {"unit": "°F"}}`,
			} {
				full, err := j.RenderText(context.Background(), []Message{{Role: RoleUser, Content: "Weather?"},
					{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: args}}}}, []Tool{tool}, false)
				if err != nil {
					t.Fatal(err)
				}
				i := strings.Index(full, "<|tool_call>")
				k := strings.Index(full, gemmaClose)
				if i < 0 || k < i {
					t.Fatalf("no call in %q", full)
				}
				call := full[i : k+len(gemmaClose)]
				s := mt.Start()
				for _, tid := range m.tok.Encode(call) {
					if err := s.Advance(tid); err != nil {
						t.Fatalf("%q: token %d (%q) refused", call, tid, m.tok.Piece(tid))
					}
				}
				if !s.Complete() {
					t.Errorf("%q: not a whole call", call)
				}
				if _, calls := ToolsGemma4.ParseCalls(call); len(calls) != 1 || !sameJSON(t, calls[0].Arguments, args) {
					t.Errorf("%q read back as %+v", call, calls)
				}
			}
			if id != "gemma4" {
				return // the same vocabulary: walk it once
			}
			// Random walks over the real vocabulary, most of which is
			// refused at each step.
			rng := rand.New(rand.NewPCG(4, 25))
			done := 0
			for w := 0; w < 6; w++ {
				s := mt.Start()
				var out []int32
				for step := 0; step < 80; step++ {
					mask := s.Mask()
					var allowed []int32
					for id, word := range mask {
						for ; word != 0; word &= word - 1 {
							allowed = append(allowed, int32(id*64+bits.TrailingZeros64(word)))
						}
					}
					if s.Complete() && (len(allowed) == 0 || rng.IntN(2) == 0) {
						break
					}
					if len(allowed) == 0 {
						t.Fatalf("after %q: nothing allowed", m.tok.Decode(out))
					}
					// Prefer closing tokens, or walks rarely end.
					tid := allowed[rng.IntN(len(allowed))]
					for _, a := range allowed {
						if p := m.tok.Piece(a); (p == "}" || p == "]" || p == gemmaQuote || p == gemmaClose || p == "3") && rng.IntN(2) == 0 {
							tid = a
						}
					}
					if err := s.Advance(tid); err != nil {
						t.Fatal(err)
					}
					out = append(out, tid)
				}
				if !s.Complete() {
					continue
				}
				done++
				reply := m.tok.Decode(out)
				content, calls := ToolsGemma4.ParseCalls(reply)
				if len(calls) != 1 || strings.TrimSpace(content) != "" || !sg.Match([]byte(calls[0].Arguments)) {
					t.Errorf("%q: read as %q, %+v", reply, content, calls)
				}
			}
			if done == 0 {
				t.Error("no walk completed")
			}
		})
	}
}

// sortedSchema is schema with every object's members sorted (Go sorts a
// map's keys when it marshals it): for names all in lower case, the order
// Gemma 4's template and a forced Gemma call write properties in, so the
// JSON grammar of the result checks a call's arguments as read back.
func sortedSchema(t *testing.T, schema []byte) []byte {
	t.Helper()
	if len(schema) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(schema, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
