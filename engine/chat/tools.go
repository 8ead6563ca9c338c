package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"anechat/engine/chat/jinja"
)

// ToolFormat is how a model family writes a function call in its reply,
// as its chat template writes earlier calls into the history (the template
// is the model's own documentation of it).
type ToolFormat string

// The tool-call formats anechat parses.
const (
	// NoTools: the template does not render tools, or writes calls in a
	// format anechat does not parse.
	NoTools ToolFormat = ""
	// ToolsHermes is Qwen 2.5 and 3's (and Hermes'): each call a JSON
	// object in tags, after any text:
	//	<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
	ToolsHermes ToolFormat = "hermes"
	// ToolsLlama3 is Llama 3.1's JSON call: the whole reply one object
	//	{"name": "f", "parameters": {...}}
	// (after <|python_tag|>, a special token that decodes to nothing).
	ToolsLlama3 ToolFormat = "llama3"
	// ToolsGemma4 is Gemma 4's own tokens, after any text:
	//	<|tool_call>call:f{key:value,…}<tool_call|>
	// with strings between <|"|> tokens and keys bare.
	ToolsGemma4 ToolFormat = "gemma4"
)

// Tool is a function a conversation offers the model: the request's object
// as the client wrote it, in OpenAI's shape ({"type": "function",
// "function": {"name", "description", "parameters"}}), which the template
// reads (and often prints with tojson, so its key order is kept).
type Tool = json.RawMessage

// ErrNoTools marks a request with tools for a model whose chat template has
// no tool support (or writes calls in a format anechat does not parse).
var ErrNoTools = errors.New("chat: the model's chat template has no tool support")

// ToolFormatOf is the tool-call format of t: NoTools for the built-in
// formats and for a model's own template that does not render tools.
func ToolFormatOf(t Template) ToolFormat {
	if j, ok := t.(*Jinja); ok {
		return j.tools
	}
	return NoTools
}

// RenderTools renders msgs with tools offered, as Render does (with the
// generation prompt when addGenerationPrompt). Without tools it is Render;
// with tools, t must have tool support (ToolFormatOf), else the error wraps
// ErrNoTools. A tool that is not a JSON object wraps ErrConversation.
func RenderTools(ctx context.Context, t Template, msgs []Message, tools []Tool, addGenerationPrompt bool) ([]int32, error) {
	if len(tools) == 0 {
		return t.Render(ctx, msgs, addGenerationPrompt)
	}
	j, ok := t.(*Jinja)
	if !ok || j.tools == NoTools {
		return nil, fmt.Errorf("%w (format %s)", ErrNoTools, t.Name())
	}
	out, err := j.render(ctx, msgs, tools, addGenerationPrompt)
	if err != nil {
		return nil, err
	}
	return j.encode(out), nil
}

// maxJSONDepth bounds the nesting of JSON turned into template values (a
// tool's schema, a call's arguments).
const maxJSONDepth = 64

// jsonValue turns JSON into a template value as Python's json.loads makes
// it: objects keep their key order (a later duplicate key replaces the
// value, in the first one's place), integers stay integers. Strings and keys
// are untrusted: a client wrote them.
func jsonValue(data []byte) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := jsonNext(d, 0)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := d.Token(); err != io.EOF {
		return jinja.Value{}, errors.New("text after the JSON value")
	}
	return v, nil
}

func jsonNext(d *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Value{}, fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	tk, err := d.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch x := tk.(type) {
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.Bool(x), nil
	case string:
		return jinja.Untrusted(x), nil
	case json.Number:
		s := x.String()
		if !strings.ContainsAny(s, ".eE") {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return jinja.Value{}, fmt.Errorf("the integer %s is out of range", s)
			}
			return jinja.Int(n), nil
		}
		// Past float64's range Python's json.loads gives inf, as
		// ParseFloat does with its range error.
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !math.IsInf(f, 0) {
			return jinja.Value{}, fmt.Errorf("the number %s is out of range", s)
		}
		return jinja.Float(f), nil
	case json.Delim:
		if x == '[' {
			var items []jinja.Value
			for d.More() {
				v, err := jsonNext(d, depth+1)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			_, err := d.Token()
			return jinja.List(items...), err
		}
		var kv []jinja.Value
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return jinja.Value{}, err
			}
			v, err := jsonNext(d, depth+1)
			if err != nil {
				return jinja.Value{}, err
			}
			kv = append(kv, jinja.Untrusted(k.(string)), v)
		}
		_, err := d.Token()
		return jinja.Dict(kv...), err
	}
	return jinja.Value{}, fmt.Errorf("unexpected %v", tk)
}

