package constrain

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// byteVocab is a vocabulary of the 256 single bytes plus extra multi-byte
// tokens and one special token (id 256+len(extra), piece "<eot>").
type byteVocab struct{ extra []string }

func (v byteVocab) VocabSize() int { return 256 + len(v.extra) + 1 }

func (v byteVocab) TokenBytes(id int32) []byte {
	switch {
	case id < 256:
		return []byte{byte(id)}
	case int(id) < 256+len(v.extra):
		return []byte(v.extra[id-256])
	case int(id) == 256+len(v.extra):
		return []byte("<eot>")
	}
	return nil
}

func (v byteVocab) IsSpecial(id int32) bool { return int(id) == 256+len(v.extra) }

func (v byteVocab) TokenID(p string) (int32, bool) {
	if p == "<eot>" {
		return int32(256 + len(v.extra)), true
	}
	for i, e := range v.extra {
		if e == p {
			return int32(256 + i), true
		}
	}
	return 0, false
}

// matchString reports whether text is a complete match of g, feeding it
// byte by byte; it also checks every byte it feeds was in the mask.
func matchString(t *testing.T, g *Grammar, text string) bool {
	t.Helper()
	m, err := NewMatcher(g, NewVocab(byteVocab{}))
	if err != nil {
		t.Fatal(err)
	}
	s := m.Start()
	for i := 0; i < len(text); i++ {
		mask := s.Mask()
		inMask := mask[text[i]/64]&(1<<(text[i]%64)) != 0
		err := s.Advance(int32(text[i]))
		if inMask != (err == nil) {
			t.Fatalf("%q at byte %d: mask says %v, Advance says %v", text, i, inMask, err)
		}
		if err != nil {
			return false
		}
	}
	return s.Complete()
}

func mustSchema(t testing.TB, src string) *Grammar {
	t.Helper()
	g, err := CompileSchema([]byte(src))
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return g
}

// validate checks a decoded JSON value against a schema of the subset (an
// independent check of the grammar, written from the JSON Schema rules).
func validate(root, s any, v any, path string) error {
	sm, ok := s.(map[string]any)
	if !ok {
		if s == true {
			return nil
		}
		return fmt.Errorf("%s: bad schema", path)
	}
	if ref, ok := sm["$ref"].(string); ok {
		target := root
		for _, tok := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
			target = target.(map[string]any)[tok]
		}
		return validate(root, target, v, path)
	}
	if alts, ok := sm["anyOf"].([]any); ok {
		for _, a := range alts {
			if validate(root, a, v, path) == nil {
				return nil
			}
		}
		return fmt.Errorf("%s: no anyOf alternative matches", path)
	}
	if c, ok := sm["const"]; ok {
		sm = map[string]any{"enum": []any{c}}
	}
	if e, ok := sm["enum"].([]any); ok {
		vb, _ := json.Marshal(v)
		for _, x := range e {
			xb, _ := json.Marshal(x)
			if string(xb) == string(vb) {
				return nil
			}
		}
		return fmt.Errorf("%s: %s not in enum", path, vb)
	}
	types := []any{}
	switch t := sm["type"].(type) {
	case string:
		types = []any{t}
	case []any:
		types = t
	case nil:
		return nil
	}
	var errs []string
	for _, t := range types {
		err := validateType(root, sm, t.(string), v, path)
		if err == nil {
			return nil
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}

func validateType(root any, sm map[string]any, typ string, v any, path string) error {
	switch typ {
	case "object":
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not an object", path)
		}
		props, _ := sm["properties"].(map[string]any)
		for _, r := range anySlice(sm["required"]) {
			if _, ok := o[r.(string)]; !ok {
				return fmt.Errorf("%s: missing %s", path, r)
			}
		}
		for k, x := range o {
			ps, ok := props[k]
			if !ok {
				if sm["additionalProperties"] == false {
					return fmt.Errorf("%s: extra property %s", path, k)
				}
				continue
			}
			if err := validate(root, ps, x, path+"."+k); err != nil {
				return err
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%s: not an array", path)
		}
		if it, ok := sm["items"]; ok {
			for i, x := range a {
				if err := validate(root, it, x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("%s: not a string", path)
		}
	case "number":
		if _, ok := v.(json.Number); !ok {
			return fmt.Errorf("%s: not a number", path)
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok || strings.ContainsAny(string(n), ".eE") {
			return fmt.Errorf("%s: not an integer", path)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("%s: not a boolean", path)
		}
	case "null":
		if v != nil {
			return fmt.Errorf("%s: not null", path)
		}
	}
	return nil
}

func anySlice(x any) []any { s, _ := x.([]any); return s }

// Validate parses text as JSON and checks it against schema.
func Validate(schema, text string) error {
	var root any
	if err := json.Unmarshal([]byte(schema), &root); err != nil {
		return err
	}
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("not JSON: %v: %q", err, text)
	}
	if d.More() {
		return fmt.Errorf("trailing data: %q", text)
	}
	return validate(root, root, v, "$")
}

// randomWalk generates text under m by picking random allowed tokens
// (stopping with probability pStop once complete), checking the mask
// against Advance on every token of the vocabulary for the first fullSteps tokens.
func randomWalk(t *testing.T, m *Matcher, rng *rand.Rand, maxTokens int, fullSteps int) (string, bool) {
	t.Helper()
	s := m.Start()
	var out []byte
	for step := 0; step < maxTokens; step++ {
		mask := s.Mask()
		var allowed []int32
		for id := 0; id < m.v.size; id++ {
			if mask[id/64]&(1<<(id%64)) != 0 {
				allowed = append(allowed, int32(id))
			}
		}
		if step < fullSteps {
			for id := 0; id < m.v.size; id++ {
				c := s.Clone()
				err := c.Advance(int32(id))
				in := mask[id/64]&(1<<(id%64)) != 0
				if in != (err == nil) {
					t.Fatalf("after %q: token %d (%q): mask %v, Advance %v", out, id, m.v.text[id], in, err)
				}
			}
		}
		if s.Complete() && (len(allowed) == 0 || rng.IntN(4) == 0) {
			return string(out), true
		}
		if len(allowed) == 0 {
			t.Fatalf("after %q: nothing allowed and not complete", out)
		}
		id := allowed[rng.IntN(len(allowed))]
		if err := s.Advance(id); err != nil {
			t.Fatalf("after %q: allowed token %d refused: %v", out, id, err)
		}
		out = append(out, m.v.text[id]...)
	}
	return string(out), false
}
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
