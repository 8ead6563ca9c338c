package chat

import (
	"encoding/json"
	"errors"
	"fmt"

	"anechat/engine/constrain"
)

// CallGrammar is the grammar of a reply that is exactly one call, in the
// format's convention, to one of tools (to the one named only, when only is
// not ""): the call's markers, the function's name and its arguments, a
// JSON object under the function's parameters schema (for Gemma 4, the
// same object in its own notation, constrain.Gemma, between its tokens,
// properties in its template's order). A tool whose function is "strict":
// true must have a schema in the compiler's subset (else an error naming
// "tools[i].function.parameters…"; for Gemma 4 also a value its notation
// cannot write, a string spelling <|"|>); another one's
// arguments follow its schema when the subset holds it and are any JSON
// object otherwise, as OpenAI forces only the call's shape without strict.
// A tool without parameters takes any object. The reply may start with one
// space, which a SentencePiece tokenizer writes before a reply's first word.
func (f ToolFormat) CallGrammar(tools []Tool, only string) (constrain.Element, error) {
	var head, tail, argsKey string
	switch f {
	case ToolsHermes:
		head, tail, argsKey = hermesOpen+"\n", "\n"+hermesClose, "arguments"
	case ToolsLlama3:
		argsKey = "parameters"
	case ToolsGemma4:
	case NoTools:
		return constrain.Element{}, ErrNoTools
	default:
		return constrain.Element{}, fmt.Errorf("chat: unknown tool-call format %q", f)
	}
	var alts []constrain.Element
	for i, t := range tools {
		var fn struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
				Strict     bool            `json:"strict"`
			} `json:"function"`
		}
		if err := json.Unmarshal(t, &fn); err != nil || fn.Function.Name == "" {
			return constrain.Element{}, &constrain.Error{Path: fmt.Sprintf("tools[%d].function.name", i), Msg: "required"}
		}
		name := fn.Function.Name
		if only != "" && name != only {
			continue
		}
		args := constrain.AnyObject()
		if p := fn.Function.Parameters; len(p) > 0 && string(p) != "null" {
			e, err := constrain.Schema(p)
			var ce *constrain.Error
			switch {
			case err == nil:
				args = e
			case fn.Function.Strict && errors.As(err, &ce):
				return constrain.Element{}, ce.Prefixed(fmt.Sprintf("tools[%d].function.parameters", i))
			case fn.Function.Strict:
				return constrain.Element{}, err
			}
		}
		if f == ToolsGemma4 {
			if !gemmaName(name) {
				return constrain.Element{}, &constrain.Error{Path: fmt.Sprintf("tools[%d].function.name", i), Msg: "Gemma 4's calls cannot spell this name (no spaces or any of {}[]:,<>\")"}
			}
			args = constrain.Gemma(args)
			// A value the notation cannot write (a string spelling
			// <|"|>) is named here, inside its tool; as outside the
			// subset, a tool that is not strict then takes any object.
			if _, err := constrain.Compile(args); err != nil {
				var ce *constrain.Error
				switch {
				case !fn.Function.Strict:
					args = constrain.Gemma(constrain.AnyObject())
				case errors.As(err, &ce):
					return constrain.Element{}, ce.Prefixed(fmt.Sprintf("tools[%d].function.parameters", i))
				default:
					return constrain.Element{}, err
				}
			}
			alts = append(alts, constrain.Sequence(constrain.Token("<|tool_call>"), constrain.Literal("call:"+name),
				args, constrain.Token(gemmaClose)))
			continue
		}
		nameJSON, _ := json.Marshal(name) // a string always marshals
		alts = append(alts, constrain.Sequence(
			constrain.Literal(`{"name": `+string(nameJSON)+`, "`+argsKey+`": `), args, constrain.Literal("}")))
	}
	if len(alts) == 0 {
		return constrain.Element{}, &constrain.Error{Path: "tool_choice.function.name", Msg: fmt.Sprintf("%q is not one of the tools", only)}
	}
	return constrain.Sequence(constrain.Choice(constrain.Literal(" "), constrain.Sequence()),
		constrain.Literal(head), constrain.Choice(alts...), constrain.Literal(tail)), nil
}
