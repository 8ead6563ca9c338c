package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"anechat/engine/chat"
	"anechat/engine/constrain"
	"anechat/engine/spec"
)

// apiError is an error in OpenAI's shape, with its HTTP status.
type apiError struct {
	status int
	typ    string // invalid_request_error, authentication_error, ...
	param  string // the request field at fault, "" for none
	code   string
	msg    string
	// retryAfter, when > 0, is sent as Retry-After (503).
	retryAfter int
	// close: the connection closes after the answer.
	close bool
}

func (e *apiError) Error() string { return e.msg }

// apiErr is an invalid_request_error.
func apiErr(status int, param, code, format string, a ...any) *apiError {
	return &apiError{status: status, typ: "invalid_request_error", param: param, code: code, msg: fmt.Sprintf(format, a...)}
}

// badField is a 400 naming the field.
func badField(param, format string, a ...any) *apiError {
	return apiErr(http.StatusBadRequest, param, "invalid_value", "%s: %s", param, fmt.Sprintf(format, a...))
}

// errorBody is OpenAI's error JSON.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	b := errorBody{Error: errorObject{Message: e.msg, Type: e.typ}}
	if e.param != "" {
		b.Error.Param = &e.param
	}
	if e.code != "" {
		b.Error.Code = &e.code
	}
	return b
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(e.retryAfter))
	}
	if e.close {
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, e.status, e.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain structs of strings and numbers come here.
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"server: encode the response","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads the JSON body into v, naming the field of a value of the
// wrong type.
func decode(r *http.Request, v any) *apiError {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return apiErr(http.StatusRequestEntityTooLarge, "", "body_too_large", "the request body is larger than %d bytes", tooBig.Limit)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Config.ReadTimeout passed: the rest of the body is not
			// waited for, and the connection closes.
			e := apiErr(http.StatusRequestTimeout, "", "body_timeout", "the request body did not arrive in time: send it whole, at once")
			e.close = true
			return e
		}
		return apiErr(http.StatusBadRequest, "", "unreadable_body", "reading the request body: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		var te *json.UnmarshalTypeError
		var fe *fieldError
		switch {
		case errors.As(err, &fe):
			return badField(fe.field, "%s", fe.msg)
		case errors.As(err, &te) && te.Field != "":
			// The shared fields sit in an embedded struct, whose Go name
			// the path starts with.
			return badField(strings.TrimPrefix(te.Field, "sampling."), "want %s, got a JSON %s", jsonKind(te.Type.Kind().String()), te.Value)
		case errors.As(err, &te):
			return apiErr(http.StatusBadRequest, "", "invalid_json", "the request body must be a JSON object, not a %s", te.Value)
		}
		return apiErr(http.StatusBadRequest, "", "invalid_json", "the request body is not valid JSON: %v", err)
	}
	return nil
}

// jsonKind names a Go kind as the JSON type it reads.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int"), strings.HasPrefix(k, "uint"):
		return "an integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "bool":
		return "true or false"
	case k == "string":
		return "a string"
	case k == "slice":
		return "an array"
	}
	return "an object"
}

// fieldError is a value that decoded but is not acceptable, from a custom
// UnmarshalJSON.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// stopList is "stop": a string or an array of strings.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*s = nil
		return nil
	}
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return &fieldError{"stop", "want a string or an array of strings"}
	}
	*s = many
	return nil
}

// widthOption is anechat.width: 1..8, or 0 or "auto".
type widthOption int

func (w *widthOption) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil && s == "auto" {
		*w = 0
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil || n < 0 || n > spec.MaxWidth {
		return &fieldError{"anechat.width", fmt.Sprintf("want 1 (speculation off) to %d, or 0 or \"auto\"", spec.MaxWidth)}
	}
	*w = widthOption(n)
	return nil
}

// textContent reads a message's content: a string, or an array of parts
// of which only text parts are understood. field names it in errors.
func textContent(field string, b json.RawMessage) (string, *apiError) {
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return "", badField(field, "want a string or an array of text parts")
	}
	var out strings.Builder
	for i, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", badField(fmt.Sprintf("%s[%d]", field, i), "a part of type %q: only text parts ({\"type\": \"text\", \"text\": ...}) are supported", p.Type)
		}
		out.WriteString(*p.Text)
	}
	return out.String(), nil
}