// messageValue is a message as the template sees it, in the shape
// transformers' callers pass: role and content always; tool_calls (id,
// type "function", function with name and arguments, a dict when the
// arguments are a JSON object) only on a message that made calls, since
// templates test `'tool_calls' in message`; tool_call_id and name only when
// set.
func messageValue(m Message) jinja.Value {
	// Roles are one of four fixed words, so they are trusted (a template
	// may build control tokens from them, '<|' + role + '|>'); everything
	// else is what users or tools wrote.
	kv := []jinja.Value{jinja.Str("role"), jinja.Str(m.Role), jinja.Str("content"), jinja.Untrusted(m.Content)}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			args, err := jsonValue([]byte(c.Arguments))
			if err != nil || args.Kind() != jinja.KindDict {
				args = jinja.Untrusted(c.Arguments)
			}
			calls[i] = jinja.Dict(jinja.Str("id"), jinja.Untrusted(c.ID), jinja.Str("type"), jinja.Str("function"),
				jinja.Str("function"), jinja.Dict(jinja.Str("name"), jinja.Untrusted(c.Name), jinja.Str("arguments"), args))
		}
		kv = append(kv, jinja.Str("tool_calls"), jinja.List(calls...))
	}
	if m.ToolCallID != "" {
		kv = append(kv, jinja.Str("tool_call_id"), jinja.Untrusted(m.ToolCallID))
	}
	if m.Name != "" {
		kv = append(kv, jinja.Str("name"), jinja.Untrusted(m.Name))
	}
	return jinja.Dict(kv...)
}

// CheckTool reports whether a template can be given t: a JSON object whose
// numbers Python's json.loads would read (integers within 64 bits), nested
// at most 64 deep. RenderTools refuses a tool that is not.
func CheckTool(t Tool) error {
	v, err := jsonValue(t)
	if err == nil && v.Kind() != jinja.KindDict {
		err = errors.New("not a JSON object")
	}
	return err
}

// toolsValue is the tools list as the template sees it.
func toolsValue(tools []Tool) (jinja.Value, error) {
	if len(tools) == 0 {
		return jinja.None(), nil
	}
	list := make([]jinja.Value, len(tools))
	for i, t := range tools {
		v, err := jsonValue(t)
		if err != nil || v.Kind() != jinja.KindDict {
			if err == nil {
				err = errors.New("not a JSON object")
			}
			return jinja.Value{}, fmt.Errorf("%w: tools[%d]: %v", ErrConversation, i, err)
		}
		list[i] = v
	}
	return jinja.List(list...), nil
}

// The probe tool and call ToolFormat detection renders.
const (
	probeTool = `{"type": "function", "function": {"name": "anechatProbeTool", "description": "probe", ` +
		`"parameters": {"type": "object", "properties": {"anechatProbeArg": {"type": "string"}}, "required": ["anechatProbeArg"]}}}`
	probeName = "anechatProbeTool"
)

// detectTools finds the template's tool-call format: the template must
// print an offered tool, and write an assistant's earlier call in one of
// the formats anechat parses. A template that refuses the probe has no tool
// support; one stopped by a limit is an error.
func (j *Jinja) detectTools(ctx context.Context) (ToolFormat, error) {
	tools := []Tool{Tool(probeTool)}
	offer, err := j.render(ctx, []Message{{Role: RoleUser, Content: "Hi"}}, tools, true)
	if isLimit(err) {
		return NoTools, err
	}
	if err != nil || !strings.Contains(offer.Text, probeName) {
		return NoTools, nil
	}
	msgs := []Message{{Role: RoleUser, Content: "Hi"}, {Role: RoleAssistant, ToolCalls: []ToolCall{
		{ID: "call_probe", Name: probeName, Arguments: `{"anechatProbeArg": "x"}`}}}}
	call, err := j.render(ctx, msgs, tools, false)
	if isLimit(err) {
		return NoTools, err
	}
	if err != nil {
		return NoTools, nil
	}
	t := call.Text
	switch {
	case strings.Contains(t, `<|tool_call>call:`+probeName+`{`):
		return ToolsGemma4, nil
	case strings.Contains(t, `{"name": "`+probeName+`", "arguments": `):
		if i := strings.Index(t, `{"name": "`+probeName+`", "arguments": `); strings.HasSuffix(strings.TrimSpace(t[:i]), hermesOpen) {
			return ToolsHermes, nil
		}
	case strings.Contains(t, `{"name": "`+probeName+`", "parameters": `):
		return ToolsLlama3, nil
	}
	return NoTools, nil
}
