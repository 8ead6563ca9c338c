package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"anechat/engine/constrain"
)

// structuredSchemas are response_format schemas stories260K finishes within
// a few dozen tokens (enums, booleans, bounded numbers).
var structuredSchemas = []string{
	`{"type":"object","properties":{"mood":{"enum":["happy","sad","angry"]},"ok":{"type":"boolean"},"n":{"type":"integer"}},"required":["mood","ok","n"],"additionalProperties":false}`,
	`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"null"},"c":{"enum":[1,2.5,"x",true,null]}},"required":["a","b","c"],"additionalProperties":false}`,
	`{"$defs":{"t":{"anyOf":[{"type":"object","properties":{"l":{"$ref":"#/$defs/t"},"r":{"$ref":"#/$defs/t"}},"required":["l","r"],"additionalProperties":false},{"type":"integer"}]}},"$ref":"#/$defs/t"}`,
}

func jsonSchemaFormat(schema string) map[string]any {
	return map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "reply", "strict": true, "schema": json.RawMessage(schema)}}
}

// response_format json_schema: every finished reply is JSON its schema's
// grammar matches, and the stream is the same at every width, greedy and
// sampled.
func TestResponseFormatJSONSchema(t *testing.T) {
	s := startServer(t, "", withCosts)
	finished := 0
	for i, sc := range structuredSchemas {
		g, err := constrain.CompileSchema([]byte(sc))
		if err != nil {
			t.Fatal(err)
		}
		for _, sampled := range []bool{false, true} {
			var want []string
			for _, w := range []any{1, 4, "auto", 8} {
				body := user(fmt.Sprintf("Reply %d in JSON", i), "max_tokens", 60, "response_format", jsonSchemaFormat(sc), "anechat", map[string]any{"width": w})
				if sampled {
					body["temperature"], body["seed"] = 0.8, 11
				}
				st := s.stream(t, "/v1/chat/completions", body)
				got := st.pieces()
				if want == nil {
					want = got
					text := st.text()
					t.Logf("schema %d sampled %v: %s %q", i, sampled, st.finish(), text)
					if st.finish() == "stop" {
						finished++
						if !json.Valid([]byte(text)) || !g.Match([]byte(text)) {
							t.Errorf("schema %d: reply %q does not match its schema", i, text)
						}
					}
					continue
				}
				if !slices.Equal(got, want) {
					t.Fatalf("schema %d sampled %v width %v: pieces\n%q\nwidth 1:\n%q", i, sampled, w, got, want)
				}
			}
		}
	}
	if finished < len(structuredSchemas) {
		t.Errorf("%d replies finished: the test does not see complete JSON", finished)
	}
	// The whole (not streamed) reply is the streamed one.
	body := user("Reply 0 in JSON", "max_tokens", 60, "response_format", jsonSchemaFormat(structuredSchemas[0]))
	r := s.post(t, "/v1/chat/completions", body, http.StatusOK)
	if st := s.stream(t, "/v1/chat/completions", body); st.text() != r.text() {
		t.Errorf("whole %q, streamed %q", r.text(), st.text())
	}
}

// response_format json_object: a JSON object (or, cut by max_tokens, the
// start of one).
func TestResponseFormatJSONObject(t *testing.T) {
	s := startServer(t, "")
	g, err := constrain.Compile(constrain.AnyObject())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"Once upon a time", "Give me JSON"} {
		r := s.post(t, "/v1/chat/completions", user(p, "max_tokens", 80, "response_format", map[string]any{"type": "json_object"}), http.StatusOK)
		text := r.text()
		if !strings.HasPrefix(strings.TrimLeft(text, " \n"), "{") {
			t.Errorf("%q: reply %q does not start an object", p, text)
		}
		if r.Choices[0].FinishReason == "stop" && (!json.Valid([]byte(text)) || !g.Match([]byte(text))) {
			t.Errorf("%q: finished reply %q is not a JSON object", p, text)
		}
	}
}

