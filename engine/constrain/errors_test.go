package constrain

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSchemaErrorsNamePath(t *testing.T) {
	many := make([]string, 100000)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprint("v", i))
	}
	deep := strings.Repeat(`{"type":"array","items":`, 5000) + `{}` + strings.Repeat(`}`, 5000)
	cases := []struct{ schema, path, msg string }{
		{`{"type":"object",`, "", "not valid JSON"},
		{`{"type":"object","properties":{"x":{"type":"string","pattern":"^a"}}}`, "properties.x.pattern", `"pattern" is not supported`},
		{`{"type":"strin"}`, "type", "unknown type"},
		{`{"$ref":"#"}`, "$ref", "$ref cycle"},
		{`{"anyOf":[{"$ref":"#"},{"type":"null"}]}`, "", "$ref cycle"},
		{`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "$defs.a.$ref", "$ref cycle"},
		{`{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}`, "", "no finite JSON value"},
		{`{"type":"array","items":{"$ref":"#/$defs/nope"}}`, "items.$ref", "does not resolve"},
		{`{"$ref":"http://x/y.json"}`, "$ref", "only references inside"},
		{`{"type":"object","properties":{"a":{}},"required":["b"]}`, "required[0]", "must name a property"},
		{`{"type":"string","enum":[` + strings.Join(many, ",") + `]}`, "enum", "more than 1000"},
		{deep, "", "nested deeper"},
		{`{"anyOf":[]}`, "anyOf", "non-empty"},
		{`{"type":"object","additionalProperties":{"type":"string"}}`, "additionalProperties", "only false or true"},
		{`{"type":"integer","enum":[1,"a"]}`, "enum[1]", "not of the schema's type"},
		{`false`, "", "admits no value"},
		{`{"type":"array","items":[{}]}`, "items", "tuple"},
	}
	for _, c := range cases {
		t0 := time.Now()
		_, err := CompileSchema([]byte(c.schema))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%.80s: err = %v, want an *Error", c.schema, err)
			continue
		}
		if e.Path != c.path || !strings.Contains(e.Msg, c.msg) {
			t.Errorf("%.80s: error %q (path %q), want path %q and %q", c.schema, err, e.Path, c.path, c.msg)
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("%.80s: took %v", c.schema, d)
		}
	}
}

func TestErrorPrefixed(t *testing.T) {
	e := &Error{Path: "properties.x.pattern", Msg: "no"}
	if got := e.Prefixed("response_format.json_schema.schema").Error(); got != "response_format.json_schema.schema.properties.x.pattern: no" {
		t.Errorf("got %q", got)
	}
	if got := (&Error{Msg: "no"}).Prefixed("a.b").Error(); got != "a.b: no" {
		t.Errorf("got %q", got)
	}
}

// Limits hold on large inputs: too many properties, too many enum bytes, a
// schema past MaxSchemaBytes.
func TestSchemaLimits(t *testing.T) {
	var props []string
	for i := 0; i <= MaxProperties; i++ {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"integer"}`, i))
	}
	_, err := CompileSchema([]byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `}}`))
	if err == nil || !strings.Contains(err.Error(), "properties") {
		t.Errorf("too many properties: %v", err)
	}
	long := strings.Repeat("x", MaxEnumBytes)
	_, err = CompileSchema([]byte(`{"enum":["` + long + `"]}`))
	if err == nil || !strings.Contains(err.Error(), "bytes in total") {
		t.Errorf("enum bytes: %v", err)
	}
	_, err = CompileSchema([]byte(`{"description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`))
	if err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("schema bytes: %v", err)
	}
	// Within the limits, a large schema compiles to a bounded automaton.
	g, err := CompileSchema([]byte(`{"type":"object","properties":{` + strings.Join(props[:MaxProperties], ",") + `}}`))
	if err != nil {
		t.Fatal(err)
	}
	if g.Nodes() > MaxNodes {
		t.Errorf("%d nodes", g.Nodes())
	}
}

// Composition: the shape a tool call takes (literal text around a JSON
// value, a choice between functions, a control token).
func TestSequenceChoiceToken(t *testing.T) {
	args, err := Schema([]byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string) Element {
		return Sequence(Literal(`<tool_call>`+"\n"+`{"name": "`+name+`", "arguments": `), args, Literal("}\n</tool_call>"))
	}
	g, err := Compile(Choice(call("get_weather"), call("get_time")))
	if err != nil {
		t.Fatal(err)
	}
	ok := "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>"
	if !matchString(t, g, ok) {
		t.Errorf("%q not matched", ok)
	}
	if matchString(t, g, strings.Replace(ok, "get_time", "get_date", 1)) {
		t.Error("unknown function matched")
	}
	if _, err := Compile(Choice()); err == nil {
		t.Error("empty Choice compiled")
	}
	// A control token by piece.
	g, err = Compile(Sequence(Token("<eot>"), Literal("x")))
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMatcher(g, NewVocab(byteVocab{}))
	if err != nil {
		t.Fatal(err)
	}
	s := m.Start()
	if mask := s.Mask(); mask[256/64]&(1<<(256%64)) == 0 || mask[0] != 0 {
		t.Errorf("mask before <eot> = %x", mask[:5])
	}
	if err := s.Advance(256); err != nil {
		t.Fatal(err)
	}
	if err := s.Advance('x'); err != nil || !s.Complete() {
		t.Errorf("after <eot> x: %v complete=%v", err, s.Complete())
	}
	if _, err := NewMatcher(mustCompile(t, Token("<nope>")), NewVocab(byteVocab{})); err == nil {
		t.Error("a piece the vocabulary lacks was bound")
	}
}

func mustCompile(t *testing.T, e Element) *Grammar {
	g, err := Compile(e)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func FuzzSchema(f *testing.F) {
	f.Add([]byte(personSchema))
	f.Add([]byte(`{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`))
	f.Add([]byte(`{"type":["string","null"],"enum":["a",null]}`))
	f.Fuzz(func(t *testing.T, src []byte) {
		g, err := CompileSchema(src)
		if err != nil {
			return
		}
		m, err := NewMatcher(g, NewVocab(byteVocab{}))
		if err != nil {
			t.Fatal(err)
		}
		s := m.Start()
		for i := 0; i < 50; i++ {
			mask := s.Mask()
			id := -1
			for w, x := range mask {
				if x != 0 {
					for b := 0; b < 64; b++ {
						if x&(1<<b) != 0 {
							id = w*64 + b
						}
					}
				}
			}
			if id < 0 {
				if !s.Complete() {
					t.Fatalf("%s: stuck", src)
				}
				return
			}
			if err := s.Advance(int32(id)); err != nil {
				t.Fatal(err)
			}
		}
	})
}
