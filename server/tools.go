package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"anechat/engine/chat"
	"anechat/engine/constrain"
	"anechat/engine/tokenizer"
	"anechat/internal/sessions"
)

// Function calling (OpenAI's tools, tool_choice, tool and assistant
// tool_calls messages). The model's own chat template renders the tools and
// the calls (chat.RenderTools), and the reply is parsed into calls by its
// family's convention (chat.ToolFormat). These functions know OpenAI's JSON
// shapes but no handler, so the Ollama API can share them.

// maxTools bounds the tools of a request (OpenAI's limit).
const maxTools = 128

// functionName is OpenAI's rule for a function's name.
var functionName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// toolChoice is what a request lets the model do with its tools.
type toolChoice struct {
	// mode is "auto" (the model may call), "none" (the tools are not
	// offered and the reply is text), "required" (it must call one) or
	// "function" (it must call name); the last two are enforced by
	// constrained decoding (forcedCall).
	mode string
	name string
}

// toolJob is a chat request's tools, checked.
type toolJob struct {
	tools  []chat.Tool // as the template sees them; nil when none are offered
	choice toolChoice
}

// checkTools validates OpenAI tools: each {"type": "function", "function":
// {"name", "description", "parameters"}} with a name of letters, digits, _
// and - (at most 64), names unique, parameters a JSON schema object. It
// returns them as the template sees them (the client's objects) and their
// names. field names the request's list ("tools").
func checkTools(field string, raw []json.RawMessage) ([]chat.Tool, []string, *apiError) {
	if len(raw) > maxTools {
		return nil, nil, badField(field, "%d tools: at most %d", len(raw), maxTools)
	}
	tools := make([]chat.Tool, len(raw))
	names := make([]string, len(raw))
	seen := map[string]int{}
	for i, r := range raw {
		at := fmt.Sprintf("%s[%d]", field, i)
		var t struct {
			Type     *string                    `json:"type"`
			Function map[string]json.RawMessage `json:"function"`
		}
		if !isJSONObject(r) || json.Unmarshal(r, &t) != nil {
			return nil, nil, badField(at, "want an object {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": {...}}}")
		}
		if t.Type == nil || *t.Type != "function" {
			return nil, nil, badField(at+".type", "want \"function\" (the only kind of tool)")
		}
		if t.Function == nil {
			return nil, nil, badField(at+".function", "required: an object with the function's name, description and parameters")
		}
		var name string
		if n, ok := t.Function["name"]; !ok || json.Unmarshal(n, &name) != nil || name == "" {
			return nil, nil, badField(at+".function.name", "required: the function's name, a string")
		}
		if !functionName.MatchString(name) {
			return nil, nil, badField(at+".function.name", "%q: want letters, digits, _ and - only, at most 64", name)
		}
		if j, dup := seen[name]; dup {
			return nil, nil, badField(at+".function.name", "%q is also the name of %s[%d]: names must be unique", name, field, j)
		}
		seen[name] = i
		if d, ok := t.Function["description"]; ok && string(d) != "null" {
			var s string
			if json.Unmarshal(d, &s) != nil {
				return nil, nil, badField(at+".function.description", "want a string")
			}
		}
		if p, ok := t.Function["parameters"]; ok && string(p) != "null" {
			if msg := checkSchema(p); msg != "" {
				return nil, nil, badField(at+".function.parameters", "not a JSON schema of the arguments: %s", msg)
			}
		}
		if err := chat.CheckTool(r); err != nil {
			return nil, nil, badField(at, "%v", err)
		}
		tools[i], names[i] = chat.Tool(bytes.TrimSpace(r)), name
	}
	return tools, names, nil
}

