// Package chat renders conversations into the token ids a model was trained
// on. A model that ships a chat template (a GGUF's tokenizer.chat_template,
// a Hugging Face directory's chat_template.jinja or tokenizer_config.json)
// is rendered with it, as transformers' apply_chat_template does (Jinja, in
// engine/chat/jinja). Models without one get a built-in format: Gemma 4
// (<|turn>…<turn|>), Gemma 3 (<start_of_turn>…<end_of_turn>), ChatML
// (<|im_start|>…<|im_end|>) or a plain fallback (llama2.c stories).
//
// Message text never becomes a control token. The built-in formats insert
// control tokens by id and send message text through Tokenizer.Encode; the
// Jinja renderer tracks which bytes of the prompt came from messages and
// tokenizes special-token spellings there as text. So a user who types
// "<end_of_turn>" or "<|turn>" gets those characters, not a turn boundary.
package chat

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"anechat/engine/tokenizer"
)

// Roles of a Message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	// RoleTool is a tool's result, which only templates with tool support
	// render (ToolFormatOf).
	RoleTool = "tool"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string // system | user | assistant | tool
	Content string
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID is the call a tool message answers, Name the function it
	// ran (the templates that name it take it from here or from the call).
	ToolCallID string
	Name       string
}

// ToolCall is one function call of a model's reply.
type ToolCall struct {
	// ID names the call for the tool message that answers it.
	ID   string
	Name string
	// Arguments is a JSON object, as text.
	Arguments string
}

// Template turns messages into prompt ids.
type Template interface {
	// Name identifies the format: "jinja" (the model's own template),
	// "gemma4", "gemma3", "chatml" or "plain".
	Name() string
	// Render returns the ids of the conversation, BOS included when the
	// model wants it; with addGenerationPrompt it ends with the opening of a
	// model turn, ready for generation. A model's own template stops when
	// ctx ends (the error wraps ctx.Err()).
	Render(ctx context.Context, msgs []Message, addGenerationPrompt bool) ([]int32, error)
	// Stops are the ids that end a model turn.
	Stops() []int32
	// Hash identifies the rendering (format, version and control-token ids);
	// KV snapshots bind it.
	Hash() string
}

// ErrConversation marks messages the template cannot render (bad role,
// wrong order, nothing to render).
var ErrConversation = errors.New("chat: conversation cannot be rendered")

// ErrNoTemplate marks a tokenizer that lacks the control tokens of the
// format its model needs.
var ErrNoTemplate = errors.New("chat: no template fits the tokenizer")

// ForModel picks the template for a model: its own chat template when spec
// has one (a template that does not parse is an error, never a silent
// fallback), else the built-in format of its architecture (model.Config's
// architecture, e.g. "gemma4", "gemma3", "llama", "qwen2"), checking that the
// tokenizer has the control tokens it needs. Architectures without a known
// chat format fall back to ChatML when the vocabulary has its tokens, and to
// the plain template otherwise. A model's own template is tried on a short
// conversation here (NewJinja), under ctx.
func ForModel(ctx context.Context, arch string, tok *tokenizer.Tokenizer, spec Spec) (Template, error) {
	if spec.Template != "" {
		return NewJinja(ctx, tok, spec)
	}
	a := strings.ToLower(arch)
	switch {
	case strings.HasPrefix(a, "gemma4"), strings.HasPrefix(a, "gemma3n"):
		return NewGemma4(tok)
	case strings.HasPrefix(a, "gemma"):
		if _, ok := tok.TokenID("<|turn>"); ok {
			return NewGemma4(tok)
		}
		return NewGemma3(tok)
	}
	if _, ok := tok.TokenID("<|im_start|>"); ok {
		return NewChatML(tok)
	}
	return NewPlain(tok), nil
}

// ids looks up control pieces, failing with a message naming what is missing.
func ids(tok *tokenizer.Tokenizer, format string, pieces ...string) ([]int32, error) {
	out := make([]int32, len(pieces))
	for i, p := range pieces {
		id, ok := tok.TokenID(p)
		if !ok {
			return nil, fmt.Errorf("%w: %s needs the token %q, which %s lacks", ErrNoTemplate, format, p, tok.Source())
		}
		out[i] = id
	}
	return out, nil
}

func hashOf(name string, version int, ids ...int32) string {
	h := sha256.New()
	h.Write([]byte(name))
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(version))
	h.Write(b[:])
	for _, id := range ids {
		binary.LittleEndian.PutUint32(b[:], uint32(id))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

func union(a []int32, b ...int32) []int32 {
	out := append([]int32(nil), a...)
	for _, x := range b {
		found := false
		for _, y := range out {
			found = found || x == y
		}
		if !found {
			out = append(out, x)
		}
	}
	return out
}

// stripThinking removes <|channel>…<channel|> thought blocks from model text
// and trims it, like Gemma 4's strip_thinking macro.
func stripThinking(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "<channel|>") {
		if before, _, found := strings.Cut(part, "<|channel>"); found {
			part = before
		}
		b.WriteString(part)
	}
	return pyStrip(b.String())
}

