package chat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"anechat/engine/chat/jinja"
	"anechat/engine/tokenizer"
)

// ErrTemplate marks a model's own chat template that does not parse or
// fails while rendering; the message names the template's file and line.
var ErrTemplate = errors.New("chat: the model's chat template failed")

// Jinja renders a model's own chat template, as transformers'
// apply_chat_template does: the template sees messages (role and content),
// add_generation_prompt, tools (None unless RenderTools offers some) and
// documents (None) and the model's named special tokens (bos_token,
// eos_token, …), and the rendered text is tokenized as a whole, with no BOS
// added (the template writes its own).
//
// Message text stays text: the renderer tracks which bytes of the output came
// from message content, and a special token spelled there is tokenized as
// plain text (Tokenizer.EncodeTrusted); only the template's own text yields
// control tokens. On conversations whose text spells no special token, the
// ids equal transformers' exactly. Where it does, transformers
// (sanitize_control_tokens=False) would emit the control token; we emit the
// text's ordinary tokens instead.
type Jinja struct {
	tok    *tokenizer.Tokenizer
	tmpl   *jinja.Template
	source string
	vars   map[string]jinja.Value
	stops  []int32
	hash   string
	tools  ToolFormat // how the model writes a call (ToolFormatOf)
}

// NewJinja parses spec's template for tok and renders the conversations
// every reply starts from (a question, and a question with its answer). A
// template that does not parse, or that a limit stops on those (see
// package jinja: too much work, memory or time), would fail every reply: it
// is an error naming spec.Source and the line, so that a scan lists the
// model as a problem. ctx bounds the trial renders.
func NewJinja(ctx context.Context, tok *tokenizer.Tokenizer, spec Spec) (*Jinja, error) {
	t, err := jinja.Parse(spec.Template)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrTemplate, spec.Source, err)
	}
	j := &Jinja{tok: tok, tmpl: t, source: spec.Source, vars: map[string]jinja.Value{}}
	names := make([]string, 0, len(spec.Tokens))
	for k, v := range spec.Tokens {
		j.vars[k] = jinja.Str(v)
		names = append(names, k)
	}
	sort.Strings(names)
	h := sha256.New()
	fmt.Fprintf(h, "jinja-v1\x00%d\x00%s\x00", len(spec.Template), spec.Template)
	for _, k := range names {
		fmt.Fprintf(h, "%s=%s\x00", k, spec.Tokens[k])
	}
	j.hash = hex.EncodeToString(h.Sum(nil)[:16])
	if _, err := j.render(ctx, []Message{{Role: RoleUser, Content: "Hi"}}, nil, true); isLimit(err) {
		return nil, err
	}
	if j.tools, err = j.detectTools(ctx); err != nil {
		return nil, err
	}
	stops, err := j.deriveStops(ctx)
	if err != nil {
		return nil, err
	}
	j.stops = stops
	return j, nil
}