// checkSchema says what is wrong with a function's parameters schema (""
// when nothing): it must be an object schema whose type, properties and
// required have JSON Schema's shapes. Deeper keywords are the template's
// and the model's to read.
func checkSchema(raw json.RawMessage) string {
	var s map[string]json.RawMessage
	if !isJSONObject(raw) || json.Unmarshal(raw, &s) != nil {
		return "want an object such as {\"type\": \"object\", \"properties\": {...}}"
	}
	if t, ok := s["type"]; ok {
		var one string
		var many []string
		switch {
		case json.Unmarshal(t, &one) == nil:
			if one != "object" {
				return fmt.Sprintf("type %q: the arguments are an object (\"type\": \"object\")", one)
			}
		case json.Unmarshal(t, &many) == nil:
		default:
			return "type: want a string or an array of strings"
		}
	}
	if p, ok := s["properties"]; ok {
		var props map[string]json.RawMessage
		if !isJSONObject(p) || json.Unmarshal(p, &props) != nil {
			return "properties: want an object of schemas"
		}
		for k, v := range props {
			if !isJSONObject(v) && string(bytes.TrimSpace(v)) != "true" && string(bytes.TrimSpace(v)) != "false" {
				return fmt.Sprintf("properties.%s: want a schema (an object)", k)
			}
		}
	}
	if r, ok := s["required"]; ok {
		var req []string
		if json.Unmarshal(r, &req) != nil {
			return "required: want an array of property names"
		}
	}
	return ""
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// checkToolChoice reads tool_choice: "auto", "none", "required" or
// {"type": "function", "function": {"name": ...}} naming one of names.
// Absent, it is "auto" with tools and "none" without.
func checkToolChoice(raw json.RawMessage, names []string) (toolChoice, *apiError) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		if len(names) == 0 {
			return toolChoice{mode: "none"}, nil
		}
		return toolChoice{mode: "auto"}, nil
	}
	var c toolChoice
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			c.mode = s
		default:
			return c, badField("tool_choice", "%q: want \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", s)
		}
	} else {
		var o struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(raw, &o) != nil || o.Type != "function" || o.Function == nil || o.Function.Name == "" {
			return c, badField("tool_choice", "want \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
		}
		found := false
		for _, n := range names {
			found = found || n == o.Function.Name
		}
		if !found {
			return c, badField("tool_choice.function.name", "%q is not one of the request's tools", o.Function.Name)
		}
		c.mode, c.name = "function", o.Function.Name
	}
	if len(names) == 0 && c.mode != "none" && c.mode != "auto" {
		return c, badField("tool_choice", "%q needs tools to choose from: give \"tools\"", c.mode)
	}
	return c, nil
}

// hasToolMessages reports whether msgs hold tool calls or results.
func hasToolMessages(msgs []chat.Message) bool {
	for _, m := range msgs {
		if m.Role == chat.RoleTool || len(m.ToolCalls) > 0 {
			return true
		}
	}
	return false
}

// renderTools renders j's messages with its tools (and tool messages)
// through the model's own template. A template without tool support is a
// 400 naming "tools" (or "messages" when only the history has calls); a
// conversation the template refuses is the caller's to report.
func renderTools(ctx context.Context, rm *sessions.Model, j job) ([]int32, error) {
	t := rm.Template()
	if chat.ToolFormatOf(t) == chat.NoTools {
		field := "tools"
		if len(j.tools.tools) == 0 {
			field = "messages"
		}
		return nil, badField(field, "the chat template of model %q has no tool support (it does not render tools, or writes calls in a format this server does not read: Qwen's <tool_call>, Llama 3.1's JSON, Gemma 4's <|tool_call>); leave tools out", j.model.ID)
	}
	ids, err := chat.RenderTools(ctx, t, j.msgs, j.tools.tools, true)
	if err != nil {
		return nil, fmt.Errorf("render the conversation with tools: %w", err)
	}
	return ids, nil
}

// forced reports whether the reply must be a call.
func (c toolChoice) forced() bool { return c.mode == "required" || c.mode == "function" }