// pyStrip trims like Python's str.strip() (Jinja's trim filter): Unicode
// whitespace plus the separators U+001C..U+001F that Python counts as space.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
	})
}

// checkRole refuses what the built-in formats cannot render: a role they do
// not know, tool messages and tool calls (they have no tool support).
func checkRole(i int, m Message) error {
	switch {
	case m.Role == RoleTool || len(m.ToolCalls) > 0:
		return fmt.Errorf("%w: message %d is a tool call or result, and the chat format has no tool support", ErrConversation, i)
	case m.Role == RoleSystem || m.Role == RoleUser || m.Role == RoleAssistant:
		return nil
	}
	return fmt.Errorf("%w: message %d has role %q (want system, user or assistant)", ErrConversation, i, m.Role)
}

// builder accumulates ids: control tokens by id, text through Encode.
type builder struct {
	tok *tokenizer.Tokenizer
	out []int32
}

func (b *builder) id(ids ...int32) { b.out = append(b.out, ids...) }
func (b *builder) text(s string)   { b.out = append(b.out, b.tok.Encode(s)...) }

// Gemma4 is the Gemma 4 format, as Gemma 4 E2B's chat_template.jinja writes
// text-only conversations:
//
//	<bos><|turn>system\n{system}<turn|>\n<|turn>user\n{user}<turn|>\n<|turn>model\n{answer}<turn|>\n…<|turn>model\n
//
// System messages get their own system turn (the template's first-message
// block, or a turn with role "system" later on). Text is trimmed (Python
// strip); an assistant's text first loses any <|channel>…<channel|> thought
// block (the template's strip_thinking), and an assistant message right after
// another continues the same model turn without a new header. The generation
// prompt has no empty thought channel (E2B/E4B). Generation ends at <turn|>
// or <eos>.
type Gemma4 struct {
	tok       *tokenizer.Tokenizer
	turn, end int32
	stops     []int32
	hash      string
	bos       int32
}

// NewGemma4 builds the Gemma 4 template for tok (which must have <|turn> and <turn|>).
func NewGemma4(tok *tokenizer.Tokenizer) (*Gemma4, error) {
	c, err := ids(tok, "the Gemma 4 chat format", "<|turn>", "<turn|>")
	if err != nil {
		return nil, err
	}
	g := &Gemma4{tok: tok, turn: c[0], end: c[1], bos: tok.BOS()}
	if g.bos < 0 {
		// The format always starts with <bos>, even if tokenizer.json has no
		// post-processor saying so.
		if id, ok := tok.TokenID("<bos>"); ok {
			g.bos = id
		}
	}
	g.stops = union(tok.EOS(), g.end)
	g.hash = hashOf("gemma4", 1, g.turn, g.end, g.bos)
	return g, nil
}

// Name implements Template.
func (g *Gemma4) Name() string { return "gemma4" }

// Stops implements Template.
func (g *Gemma4) Stops() []int32 { return append([]int32(nil), g.stops...) }

// Hash implements Template.
func (g *Gemma4) Hash() string { return g.hash }

// Render implements Template.
func (g *Gemma4) Render(_ context.Context, msgs []Message, addGenerationPrompt bool) ([]int32, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrConversation)
	}
	b := &builder{tok: g.tok}
	if g.bos >= 0 {
		b.id(g.bos)
	}
	for i, m := range msgs {
		if err := checkRole(i, m); err != nil {
			return nil, err
		}
		text := pyStrip(m.Content)
		header := m.Role + "\n"
		if m.Role == RoleAssistant {
			text = stripThinking(m.Content)
			header = "model\n"
			if i > 0 && msgs[i-1].Role == RoleAssistant {
				header = "" // continue_same_model_turn
			}
		}
		if header != "" {
			b.id(g.turn)
		}
		b.text(header + text)
		b.id(g.end)
		b.text("\n")
	}
	if addGenerationPrompt {
		b.id(g.turn)
		b.text("model\n")
	}
	return b.out, nil
}

// Gemma3 is the Gemma 3 format, equal to transformers' apply_chat_template
// with Gemma 3's tokenizer_config.json template:
//
//	<bos><start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n<start_of_turn>model\n…
//
// A leading system message is prepended to the first user turn (untrimmed,
// followed by a blank line); the other messages must alternate user,
// assistant, user, … and are trimmed.
type Gemma3 struct {
	tok        *tokenizer.Tokenizer
	start, end int32
	stops      []int32
	hash       string
	bos        int32
}

// NewGemma3 builds the Gemma 3 template for tok.
func NewGemma3(tok *tokenizer.Tokenizer) (*Gemma3, error) {
	c, err := ids(tok, "the Gemma 3 chat format", "<start_of_turn>", "<end_of_turn>")
	if err != nil {
		return nil, err
	}
	g := &Gemma3{tok: tok, start: c[0], end: c[1], bos: tok.BOS()}
	g.stops = union(tok.EOS(), g.end)
	g.hash = hashOf("gemma3", 1, g.start, g.end, g.bos)
	return g, nil
}