// sampling are the fields chat and text completions share.
type sampling struct {
	Model               *string   `json:"model"`
	MaxTokens           *int      `json:"max_tokens"`
	MaxCompletionTokens *int      `json:"max_completion_tokens"`
	Temperature         *float64  `json:"temperature"`
	TopP                *float64  `json:"top_p"`
	Seed                *int64    `json:"seed"`
	Stop                *stopList `json:"stop"`
	Stream              *bool     `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	N       *int `json:"n"`
	Anechat *struct {
		Width *widthOption `json:"width"`
	} `json:"anechat"`

	// Logprobs is true or false in a chat, an integer in a text
	// completion (chatLogprobs, completionLogprobs); TopLogprobs is chat's.
	Logprobs    json.RawMessage `json:"logprobs"`
	TopLogprobs *int            `json:"top_logprobs"`

	// Fields whose effect this server does not have: a request that sets
	// them to anything but their neutral value is refused, not half-served.
	FrequencyPenalty *float64          `json:"frequency_penalty"`
	PresencePenalty  *float64          `json:"presence_penalty"`
	LogitBias        map[string]any    `json:"logit_bias"`
	Tools            []json.RawMessage `json:"tools"`
	Functions        []json.RawMessage `json:"functions"`
	ResponseFormat   *responseFormat   `json:"response_format"`
	Echo             *bool             `json:"echo"`
	BestOf           *int              `json:"best_of"`
	Suffix           *string           `json:"suffix"`
}

// maxStops is how many stop strings a request may give (OpenAI's limit).
const maxStops = 4

// params is a validated request's generation settings.
type params struct {
	model        string
	maxTokens    int
	temperature  float64
	topP         float64
	seed         uint64
	seeded       bool
	stops        []string
	stream       bool
	includeUsage bool
	width        int
	format       *constrain.Grammar // response_format's, nil for text
	// logprobs: each token's log-probability is sent, with topLogprobs
	// (0..20) alternatives (chat's logprobs/top_logprobs, completions'
	// logprobs N).
	logprobs    bool
	topLogprobs int
}

// check validates the shared fields and fills in the defaults.
func (s *sampling) check(d Defaults) (params, *apiError) {
	p := params{maxTokens: d.MaxTokens, temperature: d.Temperature, width: d.Width}
	if s.Model == nil || *s.Model == "" {
		return p, badField("model", "required: the id of a model GET /v1/models lists")
	}
	p.model = *s.Model
	for _, mt := range []struct {
		name string
		v    *int
	}{{"max_tokens", s.MaxTokens}, {"max_completion_tokens", s.MaxCompletionTokens}} {
		if mt.v == nil {
			continue
		}
		if *mt.v < 1 {
			return p, badField(mt.name, "%d: want a positive number of tokens", *mt.v)
		}
		p.maxTokens = *mt.v // max_completion_tokens, the newer name, wins
	}
	if t := s.Temperature; t != nil {
		if *t < 0 || *t > 2 {
			return p, badField("temperature", "%v: want 0 (greedy) to 2", *t)
		}
		p.temperature = *t
	}
	if t := s.TopP; t != nil {
		if *t <= 0 || *t > 1 {
			return p, badField("top_p", "%v: want a number above 0, at most 1", *t)
		}
		p.topP = *t
	}
	if s.Seed != nil {
		p.seed, p.seeded = uint64(*s.Seed), true
	}
	if s.Stop != nil {
		if len(*s.Stop) > maxStops {
			return p, badField("stop", "%d strings: at most %d", len(*s.Stop), maxStops)
		}
		for i, st := range *s.Stop {
			if st == "" {
				return p, badField(fmt.Sprintf("stop[%d]", i), "an empty string would stop at once")
			}
		}
		p.stops = *s.Stop
	}
	p.stream = s.Stream != nil && *s.Stream
	if s.StreamOptions != nil {
		if !p.stream {
			return p, badField("stream_options", "only allowed with \"stream\": true")
		}
		p.includeUsage = s.StreamOptions.IncludeUsage != nil && *s.StreamOptions.IncludeUsage
	}
	if s.N != nil && *s.N != 1 {
		return p, badField("n", "%d: this server writes one choice per request (n = 1)", *s.N)
	}
	if s.Anechat != nil && s.Anechat.Width != nil {
		p.width = int(*s.Anechat.Width)
	}
	if e := s.unsupported(); e != nil {
		return p, e
	}
	var e *apiError
	p.format, e = s.ResponseFormat.grammar()
	return p, e
}

// unsupported refuses the fields this server does not honour when set.
func (s *sampling) unsupported() *apiError {
	switch {
	case s.FrequencyPenalty != nil && *s.FrequencyPenalty != 0:
		return badField("frequency_penalty", "not supported (it would change the model's choices); leave it out or 0")
	case s.PresencePenalty != nil && *s.PresencePenalty != 0:
		return badField("presence_penalty", "not supported (it would change the model's choices); leave it out or 0")
	case len(s.LogitBias) > 0:
		return badField("logit_bias", "not supported; leave it out")
	case len(s.Tools) > 0:
		return badField("tools", "tools are for chat completions (/v1/chat/completions); leave it out")
	case len(s.Functions) > 0:
		return badField("functions", "function calls are not supported; leave it out")
	case s.Echo != nil && *s.Echo:
		return badField("echo", "not supported; leave it out")
	case s.BestOf != nil && *s.BestOf != 1:
		return badField("best_of", "not supported; leave it out or 1")
	case s.Suffix != nil && *s.Suffix != "":
		return badField("suffix", "not supported; leave it out")
	}
	return nil
}

// chatRequest is POST /v1/chat/completions' body.
type chatRequest struct {
	sampling
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		// An assistant's calls, a tool's answer to one (server/tools.go).
		ToolCalls  []toolCallIn `json:"tool_calls"`
		ToolCallID *string      `json:"tool_call_id"`
		Name       *string      `json:"name"`
	} `json:"messages"`
	// Tools shadows sampling's (text completions refuse tools).
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage   `json:"tool_choice"`
}

// job validates the request and returns it as a chat job.
func (r *chatRequest) job(d Defaults) (job, *apiError) {
	msgs, p, e := r.check(d)
	if e != nil {
		return job{}, e
	}
	tools, names, e := checkTools("tools", r.Tools)
	if e != nil {
		return job{}, e
	}
	choice, e := checkToolChoice(r.ToolChoice, names)
	if e != nil {
		return job{}, e
	}
	if choice.forced() && p.format != nil {
		return job{}, badField("tool_choice", "%q forces a call, and response_format constrains the reply too: give one of them", choice.mode)
	}
	tj := toolJob{choice: choice}
	if choice.mode != "none" {
		tj.tools = tools
	}
	return job{chat: true, msgs: msgs, p: p, tools: tj}, nil
}

// check validates the request and returns its messages and settings.
func (r *chatRequest) check(d Defaults) ([]chat.Message, params, *apiError) {
	p, e := r.sampling.check(d)
	if e == nil {
		p.logprobs, p.topLogprobs, e = r.chatLogprobs()
	}
	if e != nil {
		return nil, p, e
	}
	if len(r.Messages) == 0 {
		return nil, p, badField("messages", "required: at least one message")
	}
	msgs := make([]chat.Message, len(r.Messages))
	for i, m := range r.Messages {
		switch m.Role {
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return nil, p, badField(fmt.Sprintf("messages[%d].role", i), "%q: want system, user, assistant or tool", m.Role)
		}
		var calls []chat.ToolCall
		if len(m.ToolCalls) > 0 {
			if m.Role != chat.RoleAssistant {
				return nil, p, badField(fmt.Sprintf("messages[%d].tool_calls", i), "only an assistant message makes calls")
			}
			if calls, e = historyCalls(i, m.ToolCalls); e != nil {
				return nil, p, e
			}
		}
		field := fmt.Sprintf("messages[%d].content", i)
		text := ""
		if len(m.Content) == 0 || string(m.Content) == "null" {
			if calls == nil {
				return nil, p, badField(field, "required")
			}
		} else if text, e = textContent(field, m.Content); e != nil {
			return nil, p, e
		}
		msgs[i] = chat.Message{Role: m.Role, Content: text, ToolCalls: calls}
		if m.Role == chat.RoleTool {
			if m.ToolCallID == nil || *m.ToolCallID == "" {
				return nil, p, badField(fmt.Sprintf("messages[%d].tool_call_id", i), "required: the id of the call this message answers")
			}
			msgs[i].ToolCallID = *m.ToolCallID
			if m.Name != nil {
				msgs[i].Name = *m.Name
			}
		}
	}
	return msgs, p, nil
}

// completionRequest is POST /v1/completions' body.
type completionRequest struct {
	sampling
	Prompt json.RawMessage `json:"prompt"`
}

// job validates the request and returns it as a text completion job.
func (r *completionRequest) job(d Defaults) (job, *apiError) {
	prompt, p, e := r.check(d)
	return job{prompt: prompt, p: p}, e
}

// check validates the request and returns its prompt text and settings.
func (r *completionRequest) check(d Defaults) (string, params, *apiError) {
	p, e := r.sampling.check(d)
	if e == nil {
		p.logprobs, p.topLogprobs, e = r.completionLogprobs()
	}
	if e != nil {
		return "", p, e
	}
	var one string
	if json.Unmarshal(r.Prompt, &one) == nil {
		return one, p, nil
	}
	var list []string
	if json.Unmarshal(r.Prompt, &list) == nil && len(list) == 1 {
		return list[0], p, nil
	}
	return "", p, badField("prompt", "required: a string (or an array of one string)")
}

// usage counts tokens as the model's tokenizer does.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// figures are anechat's own figures of a reply, in the extra field
// "anechat" that OpenAI clients ignore.
type figures struct {
	// Width is the speculation width the reply ran at (0 = auto).
	Width int `json:"width"`
	// TargetCalls is the model calls that generated the reply; Drafted the
	// tokens speculation proposed in them, Accepted those the model kept.
	TargetCalls int `json:"target_calls"`
	Drafted     int `json:"drafted"`
	Accepted    int `json:"accepted"`
	// Declined is the calls sent without drafts because wide calls cost
	// more lately than measured, Probes those that sent them all the same
	// to measure afresh, DraftNote why the reply drafted less than it could
	// ("drafting paused: wide calls measured 3.1x width 1"; spec.Stats).
	Declined  int    `json:"declined"`
	Probes    int    `json:"probes"`
	DraftNote string `json:"draft_note,omitempty"`
	// ResumedTokens is the prompt positions reused (from the session or a
	// snapshot); PrefilledTokens those run through the model.
	ResumedTokens   int `json:"resumed_tokens"`
	PrefilledTokens int `json:"prefilled_tokens"`
	// TTFTms is the time from the start of the prefill to the first token.
	TTFTms     float64 `json:"ttft_ms"`
	DecodeTokS float64 `json:"decode_tok_s"`
}

// message is a chat message in a reply, or a streamed delta of one.
type message struct {
	Role      string        `json:"role,omitempty"`
	Content   *string       `json:"content,omitempty"`
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
}

// choice is one choice of a chat or text completion, whole or a chunk.
type choice struct {
	Index        int      `json:"index"`
	Message      *message `json:"message,omitempty"`
	Delta        *message `json:"delta,omitempty"`
	Text         *string  `json:"text,omitempty"`
	Logprobs     any      `json:"logprobs"` // null, *chatLogprobs or *textLogprobs
	FinishReason *string  `json:"finish_reason"`
}

// completion is a chat or text completion, or a streamed chunk of one.
type completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	// Usage is null in the chunks before the last when the stream reports
	// usage (stream_options.include_usage), left out otherwise.
	Usage   json.RawMessage `json:"usage,omitempty"`
	Anechat *figures        `json:"anechat,omitempty"`
}