// forcedCall is the grammar of a reply that must be a call (tool_choice
// "required", or a named function), in the model's format: constrained
// decoding then allows nothing else. A strict tool schema outside the
// compiler's subset is a 400 naming the field.
//
// The grammar is kept with the response formats' (formats, by the format,
// the function named and the tools' compact text): an agent that sends the
// same tools every turn reuses its matcher's masks.
func forcedCall(f chat.ToolFormat, tj toolJob) (*constrain.Grammar, *apiError) {
	var key bytes.Buffer
	fmt.Fprintf(&key, "tool call\x00%s\x00%s", f, tj.choice.name)
	for _, t := range tj.tools {
		key.WriteByte(0)
		json.Compact(&key, t) // checkTools read it as JSON
	}
	if g := formats.get(key.String()); g != nil {
		return g, nil
	}
	e, err := f.CallGrammar(tj.tools, tj.choice.name)
	var ce *constrain.Error
	switch {
	case errors.As(err, &ce):
		return nil, badField(ce.Path, "%s", ce.Msg)
	case err != nil:
		return nil, badField("tool_choice", "%v", err)
	}
	g, err := constrain.Compile(e)
	if errors.As(err, &ce) {
		return nil, badField("tools", "the forced call's grammar: %v", ce)
	}
	if err != nil {
		return nil, badField("tools", "the forced call's grammar: %v", err)
	}
	return formats.put(key.String(), g), nil
}

// toolCallIn is a call in an assistant message of the history.
type toolCallIn struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      *string `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"function"`
}

// historyCalls checks the tool_calls of messages[i] (an assistant's) and
// returns them as the template renders them.
func historyCalls(i int, in []toolCallIn) ([]chat.ToolCall, *apiError) {
	out := make([]chat.ToolCall, len(in))
	for k, c := range in {
		at := fmt.Sprintf("messages[%d].tool_calls[%d]", i, k)
		if c.Type != "" && c.Type != "function" {
			return nil, badField(at+".type", "%q: want \"function\"", c.Type)
		}
		if c.Function == nil || c.Function.Name == nil || *c.Function.Name == "" {
			return nil, badField(at+".function.name", "required: the name of the function called")
		}
		args := "{}"
		if c.Function.Arguments != nil {
			args = *c.Function.Arguments
		}
		out[k] = chat.ToolCall{ID: c.ID, Name: *c.Function.Name, Arguments: args}
	}
	return out, nil
}

// toolCallOut is a call in a reply's message, or a streamed piece of one
// (Index says which call the piece belongs to).
type toolCallOut struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// callID names a call for the tool message that answers it.
func callID() string {
	var b [12]byte
	rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// toolCollector sits between the stop filter and the output of a reply
// that may call tools: it passes the text that cannot be part of a call
// (chat.ToolFormat.Streamable) and holds the rest, so that a call's markers
// never stream as content; at the end it parses the whole reply.
type toolCollector struct {
	f    chat.ToolFormat
	text strings.Builder
	sent int
}

// push adds a piece of the reply and returns the text that may be sent now.
func (c *toolCollector) push(piece string) string {
	c.text.WriteString(piece)
	all := c.text.String()
	n := c.f.StreamableFrom(all, c.sent)
	if n <= c.sent {
		return ""
	}
	out := all[c.sent:n]
	c.sent = n
	return out
}

// finish parses the whole reply: it returns the content not yet sent and
// the calls (nil when the reply is text).
func (c *toolCollector) finish() (string, []chat.ToolCall) {
	all := c.text.String()
	content, calls := c.f.ParseCalls(all)
	for i := range calls {
		calls[i].ID = callID()
	}
	// Streamable promises that what was sent is a prefix of content.
	return content[c.sent:], calls
}

// callText decodes a reply with tools for reading calls: the engine's text
// of each token, except that a special token the format writes calls with
// (a Gemma 4 marker, which decodes to nothing) is spelled by its piece, and
// any bytes the decoder still holds (a run of byte-fallback pieces, which it
// decides as a whole) come out before it, so the text keeps the tokens'
// order: `}` spelled <0x7D> before <tool_call|> reads "}<tool_call|>".
type callText struct {
	f   chat.ToolFormat
	tok *tokenizer.Tokenizer
	s   *tokenizer.Stream
}

func newCallText(f chat.ToolFormat, tok *tokenizer.Tokenizer) *callText {
	return &callText{f: f, tok: tok, s: tok.NewStream()}
}

// next is the text of a generated token (id -1: the decoder's tail).
func (c *callText) next(id int32) string {
	if id < 0 {
		return c.s.Flush()
	}
	if c.tok.IsSpecial(id) {
		if m := c.f.MarkerText("", c.tok.Piece(id)); m != "" {
			return c.s.Flush() + m
		}
	}
	return c.s.Next(id)
}