// Name implements Template.
func (g *Gemma3) Name() string { return "gemma3" }

// Stops implements Template.
func (g *Gemma3) Stops() []int32 { return append([]int32(nil), g.stops...) }

// Hash implements Template.
func (g *Gemma3) Hash() string { return g.hash }

// Render implements Template.
func (g *Gemma3) Render(_ context.Context, msgs []Message, addGenerationPrompt bool) ([]int32, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrConversation)
	}
	for i, m := range msgs {
		if err := checkRole(i, m); err != nil {
			return nil, err
		}
	}
	b := &builder{tok: g.tok}
	if g.bos >= 0 {
		b.id(g.bos)
	}
	prefix := ""
	loop := msgs
	if msgs[0].Role == RoleSystem {
		prefix = msgs[0].Content + "\n\n"
		loop = msgs[1:]
	}
	for i, m := range loop {
		if (m.Role == RoleUser) != (i%2 == 0) {
			return nil, fmt.Errorf("%w: roles must alternate user/assistant/user/… (message %d is %s)", ErrConversation, i+len(msgs)-len(loop), m.Role)
		}
		role := m.Role
		if role == RoleAssistant {
			role = "model"
		}
		text := role + "\n"
		if i == 0 {
			text += prefix
		}
		b.id(g.start)
		b.text(text + pyStrip(m.Content))
		b.id(g.end)
		b.text("\n")
	}
	if addGenerationPrompt {
		b.id(g.start)
		b.text("model\n")
	}
	return b.out, nil
}

// ChatML is the <|im_start|>role\n…<|im_end|>\n format (Qwen, SmolLM).
// Message text is used as is; BOS only if the tokenizer asks for it.
type ChatML struct {
	tok        *tokenizer.Tokenizer
	start, end int32
	stops      []int32
	hash       string
}

// NewChatML builds the ChatML template for tok.
func NewChatML(tok *tokenizer.Tokenizer) (*ChatML, error) {
	c, err := ids(tok, "the ChatML format", "<|im_start|>", "<|im_end|>")
	if err != nil {
		return nil, err
	}
	t := &ChatML{tok: tok, start: c[0], end: c[1]}
	t.stops = union(tok.EOS(), t.end)
	bos := int32(-1)
	if tok.AddsBOS() {
		bos = tok.BOS()
	}
	t.hash = hashOf("chatml", 1, t.start, t.end, bos)
	return t, nil
}

// Name implements Template.
func (t *ChatML) Name() string { return "chatml" }

// Stops implements Template.
func (t *ChatML) Stops() []int32 { return append([]int32(nil), t.stops...) }

// Hash implements Template.
func (t *ChatML) Hash() string { return t.hash }

// Render implements Template.
func (t *ChatML) Render(_ context.Context, msgs []Message, addGenerationPrompt bool) ([]int32, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrConversation)
	}
	b := &builder{tok: t.tok}
	if t.tok.AddsBOS() {
		b.id(t.tok.BOS())
	}
	for i, m := range msgs {
		if err := checkRole(i, m); err != nil {
			return nil, err
		}
		b.id(t.start)
		b.text(m.Role + "\n" + m.Content)
		b.id(t.end)
		b.text("\n")
	}
	if addGenerationPrompt {
		b.id(t.start)
		b.text("assistant\n")
	}
	return b.out, nil
}

// Plain is the fallback for models without a chat format: BOS (if the model
// wants it) and the message texts joined by newlines, which is the raw prompt
// for a single message (stories260K's "Once upon a time").
type Plain struct {
	tok  *tokenizer.Tokenizer
	hash string
}

// NewPlain builds the plain template for tok.
func NewPlain(tok *tokenizer.Tokenizer) *Plain {
	bos := int32(-1)
	if tok.AddsBOS() {
		bos = tok.BOS()
	}
	return &Plain{tok: tok, hash: hashOf("plain", 1, bos)}
}

// Name implements Template.
func (p *Plain) Name() string { return "plain" }

// Stops implements Template.
func (p *Plain) Stops() []int32 { return p.tok.EOS() }

// Hash implements Template.
func (p *Plain) Hash() string { return p.hash }

// Render implements Template; addGenerationPrompt has nothing to add.
func (p *Plain) Render(_ context.Context, msgs []Message, addGenerationPrompt bool) ([]int32, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrConversation)
	}
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		if err := checkRole(i, m); err != nil {
			return nil, err
		}
		parts[i] = m.Content
	}
	var out []int32
	if p.tok.AddsBOS() {
		out = append(out, p.tok.BOS())
	}
	return append(out, p.tok.Encode(strings.Join(parts, "\n"))...), nil
}