// Bad response formats are 400s naming the field, quickly, and leave the
// server working.
func TestResponseFormatErrors(t *testing.T) {
	s := startServer(t, "")
	many := make([]string, 100000)
	for i := range many {
		many[i] = fmt.Sprintf(`"%d"`, i) // 100k strings in under MaxSchemaBytes
	}
	const f = "response_format.json_schema.schema"
	for _, c := range []struct {
		format any
		param  string
	}{
		{map[string]any{"type": "xml"}, "response_format.type"},
		{map[string]any{"type": "json_schema"}, "response_format.json_schema"},
		{map[string]any{"type": "json_schema", "json_schema": map[string]any{"schema": map[string]any{}}}, "response_format.json_schema.name"},
		{map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x"}}, f},
		{jsonSchemaFormat(`"not a schema"`), f},
		{jsonSchemaFormat(`{"type":"object","properties":{"x":{"type":"string","pattern":"^a+$"}}}`), f + ".properties.x.pattern"},
		{jsonSchemaFormat(`{"$ref":"#"}`), f + ".$ref"},
		{jsonSchemaFormat(`{"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]}`), f},
		{jsonSchemaFormat(`{"type":"string","enum":[` + strings.Join(many, ",") + `]}`), f + ".enum"},
		{jsonSchemaFormat(`{"type":"object","properties":{"a":{"type":"integer","minimum":3}}}`), f + ".properties.a.minimum"},
		{map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "strict": "yes", "schema": map[string]any{}}}, "response_format.json_schema.strict"},
	} {
		t0 := time.Now()
		raw, _ := json.Marshal(c.format)
		name := string(raw[:min(len(raw), 120)])
		resp, b := s.do(t, http.MethodPost, "/v1/chat/completions", user("x", "response_format", c.format))
		var r reply
		if err := json.Unmarshal(b, &r); err != nil || r.Error == nil {
			t.Errorf("%s: body %.200s is not an error", name, b)
			continue
		}
		param := ""
		if r.Error.Param != nil {
			param = *r.Error.Param
		}
		if resp.StatusCode != http.StatusBadRequest || param != c.param || !strings.Contains(r.Error.Message, c.param) {
			t.Errorf("%s: status %d param %q (%.300s), want 400 %q", name, resp.StatusCode, param, r.Error.Message, c.param)
		}
		if d := time.Since(t0); d > 10*time.Second {
			t.Errorf("%s: answered in %v", name, d)
		}
	}
	s.post(t, "/v1/chat/completions", user("Once upon a time", "max_tokens", 3, "response_format", map[string]any{"type": "text"}), http.StatusOK)
}

// The caches behind response_format: least recently used out first, the
// same schema text (whatever its spacing) the same grammar.
func TestFormatCaches(t *testing.T) {
	c := lru[int, string]{max: 2}
	c.put(1, "a")
	c.put(2, "b")
	c.get(1) // 2 is now the least recently used
	c.put(3, "c")
	if c.get(2) != "" || c.get(1) != "a" || c.get(3) != "c" {
		t.Errorf("after put 1, 2, get 1, put 3: %v", c.m)
	}
	if got := c.put(3, "other"); got != "c" {
		t.Errorf("put of a present key returned %q, want the stored c", got)
	}
	g1, e := (&responseFormat{Type: "json_object"}).grammar()
	g2, e2 := (&responseFormat{Type: "json_object"}).grammar()
	if e != nil || e2 != nil || g1 != g2 {
		t.Errorf("json_object twice: %p %p (%v %v)", g1, g2, e, e2)
	}
	f := func(schema string) *constrain.Grammar {
		rf := &responseFormat{Type: "json_schema", JSONSchema: &schemaFormat{Name: "x", Schema: json.RawMessage(schema)}}
		g, e := rf.grammar()
		if e != nil {
			t.Fatal(e)
		}
		return g
	}
	if f(`{"type": "integer"}`) != f(`{"type":"integer"}`) || f(`{"type":"integer"}`) == f(`{"type":"number"}`) {
		t.Error("grammars not shared by schema text")
	}
}
