package chat

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode"
)

// The markers that open a call in each format's reply.
const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
	gemmaOpen   = "<|tool_call>call:"
	gemmaClose  = "<tool_call|>"
	gemmaQuote  = `<|"|>`
	// gemmaResponse is the token Gemma 4 writes after its calls: the
	// tool's answer goes there, so generation stops at it (ToolFormat.Stops).
	gemmaResponse = "<|tool_response>"
)

// marker is the text that opens a call, for the formats whose calls may
// follow text; "" for Llama 3, whose call is the whole reply.
func (f ToolFormat) marker() string {
	switch f {
	case ToolsHermes:
		return hermesOpen
	case ToolsGemma4:
		return "<|tool_call>"
	}
	return ""
}

// Markers are the pieces of the tokens the format's calls are written
// with. A tokenizer may count them special, and special tokens decode to
// nothing: a server reading a reply for calls spells these out (see
// MarkerText).
func (f ToolFormat) Markers() []string {
	switch f {
	case ToolsHermes:
		return []string{hermesOpen, hermesClose}
	case ToolsGemma4:
		return []string{"<|tool_call>", gemmaClose, gemmaQuote}
	}
	return nil
}

// MarkerText is the text of a generated token for reading calls: its
// decoded text, or, for a token that decodes to nothing, its piece when
// that is one of the format's Markers.
func (f ToolFormat) MarkerText(text, piece string) string {
	if text == "" && piece != "" && slices.Contains(f.Markers(), piece) {
		return piece
	}
	return text
}

// Stops are the pieces of the tokens that end a reply with tools besides
// the template's stop tokens: Gemma 4 writes <|tool_response> after its
// calls, where the tool's answer goes (a token its GGUF files mark neither
// end of turn nor end of text, so the model would go on to write an
// answer itself).
func (f ToolFormat) Stops() []string {
	if f == ToolsGemma4 {
		return []string{gemmaResponse}
	}
	return nil
}

// Streamable is how many leading bytes of text, a reply so far, are text
// for sure: not the start of a call, nor whitespace before one, nor a part
// of a marker that more text may complete. A server streams that much as
// content and holds the rest until the reply ends (ParseCalls). As text
// grows, Streamable never shrinks, and text[:Streamable(text)] is always a
// prefix of the content ParseCalls finds in the whole reply.
func (f ToolFormat) Streamable(text string) int { return f.StreamableFrom(text, 0) }

// StreamableFrom is Streamable(text) where Streamable already allowed the
// first sent bytes of an earlier, shorter text: it looks only past them, so
// a server that asks at every token does linear work over a reply.
func (f ToolFormat) StreamableFrom(text string, sent int) int {
	switch f {
	case NoTools:
		return len(text)
	case ToolsLlama3:
		// The call is the whole reply: a reply that starts with '{' (or
		// has not started) may be one; one that streamed text is not.
		if t := strings.TrimLeftFunc(text, unicode.IsSpace); sent == 0 && (t == "" || t[0] == '{') {
			return 0
		}
		return len(text)
	}
	// No marker starts before sent (what might have was held), and
	// text[sent-1] is not a space (trailing spaces were held).
	m := f.marker()
	cut := strings.Index(text[sent:], m)
	if cut >= 0 {
		cut += sent
	} else {
		cut = len(text)
		for n := min(len(m)-1, len(text)-sent); n > 0; n-- {
			if strings.HasSuffix(text, m[:n]) {
				cut = len(text) - n
				break
			}
		}
	}
	return len(strings.TrimRightFunc(text[:cut], unicode.IsSpace))
}

// ParseCalls splits a model's whole reply into its text and its calls, by
// the format's convention. A reply with no call, or one whose calls do not
// all parse (a truncated call, bad JSON, text after the calls), comes back
// whole as content with no calls: never a broken call. Calls have no ID
// (the server gives them one); Arguments is a JSON object. With calls, the
// content is the text before them, trailing whitespace removed.
func (f ToolFormat) ParseCalls(reply string) (content string, calls []ToolCall) {
	var ok bool
	switch f {
	case ToolsHermes:
		content, calls, ok = parseTagged(reply, hermesOpen, hermesCall)
	case ToolsGemma4:
		content, calls, ok = parseTagged(reply, gemmaOpen, gemmaCall)
	case ToolsLlama3:
		var c ToolCall
		c, ok = jsonCall(strings.TrimSpace(reply), "parameters")
		calls = []ToolCall{c}
	}
	if !ok {
		return reply, nil
	}
	return content, calls
}

// parseTagged parses text, then calls that each start with open and that
// call reads (returning the text after the call), separated by whitespace.
func parseTagged(reply, open string, call func(string) (ToolCall, string, bool)) (string, []ToolCall, bool) {
	i := strings.Index(reply, open)
	if i < 0 {
		return "", nil, false
	}
	content := strings.TrimRightFunc(reply[:i], unicode.IsSpace)
	rest := reply[i:]
	var calls []ToolCall
	for {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			return content, calls, len(calls) > 0
		}
		if !strings.HasPrefix(rest, open) {
			return "", nil, false
		}
		c, after, ok := call(rest[len(open):])
		if !ok {
			return "", nil, false
		}
		calls = append(calls, c)
		rest = after
	}
}

// hermesCall reads `{"name": …, "arguments": {…}}</tool_call>`. A reply that
// ends before the closing tag (the model wrote its end of turn there) counts
// if the JSON is whole.
func hermesCall(s string) (ToolCall, string, bool) {
	body, after, found := strings.Cut(s, hermesClose)
	if !found {
		body, after = s, ""
	}
	c, ok := jsonCall(strings.TrimSpace(body), "arguments")
	return c, after, ok
}

