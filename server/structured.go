package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"anechat/engine/constrain"
	"anechat/engine/spec"
	"anechat/engine/tokenizer"
)

// responseFormat is "response_format": "text", "json_object" (any JSON
// object) or "json_schema" (a JSON value under json_schema.schema, OpenAI's
// strict subset), enforced by constrained decoding (engine/constrain).
type responseFormat struct {
	Type       string        `json:"type"`
	JSONSchema *schemaFormat `json:"json_schema"`
}

// schemaFormat is response_format.json_schema. Strict is read, not needed:
// the schema is always enforced.
type schemaFormat struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// grammar compiles the format: nil for text. A schema outside the subset
// (or past a limit) is a 400 naming the field inside it
// ("response_format.json_schema.schema.properties.x.pattern").
func (f *responseFormat) grammar() (*constrain.Grammar, *apiError) {
	if f == nil {
		return nil, nil
	}
	switch f.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		if g := formats.get("json_object"); g != nil {
			return g, nil
		}
		g, err := constrain.Compile(constrain.AnyObject())
		if err != nil {
			return nil, badField("response_format", "%v", err)
		}
		return formats.put("json_object", g), nil
	case "json_schema":
	default:
		return nil, badField("response_format.type", "%q: want \"text\", \"json_object\" or \"json_schema\"", f.Type)
	}
	js := f.JSONSchema
	if js == nil {
		return nil, badField("response_format.json_schema", "required with \"type\": \"json_schema\": {\"name\": ..., \"schema\": {...}}")
	}
	if js.Name == "" {
		return nil, badField("response_format.json_schema.name", "required")
	}
	const field = "response_format.json_schema.schema"
	if len(js.Schema) == 0 || string(js.Schema) == "null" {
		return nil, badField(field, "required: a JSON schema object")
	}
	var key bytes.Buffer
	if json.Compact(&key, js.Schema) == nil {
		if g := formats.get(key.String()); g != nil {
			return g, nil
		}
	}
	g, err := constrain.CompileSchema(js.Schema)
	var ce *constrain.Error
	if errors.As(err, &ce) {
		p := ce.Prefixed(field)
		return nil, badField(p.Path, "%s", p.Msg)
	}
	if err != nil {
		return nil, badField(field, "%v", err)
	}
	return formats.put(key.String(), g), nil
}

// formats keeps the grammars of the latest response formats by their
// compact text, and matchers the latest grammars bound to a vocabulary: a
// client that sends one schema again and again gets the masks computed for
// its earlier requests (a Matcher caches them).
var formats = lru[string, *constrain.Grammar]{max: 16}

var matchers = lru[matcherKey, *constrain.Matcher]{max: 4}

type matcherKey struct {
	g *constrain.Grammar
	v *constrain.Vocab
}

// lru is a small map that forgets its least recently used entry past max.
type lru[K comparable, V any] struct {
	mu   sync.Mutex
	max  int
	keys []K // least recently used first
	m    map[K]V
}

func (c *lru[K, V]) get(k K) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	if ok {
		i := slices.Index(c.keys, k)
		c.keys = append(slices.Delete(c.keys, i, i+1), k)
	}
	return v
}

// put stores v under k, unless k is there already: it returns the stored
// value, so concurrent requests share one.
func (c *lru[K, V]) put(k K, v V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[k]; ok {
		return old
	}
	if c.m == nil {
		c.m = map[K]V{}
	}
	c.m[k] = v
	c.keys = append(c.keys, k)
	if len(c.keys) > c.max {
		delete(c.m, c.keys[0])
		c.keys = c.keys[1:]
	}
	return v
}

// vocabs keeps the matching vocabulary of the tokenizers in use: building
// one sorts the whole vocabulary, so it is built once per loaded model (a
// model switch forgets the oldest).
var vocabs = lru[*tokenizer.Tokenizer, *constrain.Vocab]{max: 2}

// vocabFor returns tok's matching vocabulary.
func vocabFor(tok *tokenizer.Tokenizer) *constrain.Vocab {
	if v := vocabs.get(tok); v != nil {
		return v
	}
	return vocabs.put(tok, constrain.NewVocab(tok))
}

// constraint binds g to the model's tokenizer for one reply (nil g: none).
func constraint(g *constrain.Grammar, tok *tokenizer.Tokenizer) (spec.Constraint, error) {
	if g == nil {
		return nil, nil
	}
	v := vocabFor(tok)
	m := matchers.get(matcherKey{g, v})
	if m == nil {
		var err error
		if m, err = constrain.NewMatcher(g, v); err != nil {
			return nil, err
		}
		m = matchers.put(matcherKey{g, v}, m)
	}
	return spec.Grammar(m.Start()), nil
}