// isLimit reports whether a render was stopped by a limit or its context,
// rather than failing on the conversation (a template may refuse one
// without being broken).
func isLimit(err error) bool {
	return errors.Is(err, jinja.ErrLimit) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Name implements Template.
func (j *Jinja) Name() string { return "jinja" }

// Stops implements Template: the tokenizer's end-of-sequence ids plus the
// control token the template writes right after a model's answer (its
// end-of-turn token).
func (j *Jinja) Stops() []int32 { return append([]int32(nil), j.stops...) }

// Hash implements Template: it covers the template text and the special
// token names it is rendered with.
func (j *Jinja) Hash() string { return j.hash }

// Source says where the template was read.
func (j *Jinja) Source() string { return j.source }

// Render implements Template.
func (j *Jinja) Render(ctx context.Context, msgs []Message, addGenerationPrompt bool) ([]int32, error) {
	out, err := j.render(ctx, msgs, nil, addGenerationPrompt)
	if err != nil {
		return nil, err
	}
	return j.encode(out), nil
}

// RenderText renders the conversation to text, as the model will read it.
// With tools, the template is offered them (see RenderTools).
func (j *Jinja) RenderText(ctx context.Context, msgs []Message, tools []Tool, addGenerationPrompt bool) (string, error) {
	out, err := j.render(ctx, msgs, tools, addGenerationPrompt)
	return out.Text, err
}

func (j *Jinja) encode(out jinja.Output) []int32 {
	spans := out.Untrusted
	return j.tok.EncodeTrusted(out.Text, func(lo, hi int) bool {
		// The first span that ends after lo is the only one that can overlap.
		i := sort.Search(len(spans), func(i int) bool { return spans[i].Hi > lo })
		return i == len(spans) || spans[i].Lo >= hi
	})
}

func (j *Jinja) render(ctx context.Context, msgs []Message, tools []Tool, addGenerationPrompt bool) (jinja.Output, error) {
	if len(msgs) == 0 {
		return jinja.Output{}, fmt.Errorf("%w: no messages", ErrConversation)
	}
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return jinja.Output{}, fmt.Errorf("%w: message %d has role %q (want system, user, assistant or tool)", ErrConversation, i, m.Role)
		}
		list[i] = messageValue(m)
	}
	toolList, err := toolsValue(tools)
	if err != nil {
		return jinja.Output{}, err
	}
	vars := make(map[string]jinja.Value, len(j.vars)+4)
	for k, v := range j.vars {
		vars[k] = v
	}
	vars["messages"] = jinja.List(list...)
	vars["add_generation_prompt"] = jinja.Bool(addGenerationPrompt)
	vars["tools"] = toolList
	vars["documents"] = jinja.None()
	out, err := j.tmpl.Render(ctx, vars, jinja.Options{})
	if err != nil {
		var je *jinja.Error
		switch {
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			// Stopped from outside (Ctrl-C, a client gone): not the
			// template's fault.
			return jinja.Output{}, fmt.Errorf("render the chat template of %s: %w", j.source, err)
		case errors.As(err, &je) && je.Raised:
			// The template refused the conversation (roles out of order, …).
			return jinja.Output{}, fmt.Errorf("%w: %w: %s: %v", ErrConversation, ErrTemplate, j.source, err)
		}
		// A limit error stays one (errors.Is(err, jinja.ErrLimit)).
		return jinja.Output{}, fmt.Errorf("%w: %s: %w", ErrTemplate, j.source, err)
	}
	return out, nil
}

// probeAnswer is a model answer whose text no template changes.
const probeAnswer = "anechatProbeAnswer"

// deriveStops renders a user question and a model answer and takes the
// first control token the template writes after the answer: ChatML's
// <|im_end|>, Llama 3's <|eot_id|>, Gemma's <end_of_turn> or <turn|>. A
// template that refuses the conversation leaves the tokenizer's EOS ids;
// one stopped by a limit is an error.
func (j *Jinja) deriveStops(ctx context.Context) ([]int32, error) {
	stops := j.tok.EOS()
	out, err := j.render(ctx, []Message{{Role: RoleUser, Content: "Hi"}, {Role: RoleAssistant, Content: probeAnswer}}, nil, false)
	if isLimit(err) {
		return nil, err
	}
	if err != nil {
		return stops, nil
	}
	at := strings.LastIndex(out.Text, probeAnswer)
	if at < 0 {
		return stops, nil
	}
	for _, id := range j.tok.EncodeSpecial(out.Text[at+len(probeAnswer):]) {
		if j.isControl(id) {
			if !slices.Contains(stops, id) {
				stops = append(stops, id)
			}
			break
		}
	}
	return stops, nil
}

// isControl reports whether id is a special token: one EncodeSpecial finds in
// its own spelling but Encode does not.
func (j *Jinja) isControl(id int32) bool {
	p := j.tok.Piece(id)
	if p == "" {
		return false
	}
	sp := j.tok.EncodeSpecial(p)
	return len(sp) == 1 && sp[0] == id && !slices.Equal(j.tok.Encode(p), sp)
}