// jsonCall reads one JSON object {"name": "f", argsKey: {…}}; the arguments
// may also be a string holding a JSON object (some models write that), and
// may be left out when the function takes none.
func jsonCall(s, argsKey string) (ToolCall, bool) {
	if !strings.HasPrefix(s, "{") {
		return ToolCall{}, false
	}
	d := json.NewDecoder(strings.NewReader(s))
	var obj map[string]json.RawMessage
	if err := d.Decode(&obj); err != nil || d.More() {
		return ToolCall{}, false
	}
	if _, err := d.Token(); err == nil {
		return ToolCall{}, false // text after the object
	}
	var name string
	if json.Unmarshal(obj["name"], &name) != nil || name == "" {
		return ToolCall{}, false
	}
	args, ok := obj[argsKey]
	if !ok && argsKey != "arguments" {
		args, ok = obj["arguments"]
	}
	if !ok {
		return ToolCall{Name: name, Arguments: "{}"}, true
	}
	var inner string
	if json.Unmarshal(args, &inner) == nil {
		args = json.RawMessage(strings.TrimSpace(inner))
	}
	if !isObject(args) {
		return ToolCall{}, false
	}
	return ToolCall{Name: name, Arguments: string(args)}, true
}

// isObject reports whether b is one JSON object.
func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// gemmaCall reads `NAME{key:value,…}<tool_call|>` into a call with JSON
// arguments.
func gemmaCall(s string) (ToolCall, string, bool) {
	brace := strings.IndexByte(s, '{')
	if brace <= 0 {
		return ToolCall{}, "", false
	}
	name := s[:brace]
	if !gemmaName(name) {
		return ToolCall{}, "", false
	}
	p := &gemmaParser{s: s, i: brace}
	if !p.value(0) {
		return ToolCall{}, "", false
	}
	if !strings.HasPrefix(s[p.i:], gemmaClose) {
		return ToolCall{}, "", false
	}
	return ToolCall{Name: name, Arguments: p.out.String()}, s[p.i+len(gemmaClose):], true
}

// gemmaName reports whether a function name can stand in a Gemma 4 call
// (between "call:" and its arguments' brace).
func gemmaName(name string) bool {
	return name != "" && !strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(`{}[]:,<>"`, r) })
}

// gemmaParser turns Gemma 4's argument notation into JSON: objects with bare
// (or <|"|>-quoted) keys, arrays, strings between <|"|> tokens, numbers,
// true, false and null (or Python's None, which the template writes).
type gemmaParser struct {
	s   string
	i   int
	out bytes.Buffer
}

func (p *gemmaParser) str(s string) {
	b, _ := json.Marshal(s) // a string always marshals
	p.out.Write(b)
}

func (p *gemmaParser) value(depth int) bool {
	if depth > maxJSONDepth || p.i >= len(p.s) {
		return false
	}
	rest := p.s[p.i:]
	switch {
	case strings.HasPrefix(rest, gemmaQuote):
		end := strings.Index(rest[len(gemmaQuote):], gemmaQuote)
		if end < 0 {
			return false
		}
		p.str(rest[len(gemmaQuote) : len(gemmaQuote)+end])
		p.i += 2*len(gemmaQuote) + end
		return true
	case rest[0] == '{':
		return p.list('{', '}', func() bool {
			if !p.key() {
				return false
			}
			p.out.WriteByte(':')
			return p.value(depth + 1)
		})
	case rest[0] == '[':
		return p.list('[', ']', func() bool { return p.value(depth + 1) })
	}
	end := strings.IndexAny(rest, ",}]<")
	if end < 0 {
		end = len(rest)
	}
	lit := rest[:end]
	switch lit {
	case "true", "false", "null":
		p.out.WriteString(lit)
	case "None":
		p.out.WriteString("null")
	default:
		if lit == "" || !(lit[0] == '-' || lit[0] >= '0' && lit[0] <= '9') || !json.Valid([]byte(lit)) {
			return false
		}
		p.out.WriteString(lit)
	}
	p.i += end
	return true
}

// key reads an object key and writes it as a JSON string.
func (p *gemmaParser) key() bool {
	rest := p.s[p.i:]
	if strings.HasPrefix(rest, gemmaQuote) {
		end := strings.Index(rest[len(gemmaQuote):], gemmaQuote)
		if end < 0 || !strings.HasPrefix(rest[2*len(gemmaQuote)+end:], ":") {
			return false
		}
		p.str(rest[len(gemmaQuote) : len(gemmaQuote)+end])
		p.i += 2*len(gemmaQuote) + end + 1
		return true
	}
	colon := strings.IndexByte(rest, ':')
	if colon <= 0 || strings.ContainsAny(rest[:colon], "{}[],<>\"") {
		return false
	}
	p.str(rest[:colon])
	p.i += colon + 1
	return true
}

// list reads a comma-separated run of items between open and close (at
// p.i, on open), writing it as JSON: an object's members or an array's
// values, item reading one. False when it does not parse.
func (p *gemmaParser) list(open, close byte, item func() bool) bool {
	p.i++
	p.out.WriteByte(open)
	for n := 0; ; n++ {
		if p.i < len(p.s) && p.s[p.i] == close && n == 0 {
			break
		}
		if n > 0 {
			p.out.WriteByte(',')
		}
		if !item() {
			return false
		}
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		break
	}
	if p.i >= len(p.s) || p.s[p.i] != close {
		return false
	}
	p.i++
	p.out.WriteByte(close)
	return true
}
