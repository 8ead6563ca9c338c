package server

import (
	"encoding/json"
	"errors"
	"sync"

	"anechat/engine/constrain"
	"anechat/engine/spec"
	"anechat/engine/tokenizer"
)

// responseFormat is "response_format": "text", "json_object" (any JSON
// object) or "json_schema" (a JSON value under json_schema.schema, OpenAI's
// strict subset), enforced by constrained decoding (engine/constrain).
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"json_schema"`
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
		g, err := constrain.Compile(constrain.AnyObject())
		if err != nil {
			return nil, badField("response_format", "%v", err)
		}
		return g, nil
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
	g, err := constrain.CompileSchema(js.Schema)
	var ce *constrain.Error
	if errors.As(err, &ce) {
		p := ce.Prefixed(field)
		return nil, badField(p.Path, "%s", p.Msg)
	}
	if err != nil {
		return nil, badField(field, "%v", err)
	}
	return g, nil
}

// vocabs keeps the matching vocabulary of the tokenizers in use: building
// one sorts the whole vocabulary, so it is built once per loaded model.
// Only the latest few are kept (a model switch drops the oldest).
var vocabs struct {
	sync.Mutex
	list []vocabEntry
}

type vocabEntry struct {
	tok *tokenizer.Tokenizer
	v   *constrain.Vocab
}

const keptVocabs = 2

// vocabFor returns tok's matching vocabulary.
func vocabFor(tok *tokenizer.Tokenizer) *constrain.Vocab {
	vocabs.Lock()
	defer vocabs.Unlock()
	for _, e := range vocabs.list {
		if e.tok == tok {
			return e.v
		}
	}
	v := constrain.NewVocab(tok)
	vocabs.list = append(vocabs.list, vocabEntry{tok, v})
	if len(vocabs.list) > keptVocabs {
		vocabs.list = vocabs.list[1:]
	}
	return v
}

// constraint binds g to the model's tokenizer for one reply (nil g: none).
func constraint(g *constrain.Grammar, tok *tokenizer.Tokenizer) (spec.Constraint, error) {
	if g == nil {
		return nil, nil
	}
	m, err := constrain.NewMatcher(g, vocabFor(tok))
	if err != nil {
		return nil, err
	}
	return spec.Grammar(m.Start()), nil
}
