package constrain

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

const personSchema = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string","enum":["a","b\"c"]}},"ok":{"type":"boolean"},"n":{"type":["number","null"]}},"required":["name","age","tags","ok","n"],"additionalProperties":false}`

func TestMatchBytes(t *testing.T) {
	cases := []struct {
		schema string
		text   string
		want   bool
	}{
		{personSchema, `{"name":"x","age":3,"tags":["a","b\"c"],"ok":true,"n":null}`, true},
		{personSchema, ` { "name" : "x\u00e9\n" , "age":-30,"tags":[],"ok":false,"n":1.5e+3}`, true},
		{personSchema, `{"age":3,"name":"x","tags":[],"ok":true,"n":null}`, false},
		{personSchema, `{"name":"x","age":3.5,"tags":[],"ok":true,"n":null}`, false},
		{personSchema, `{"name":"x","age":3,"tags":["c"],"ok":true,"n":null}`, false},
		{personSchema, `{"name":"x","age":03,"tags":[],"ok":true,"n":null}`, false},
		{personSchema, "{\"name\":\"\x01\",\"age\":3,\"tags\":[],\"ok\":true,\"n\":null}", false},
		{personSchema, "{\"name\":\"\xff\",\"age\":3,\"tags\":[],\"ok\":true,\"n\":null}", false},
		{personSchema, "{\"name\":\"é日本😀\",\"age\":3,\"tags\":[],\"ok\":true,\"n\":null}", true},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`, `{}`, true},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`, `{"b":1}`, true},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`, `{"a":"","b":1}`, true},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`, `{,"b":1}`, false},
		{`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},"$ref":"#/$defs/node"}`, `{"v":1,"next":{"v":2,"next":null}}`, true},
		{`{"const":{"k":[1,"x"]}}`, `{"k":[1,"x"]}`, true},
		{`{"const":{"k":[1,"x"]}}`, `{"k": [1,"x"]}`, false},
		{`{}`, `[1,{"a":[true,null]},"s"]`, true},
		{`{"type":"string"}`, `"abc`, false},
	}
	for _, c := range cases {
		g := mustSchema(t, c.schema)
		if got := matchString(t, g, c.text); got != c.want {
			t.Errorf("%s\n  %q: match = %v, want %v", c.schema, c.text, got, c.want)
		}
	}
}

func TestRandomWalksValidate(t *testing.T) {
	schemas := []string{
		personSchema,
		`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
		`{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}]}`,
	}
	v := NewVocab(byteVocab{extra: []string{`{"`, `":`, `","`, `"}`, `name`, `age`, `true`, `": "`, `}]`, `[{"`, ` `, `0.5`}})
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sc := range schemas {
		m, err := NewMatcher(mustSchema(t, sc), v)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for i := 0; i < 30; i++ {
			text, ok := randomWalk(t, m, rng, 400, 1000*boolInt(i < 3))
			if !ok {
				continue
			}
			done++
			if err := Validate(sc, text); err != nil {
				t.Errorf("%s: %v", sc, err)
			}
		}
		if done == 0 {
			t.Errorf("%s: no walk completed", sc)
		}
	}
}

// One Matcher serves concurrent requests (the server keeps one per schema):
// its caches are shared under a lock, the states are each request's own.
func TestMatcherConcurrent(t *testing.T) {
	m, err := NewMatcher(mustSchema(t, personSchema), NewVocab(byteVocab{extra: []string{`{"`, `":`, `","`}}))
	if err != nil {
		t.Fatal(err)
	}
	doc := `{"name":"x","age":3,"tags":["a"],"ok":true,"n":null}`
	done := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			s := m.Start()
			for i := 0; i < len(doc); i++ {
				s.Mask()
				if err := s.Advance(int32(doc[i])); err != nil {
					done <- err
					return
				}
			}
			if !s.Complete() {
				done <- fmt.Errorf("not complete")
				return
			}
			done <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
