package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"anechat/engine/chat"
	"anechat/engine/constrain"
	"anechat/engine/load"
	"anechat/engine/sample"
	"anechat/engine/tokenizer"
	"anechat/internal/sessions"
)

// Ollama's API, for the clients that speak only it: POST /api/chat and
// /api/generate (NDJSON streams), GET /api/tags, POST /api/show, GET
// /api/ps and GET /api/version. They run on the same path as the OpenAI
// routes (the token, Host and CORS checks, the queue, internal/sessions and
// its resume from KV, constrained decoding, tools, logprobs); only the
// request's fields and the reply's shape differ. What this server cannot
// honour is refused with a 400 naming the field, as the OpenAI routes do,
// never ignored.

// ollamaVersion is what GET /api/version reports: the Ollama release whose
// API the /api routes follow (chat, generate, tags, show, version, with
// done_reason and the durations in nanoseconds). Clients compare it to
// decide which fields they may send.
const ollamaVersion = "0.5.0"

// maxOllamaStops is how many options.stop strings a request may give:
// Ollama has no limit, and its clients send a model's several turn markers.
const maxOllamaStops = 16

// ollamaRoutes adds the Ollama routes to mux.
func (s *Server) ollamaRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/chat", s.ollamaCompletion(false))
	mux.HandleFunc("POST /api/generate", s.ollamaCompletion(true))
	mux.HandleFunc("GET /api/tags", s.ollamaTags)
	mux.HandleFunc("POST /api/show", s.ollamaShow)
	mux.HandleFunc("GET /api/ps", s.ollamaPS)
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
	})
}

// isOllama reports whether r is for an Ollama route, whose errors take
// Ollama's shape.
func isOllama(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

// writeErrorFor writes e in the shape of r's API: Ollama's for /api/,
// OpenAI's otherwise.
func writeErrorFor(w http.ResponseWriter, r *http.Request, e *apiError) {
	if isOllama(r) {
		writeOllamaError(w, e)
		return
	}
	writeError(w, e)
}

// ollamaError is Ollama's error JSON: the message alone.
type ollamaError struct {
	Error string `json:"error"`
}

func writeOllamaError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	if e.close {
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, e.status, ollamaError{Error: e.msg})
}

// ollamaJob is what an Ollama request adds to a job.
type ollamaJob struct {
	// generate: POST /api/generate (else /api/chat).
	generate bool
	// context is /api/generate's "context": the ids of an earlier exchange
	// (its reply's "context"), which the prompt continues.
	context []int32
	// numCtx is options.num_ctx, the context window the request asks for;
	// 0 = the model's.
	numCtx int
	// load: no prompt or messages, Ollama's request to load the model; the
	// reply is empty, with done_reason "load".
	load bool
}

func (o *ollamaJob) isGenerate() bool { return o != nil && o.generate }

func (o *ollamaJob) loadOnly() bool { return o != nil && o.load }

// withContext puts the request's context before the prompt's ids, less
// the prompt's BOS (the context begins with its own): the model continues
// the earlier exchange token for token, resumed from its KV when the
// session still holds it.
func (o *ollamaJob) withContext(rm *sessions.Model, ids []int32) ([]int32, *apiError) {
	if o == nil || len(o.context) == 0 {
		return ids, nil
	}
	vocab := rm.Backend().Config().VocabSize
	for i, id := range o.context {
		if id < 0 || int(id) >= vocab {
			return nil, badField(fmt.Sprintf("context[%d]", i), "%d is not a token id of this model (0 to %d): send back the context a reply of this model gave", id, vocab-1)
		}
	}
	if tok := rm.Tokenizer(); tok.AddsBOS() && len(ids) > 0 && ids[0] == tok.BOS() {
		ids = ids[1:]
	}
	return append(slices.Clone(o.context), ids...), nil
}

// window applies options.num_ctx to a prompt of promptLen ids: the reply
// stops where the window is full ("length"), a window larger than the
// model's context is refused, and so is a prompt that fills it. It returns
// the reply's cap (0 = none).
func (o *ollamaJob) window(rm *sessions.Model, promptLen, maxTokens int) (int, *apiError) {
	if o.numCtx == 0 {
		return maxTokens, nil
	}
	if n := rm.Backend().Config().ContextLen; o.numCtx > n {
		return 0, badField("options.num_ctx", "%d: the model's context holds %d tokens; ask at most that, or leave it out", o.numCtx, n)
	}
	if promptLen >= o.numCtx {
		return 0, apiErr(http.StatusRequestEntityTooLarge, "options.num_ctx", "context_length_exceeded",
			"options.num_ctx: the prompt is %d tokens; the window of %d holds it with no room for a reply: shorten the prompt or widen the window", promptLen, o.numCtx)
	}
	if room := o.numCtx - promptLen; maxTokens <= 0 || maxTokens > room {
		maxTokens = room
	}
	return maxTokens, nil
}

// ollamaMessage is a chat message of an Ollama reply.
type ollamaMessage struct {
	Role      string              `json:"role"`
	Content   string              `json:"content"`
	ToolCalls []ollamaToolCallOut `json:"tool_calls,omitempty"`
}

// ollamaRequest is the body of POST /api/chat and /api/generate: the
// fields of both, each checked by the route that has it.
type ollamaRequest struct {
	Model     *string         `json:"model"`
	Stream    *bool           `json:"stream"`
	Options   json.RawMessage `json:"options"`
	Format    json.RawMessage `json:"format"`
	KeepAlive json.RawMessage `json:"keep_alive"`
	Think     json.RawMessage `json:"think"`
	Logprobs  *bool           `json:"logprobs"`
	TopLogs   *int            `json:"top_logprobs"`
	// Anechat is the OpenAI routes' extension, the speculation width.
	Anechat *struct {
		Width *widthOption `json:"width"`
	} `json:"anechat"`

	// /api/chat.
	Messages []struct {
		Role      string            `json:"role"`
		Content   *string           `json:"content"`
		Images    []json.RawMessage `json:"images"`
		ToolCalls []ollamaToolCall  `json:"tool_calls"`
		// A tool's result names the function (tool_name) and, when the
		// client kept it, the call (tool_call_id).
		ToolName   *string `json:"tool_name"`
		ToolCallID *string `json:"tool_call_id"`
		Thinking   *string `json:"thinking"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`

	// /api/generate.
	Prompt   *string           `json:"prompt"`
	Suffix   *string           `json:"suffix"`
	System   *string           `json:"system"`
	Template *string           `json:"template"`
	Context  []int32           `json:"context"`
	Raw      *bool             `json:"raw"`
	Images   []json.RawMessage `json:"images"`
}

// The options a request may give are honoured (temperature, seed, top_p,
// num_predict, stop, num_ctx: checkOptions), accepted at their neutral
// value only (top_k and the penalties, which this server does not apply),
// or the runtime's own (threads, GPU layers, batch, memory mapping), which
// this server chooses itself and which change no reply.

// ollamaRuntimeOptions are the runtime's options: accepted, changing nothing.
var ollamaRuntimeOptions = []string{"numa", "num_batch", "num_gpu", "main_gpu", "low_vram", "f16_kv", "logits_all",
	"use_mmap", "use_mlock", "num_thread", "num_keep"}

// ollamaNeutralOptions are the options this server does not apply, with the
// value of each that leaves the reply as it is (the only one accepted).
var ollamaNeutralOptions = map[string]float64{"top_k": 0, "repeat_penalty": 1, "presence_penalty": 0, "frequency_penalty": 0,
	"mirostat": 0, "tfs_z": 1, "typical_p": 1, "min_p": 0}

// ollamaScopeOptions only scope a penalty that must be neutral: any value
// leaves the reply as it is.
var ollamaScopeOptions = []string{"repeat_last_n", "penalize_newline", "mirostat_tau", "mirostat_eta"}

// ollamaSettings are the checked options.
type ollamaSettings struct {
	temperature, topP *float64
	seed              *int64
	numPredict        *int
	stops             []string
	numCtx            int
}

// checkOptions reads and checks "options".
func checkOptions(raw json.RawMessage) (ollamaSettings, *apiError) {
	var o ollamaSettings
	if len(raw) == 0 || string(raw) == "null" {
		return o, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return o, badField("options", "want an object of options, such as {\"temperature\": 0, \"num_predict\": 64}")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the first bad option named is always the same one
	for _, k := range keys {
		v, field := m[k], "options."+k
		if string(v) == "null" {
			continue
		}
		num := func() (float64, *apiError) {
			var f float64
			if err := json.Unmarshal(v, &f); err != nil {
				return 0, badField(field, "want a number, got %s", short(v))
			}
			return f, nil
		}
		integer := func() (int64, *apiError) {
			var n int64
			if err := json.Unmarshal(v, &n); err != nil {
				return 0, badField(field, "want an integer, got %s", short(v))
			}
			return n, nil
		}
		switch {
		case k == "temperature" || k == "top_p":
			f, e := num()
			if e != nil {
				return o, e
			}
			if k == "temperature" {
				o.temperature = &f
			} else {
				o.topP = &f
			}
		case k == "seed":
			n, e := integer()
			if e != nil {
				return o, e
			}
			if n >= 0 { // Ollama's -1: a random seed
				o.seed = &n
			}
		case k == "num_predict":
			n, e := integer()
			if e != nil {
				return o, e
			}
			switch {
			case n > 0:
				c := int(min(n, math.MaxInt32))
				o.numPredict = &c
			case n == -1 || n == -2: // until a stop, or the context is full: the same here
			default:
				return o, badField(field, "%d: want a positive number of tokens, or -1 (until the model stops)", n)
			}
		case k == "num_ctx":
			n, e := integer()
			if e != nil {
				return o, e
			}
			if n < 1 || n > math.MaxInt32 {
				return o, badField(field, "%d: want a positive number of tokens, at most the model's context", n)
			}
			o.numCtx = int(n)
		case k == "stop":
			var st stopList
			if err := json.Unmarshal(v, &st); err != nil {
				return o, badField(field, "want a string or an array of strings")
			}
			if len(st) > maxOllamaStops {
				return o, badField(field, "%d strings: at most %d", len(st), maxOllamaStops)
			}
			for i, s := range st {
				if s == "" {
					return o, badField(fmt.Sprintf("%s[%d]", field, i), "an empty string would stop at once")
				}
			}
			o.stops = st
		case k == "vocab_only" || k == "embedding_only":
			var b bool
			if err := json.Unmarshal(v, &b); err != nil || b {
				return o, badField(field, "not supported: this route generates text; leave it out or false")
			}
		case slices.Contains(ollamaRuntimeOptions, k) || slices.Contains(ollamaScopeOptions, k):
			// Chosen by this server; no reply depends on them.
		default:
			neutral, known := ollamaNeutralOptions[k]
			if !known {
				return o, badField(field, "not an option this server knows (it honours temperature, seed, top_p, num_predict, stop and num_ctx)")
			}
			f, e := num()
			if e != nil {
				return o, e
			}
			if f != neutral {
				return o, badField(field, "%v: not supported (it would change the model's choices); leave it out or %v", f, neutral)
			}
		}
	}
	return o, nil
}

// checkKeepAlive accepts keep_alive as Ollama does (a number of seconds or
// a duration such as "5m"); the server keeps the model loaded by its own
// rule, so the value changes nothing. zero reports a keep_alive of 0:
// Ollama's "unload now".
func checkKeepAlive(raw json.RawMessage) (zero bool, e *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f == 0, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if d, err := time.ParseDuration(s); err == nil {
			return d == 0, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f == 0, nil
		}
	}
	return false, badField("keep_alive", "want a number of seconds or a duration such as \"5m\", got %s", short(raw))
}

// short is a JSON value as an error quotes it: at most 40 bytes of it.
func short(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) > 40 {
		return string(v[:37]) + "..."
	}
	return string(v)
}

// ollamaFormat reads "format": "json" (any JSON object, as response_format
// json_object) or a JSON schema (as response_format json_schema's, its
// keywords named under "format"), enforced by constrained decoding; "" or
// null is text.
func ollamaFormat(raw json.RawMessage) (*constrain.Grammar, *apiError) {
	v := bytes.TrimSpace(raw)
	switch {
	case len(v) == 0 || string(v) == "null" || string(v) == `""`:
		return nil, nil
	case string(v) == `"json"`:
		return objectGrammar("format")
	case v[0] == '{':
		return schemaGrammar("format", v)
	}
	return nil, badField("format", "%s: want \"json\" or a JSON schema object", short(v))
}

// ollamaLogprobs reads logprobs (true or false) and top_logprobs (0..20,
// only with logprobs true), as chat's.
func ollamaLogprobs(on *bool, top *int) (bool, int, *apiError) {
	lp := on != nil && *on
	if top == nil {
		return lp, 0, nil
	}
	switch {
	case *top < 0 || *top > sample.MaxTopLogprobs:
		return lp, 0, badField("top_logprobs", "%d: want 0 to %d alternatives per token", *top, sample.MaxTopLogprobs)
	case !lp && *top > 0:
		return lp, 0, badField("top_logprobs", "only allowed with \"logprobs\": true")
	}
	return lp, *top, nil
}

// ollamaToolCall is a call of an assistant message in a request's history:
// the function's name and its arguments as a JSON object (not text, as
// OpenAI's are), and an id when the client kept the reply's.
type ollamaToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaToolCallOut is a call of a reply's message.
type ollamaToolCallOut struct {
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// toolCallsOut writes calls in Ollama's shape. A call's arguments are a
// JSON object as the model wrote them (chat.ToolFormat's parser reads only
// such calls).
func toolCallsOut(calls []chat.ToolCall) []ollamaToolCallOut {
	out := make([]ollamaToolCallOut, len(calls))
	for i, c := range calls {
		out[i].ID, out[i].Function.Name = c.ID, c.Name
		args := json.RawMessage(c.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(c.Arguments) // never: such a reply is text
		}
		out[i].Function.Arguments = args
	}
	return out
}

// job checks the request and returns it as a job, with the defaults d.
func (r *ollamaRequest) job(generate bool, d Defaults) (job, *apiError) {
	j := job{ollama: &ollamaJob{generate: generate}}
	if r.Model == nil || *r.Model == "" {
		return j, badField("model", "required: the name of a model GET /api/tags lists")
	}
	if t := strings.TrimSpace(string(r.Think)); t != "" && t != "null" && t != "false" {
		return j, badField("think", "%s: this server does not separate a model's thinking from its reply; leave it out or false", t)
	}
	unload, e := checkKeepAlive(r.KeepAlive)
	if e != nil {
		return j, e
	}
	o, e := checkOptions(r.Options)
	if e != nil {
		return j, e
	}
	j.ollama.numCtx = o.numCtx
	// The settings go through the OpenAI routes' checks; their fields are
	// options here.
	stream := r.Stream == nil || *r.Stream // Ollama streams unless told not to
	sm := sampling{Model: r.Model, Temperature: o.temperature, TopP: o.topP, Seed: o.seed, MaxTokens: o.numPredict, Stream: &stream, Anechat: r.Anechat}
	p, e := sm.check(d)
	if e != nil {
		if !strings.HasPrefix(e.param, "anechat.") {
			e.param = "options." + e.param
			e.msg = "options." + e.msg
		}
		return j, e
	}
	p.stops = o.stops
	if p.format, e = ollamaFormat(r.Format); e != nil {
		return j, e
	}
	if p.logprobs, p.topLogprobs, e = ollamaLogprobs(r.Logprobs, r.TopLogs); e != nil {
		return j, e
	}
	j.p = p
	if generate {
		e = r.generateJob(&j)
	} else {
		e = r.chatJob(&j)
	}
	if e == nil && j.ollama.load && unload {
		// Nothing to generate and keep_alive 0: Ollama's request to unload
		// the model, which the server shares (the app's chat, other
		// clients) and keeps by its own rule.
		e = badField("keep_alive", "0 with nothing to generate asks to unload the model, which this server does not do on request (it keeps the model it serves loaded, and drops it for another)")
	}
	return j, e
}

// chatJob checks /api/chat's own fields into j.
func (r *ollamaRequest) chatJob(j *job) *apiError {
	j.chat = true
	for _, f := range []struct {
		name string
		set  bool
	}{{"prompt", r.Prompt != nil}, {"system", r.System != nil}, {"template", r.Template != nil}, {"context", r.Context != nil},
		{"raw", r.Raw != nil}, {"suffix", r.Suffix != nil}, {"images", r.Images != nil}} {
		if f.set {
			return badField(f.name, "a field of /api/generate, not of /api/chat: send the conversation as messages")
		}
	}
	// Tools as OpenAI's (Ollama sends the same objects), offered to a
	// model that may call them: Ollama has no tool_choice.
	tools, _, e := checkTools("tools", r.Tools)
	if e != nil {
		return e
	}
	j.tools = toolJob{tools: tools, choice: toolChoice{mode: "auto"}}
	if len(tools) == 0 {
		j.tools = toolJob{choice: toolChoice{mode: "none"}}
	}
	if len(r.Messages) == 0 {
		j.ollama.load = true
		return nil
	}
	// Ollama's calls carry no ids, nor its tool messages the call they
	// answer: a call without one is named by its place (the same in every
	// request, so a conversation renders the same and resumes from KV), and
	// a tool message answers the earliest unanswered call of its function
	// (of any, without tool_name).
	type pendingCall struct{ id, name string }
	var pending []pendingCall
	for i, m := range r.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return badField(at+".role", "%q: want system, user, assistant or tool", m.Role)
		}
		switch {
		case len(m.Images) > 0:
			return badField(at+".images", "not supported: the model reads text only; leave it out")
		case len(m.ToolCalls) > 0 && m.Role != chat.RoleAssistant:
			return badField(at+".tool_calls", "only an assistant message makes calls")
		case m.Thinking != nil && *m.Thinking != "":
			return badField(at+".thinking", "not supported: this server does not separate a model's thinking from its reply; leave it out")
		}
		content := ""
		if m.Content != nil {
			content = *m.Content
		}
		msg := chat.Message{Role: m.Role, Content: content}
		for k, c := range m.ToolCalls {
			cat := fmt.Sprintf("%s.tool_calls[%d].function", at, k)
			if c.Function.Name == nil || *c.Function.Name == "" {
				return badField(cat+".name", "required: the name of the function called")
			}
			args := bytes.TrimSpace(c.Function.Arguments)
			switch {
			case len(args) == 0 || string(args) == "null":
				args = []byte("{}")
			case !isJSONObject(args):
				return badField(cat+".arguments", "want a JSON object of the arguments")
			}
			id := c.ID
			if id == "" {
				id = fmt.Sprintf("call_%d_%d", i, k)
			}
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: id, Name: *c.Function.Name, Arguments: string(args)})
			pending = append(pending, pendingCall{id, *c.Function.Name})
		}
		if m.Role == chat.RoleTool {
			if m.ToolName != nil {
				msg.Name = *m.ToolName
			}
			answered := slices.IndexFunc(pending, func(c pendingCall) bool { return msg.Name == "" || c.name == msg.Name })
			switch {
			case m.ToolCallID != nil && *m.ToolCallID != "":
				msg.ToolCallID = *m.ToolCallID
				answered = slices.IndexFunc(pending, func(c pendingCall) bool { return c.id == msg.ToolCallID })
			case answered >= 0:
				msg.ToolCallID = pending[answered].id
			default:
				msg.ToolCallID = fmt.Sprintf("call_%d", i)
			}
			if answered >= 0 {
				if msg.Name == "" {
					msg.Name = pending[answered].name
				}
				pending = slices.Delete(pending, answered, answered+1)
			}
		} else if m.ToolName != nil && *m.ToolName != "" {
			return badField(at+".tool_name", "only a tool message names the function it ran")
		}
		j.msgs = append(j.msgs, msg)
	}
	return nil
}

// generateJob checks /api/generate's own fields into j.
func (r *ollamaRequest) generateJob(j *job) *apiError {
	if r.Messages != nil {
		return badField("messages", "a field of /api/chat, not of /api/generate: send the text as prompt")
	}
	if r.Tools != nil {
		return badField("tools", "a field of /api/chat, not of /api/generate: offer tools in a chat")
	}
	raw := r.Raw != nil && *r.Raw
	switch {
	case r.Template != nil && *r.Template != "":
		return badField("template", "not supported: the model's own chat template renders the prompt; leave it out, or send the prompt formatted with \"raw\": true")
	case r.Suffix != nil && *r.Suffix != "":
		return badField("suffix", "not supported (no fill-in-the-middle); leave it out")
	case len(r.Images) > 0:
		return badField("images", "not supported: the model reads text only; leave it out")
	case raw && r.System != nil && *r.System != "":
		return badField("system", "not used with \"raw\": true, which sends the prompt as it is: put it in the prompt, or leave raw out")
	}
	j.ollama.context = r.Context
	prompt := ""
	if r.Prompt != nil {
		prompt = *r.Prompt
	}
	if prompt == "" {
		j.ollama.load = true
		return nil
	}
	if raw {
		j.chat, j.prompt = false, prompt
		return nil
	}
	j.chat = true // the prompt as a user message, through the chat template
	if r.System != nil && *r.System != "" {
		j.msgs = append(j.msgs, chat.Message{Role: chat.RoleSystem, Content: *r.System})
	}
	j.msgs = append(j.msgs, chat.Message{Role: chat.RoleUser, Content: prompt})
	return nil
}

// ollamaCompletion is the handler of POST /api/chat (generate false) or
// /api/generate.
func (s *Server) ollamaCompletion(generate bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		var req ollamaRequest
		if e := decode(r, &req); e != nil {
			writeOllamaError(w, e)
			return
		}
		j, e := req.job(generate, s.cfg.Defaults(r.Context()))
		if e != nil {
			writeOllamaError(w, e)
			return
		}
		m, e := s.ollamaModel(r.Context(), j.p.model)
		if e != nil {
			writeOllamaError(w, e)
			return
		}
		j.p.model, j.began = m.ID, began
		s.run(w, r, j)
	}
}

// ollamaModel finds the model a request names, with Ollama's 404. A name
// without a tag is Ollama's name with the tag "latest": "stories260K:latest"
// is the model GET /api/tags lists as stories260K.
func (s *Server) ollamaModel(ctx context.Context, name string) (Model, *apiError) {
	m, e := s.model(ctx, name)
	if base, ok := strings.CutSuffix(name, ":latest"); e != nil && e.status == http.StatusNotFound && ok {
		if m2, e2 := s.model(ctx, base); e2 == nil {
			return m2, nil
		}
	}
	if e != nil && e.status == http.StatusNotFound {
		ms, _ := s.models(ctx)
		ids := make([]string, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
		}
		e.msg = fmt.Sprintf("model %q not found: this server serves %s (GET /api/tags lists them)", name, strings.Join(ids, ", "))
	}
	return m, e
}

// ollamaReply is a reply of /api/chat or /api/generate, whole or a line of
// its stream.
type ollamaReply struct {
	Model     string `json:"model"`
	CreatedAt string `json:"created_at"`
	// Message is /api/chat's, Response /api/generate's.
	Message    *ollamaMessage `json:"message,omitempty"`
	Response   *string        `json:"response,omitempty"`
	Done       bool           `json:"done"`
	DoneReason string         `json:"done_reason,omitempty"`
	// Context is /api/generate's: the ids of the prompt and the reply, for
	// the next request to continue.
	Context []int32 `json:"context,omitempty"`
	// Logprobs are those of the tokens the line's text starts, when asked.
	Logprobs []chatTokenLogprob `json:"logprobs,omitempty"`
	*ollamaFigures
	Anechat *figures `json:"anechat,omitempty"`
}

// ollamaFigures are the counts and durations (nanoseconds) of a finished
// reply.
type ollamaFigures struct {
	// TotalDuration runs from the request's arrival to the reply's end;
	// LoadDuration to when the model was ready for it (the queue and a
	// load); PromptEvalDuration is the prefill to the first token (resumed
	// positions cost none); EvalDuration the rest.
	TotalDuration      int64 `json:"total_duration"`
	LoadDuration       int64 `json:"load_duration"`
	PromptEvalCount    int   `json:"prompt_eval_count"`
	PromptEvalDuration int64 `json:"prompt_eval_duration"`
	EvalCount          int   `json:"eval_count"`
	EvalDuration       int64 `json:"eval_duration"`
}

// ollamaOutput writes one reply in Ollama's shape: one JSON object at the
// end, or NDJSON lines as the text comes (the status goes out with the
// first, so an error before any text still gets its own status).
type ollamaOutput struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	j        job
	tok      *tokenizer.Tokenizer
	text     []byte              // the whole reply, when not streamed
	logprobs []tokenLogprob      // its tokens' logprobs, when asked
	calls    []ollamaToolCallOut // its calls
	started  bool
}

func newOllamaOutput(w http.ResponseWriter, j job) *ollamaOutput {
	return &ollamaOutput{w: w, rc: http.NewResponseController(w), j: j}
}

// line is a reply carrying text.
func (o *ollamaOutput) line(text string) ollamaReply {
	r := ollamaReply{Model: o.j.p.model, CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	if o.j.ollama.generate {
		r.Response = &text
	} else {
		r.Message = &ollamaMessage{Role: chat.RoleAssistant, Content: text}
	}
	return r
}

// useTokenizer implements replyWriter: logprobs spell their tokens with it.
func (o *ollamaOutput) useTokenizer(tok *tokenizer.Tokenizer) { o.tok = tok }

// lps are tokens' logprobs in Ollama's shape (OpenAI chat's entries).
func (o *ollamaOutput) lps(tokens []tokenLogprob) []chatTokenLogprob {
	if len(tokens) == 0 || o.tok == nil {
		return nil
	}
	return logprobsJSON(o.tok, true, tokens).(*chatLogprobs).Content
}

// toolCalls implements replyWriter: the calls go in the reply's message, or
// in a line of their own before the last.
func (o *ollamaOutput) toolCalls(calls []chat.ToolCall) error {
	if !o.j.p.stream {
		o.calls = append(o.calls, toolCallsOut(calls)...)
		return nil
	}
	l := o.line("")
	l.Message.ToolCalls = toolCallsOut(calls)
	return o.send(l)
}

func (o *ollamaOutput) piece(text string, lps []tokenLogprob) error {
	if text == "" && len(lps) == 0 {
		return nil
	}
	if !o.j.p.stream {
		o.text = append(o.text, text...)
		o.logprobs = append(o.logprobs, lps...)
		return nil
	}
	l := o.line(text)
	l.Logprobs = o.lps(lps)
	return o.send(l)
}

// send writes one line of the stream and flushes it to the client.
func (o *ollamaOutput) send(v any) error {
	if !o.started {
		o.started = true
		h := o.w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		o.w.WriteHeader(http.StatusOK)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := o.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return o.rc.Flush()
}

func (o *ollamaOutput) finish(end replyEnd) error {
	last := o.line("")
	if !o.j.p.stream {
		last = o.line(string(o.text))
		last.Logprobs = o.lps(o.logprobs)
		if last.Message != nil {
			last.Message.ToolCalls = o.calls
		}
	}
	// A reply that called tools is done as any that stopped: Ollama's
	// done_reason has no "tool_calls".
	last.Done, last.DoneReason = true, strings.Replace(end.reason, "tool_calls", "stop", 1)
	if end.reason != "load" {
		ttft := time.Duration(end.stats.TTFTms * float64(time.Millisecond))
		last.ollamaFigures = &ollamaFigures{
			TotalDuration:      int64(time.Since(o.j.began)),
			LoadDuration:       int64(end.loaded.Sub(o.j.began)),
			PromptEvalCount:    end.usage.PromptTokens,
			PromptEvalDuration: int64(ttft),
			EvalCount:          end.usage.CompletionTokens,
			EvalDuration:       int64(max(0, end.ended.Sub(end.loaded)-ttft)),
		}
		last.Anechat = end.fig
		if o.j.ollama.generate {
			last.Context = append(slices.Clip(end.prompt), end.reply...)
		}
	}
	if !o.j.p.stream {
		writeJSON(o.w, http.StatusOK, last)
		return o.rc.Flush() // before the snapshot is saved
	}
	return o.send(last)
}

func (o *ollamaOutput) fail(e *apiError) {
	if !o.started {
		writeOllamaError(o.w, e)
		return
	}
	o.send(ollamaError{Error: e.msg})
}

// ollamaModelInfo is what GET /api/tags and POST /api/show say of a model.
type ollamaModelInfo struct {
	Name       string        `json:"name"`
	Model      string        `json:"model"`
	ModifiedAt string        `json:"modified_at,omitempty"`
	Size       int64         `json:"size"`
	Digest     string        `json:"digest"`
	Details    ollamaDetails `json:"details"`
}

// ollamaDetails are a model's format, family, size and quantization.
type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

// describe reads what the model's files say of it (load.Detect: headers
// and the fingerprint, no weights). A model it cannot read is still listed,
// by name, as /v1/models lists it; the load says what is wrong.
func (s *Server) describe(m Model) (ollamaModelInfo, load.Source) {
	info := ollamaModelInfo{Name: m.ID, Model: m.ID, Details: ollamaDetails{Families: []string{}}}
	if !m.Created.IsZero() {
		info.ModifiedAt = m.Created.UTC().Format(time.RFC3339Nano)
	}
	src, err := detect(m.Path)
	if err != nil {
		s.log.Warn("api: cannot describe a model", "model", m.ID, "err", err)
		return info, src
	}
	sum := sha256.Sum256([]byte(src.Fingerprint))
	info.Size, info.Digest = src.SizeBytes, hex.EncodeToString(sum[:])
	info.Details = ollamaDetails{Format: string(src.Format), Family: src.Arch, Families: []string{src.Arch},
		ParameterSize: humanCount(src.Params), QuantizationLevel: src.Quant}
	return info, src
}

// detections keeps load.Detect's answer for each model path, with the size
// and modification time of the path and of each file it read: Detect hashes
// megabytes of every file (the fingerprint), and clients ask GET /api/tags
// often, so a model is read again only once one of its files changed.
var detections struct {
	mu sync.Mutex
	m  map[string]detection
}

type detection struct {
	src load.Source
	sig string
}

// maxDetections bounds the kept answers (a server serves a few models).
const maxDetections = 16

// detect is load.Detect(path), kept while the model's files stay as they
// were.
func detect(path string) (load.Source, error) {
	detections.mu.Lock()
	d, ok := detections.m[path]
	detections.mu.Unlock()
	if ok && filesSig(path, d.src.Files) == d.sig {
		return d.src, nil
	}
	src, err := load.Detect(path)
	if err != nil {
		return src, err
	}
	detections.mu.Lock()
	defer detections.mu.Unlock()
	if detections.m == nil || len(detections.m) >= maxDetections {
		detections.m = map[string]detection{}
	}
	detections.m[path] = detection{src, filesSig(path, src.Files)}
	return src, nil
}

// filesSig is the size and modification time of path and files, one line
// each ("-" for one that cannot be read).
func filesSig(path string, files []string) string {
	var b strings.Builder
	for _, f := range append([]string{path}, files...) {
		if st, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", f, st.Size(), st.ModTime().UnixNano())
		} else {
			fmt.Fprintf(&b, "%s -\n", f)
		}
	}
	return b.String()
}

// humanCount writes a parameter count as Ollama's details do: "260K",
// "1.2B".
func humanCount(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n >= 1e9:
		return strconv.FormatFloat(float64(n)/1e9, 'f', 1, 64) + "B"
	case n >= 1e6:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
	case n >= 1e3:
		return strconv.FormatFloat(math.Round(float64(n)/1e3), 'f', 0, 64) + "K"
	}
	return strconv.FormatInt(n, 10)
}

// ollamaPS is GET /api/ps: the served models loaded now (the sessions
// manager holds one at a time), without an expiry: the server keeps a
// model until another is asked for.
func (s *Server) ollamaPS(w http.ResponseWriter, r *http.Request) {
	ms, e := s.models(r.Context())
	if e != nil {
		writeOllamaError(w, e)
		return
	}
	out := struct {
		Models []ollamaModelInfo `json:"models"`
	}{Models: []ollamaModelInfo{}}
	loaded := s.cfg.Sessions.LoadedPath()
	for _, m := range ms {
		if loaded != "" && m.Path == loaded {
			info, _ := s.describe(m)
			out.Models = append(out.Models, info)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	ms, e := s.models(r.Context())
	if e != nil {
		writeOllamaError(w, e)
		return
	}
	out := struct {
		Models []ollamaModelInfo `json:"models"`
	}{Models: []ollamaModelInfo{}}
	for _, m := range ms {
		info, _ := s.describe(m)
		out.Models = append(out.Models, info)
	}
	writeJSON(w, http.StatusOK, out)
}

// ollamaShowReply is POST /api/show's reply.
type ollamaShowReply struct {
	ModifiedAt   string         `json:"modified_at,omitempty"`
	Parameters   string         `json:"parameters"`
	Details      ollamaDetails  `json:"details"`
	ModelInfo    map[string]any `json:"model_info"`
	Capabilities []string       `json:"capabilities"`
}

func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model   *string `json:"model"`
		Name    *string `json:"name"` // Ollama's older name of the field
		Verbose *bool   `json:"verbose"`
	}
	if e := decode(r, &req); e != nil {
		writeOllamaError(w, e)
		return
	}
	if req.Model == nil || *req.Model == "" {
		req.Model = req.Name
	}
	if req.Model == nil || *req.Model == "" {
		writeOllamaError(w, badField("model", "required: the name of a model GET /api/tags lists"))
		return
	}
	m, e := s.ollamaModel(r.Context(), *req.Model)
	if e != nil {
		writeOllamaError(w, e)
		return
	}
	info, src := s.describe(m)
	// The context length and the vocabulary are the loaded model's (a
	// backend may hold less context than the file declares): this waits
	// for a running reply, as a chat would.
	var cfgArch, tmpl string
	var ctxLen, vocab int
	caps := []string{"completion"}
	err := s.cfg.Sessions.Do(r.Context(), m.Path, func(rm *sessions.Model) error {
		c := rm.Backend().Config()
		cfgArch, ctxLen, vocab, tmpl = c.Arch, c.ContextLen, c.VocabSize, rm.Template().Name()
		if chat.ToolFormatOf(rm.Template()) != chat.NoTools {
			caps = append(caps, "tools") // its template renders them, and its calls are read
		}
		return nil
	})
	if err != nil {
		if r.Context().Err() != nil {
			return // the client has gone
		}
		writeOllamaError(w, m.public(&apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}))
		return
	}
	arch := src.Arch
	if arch == "" {
		arch = cfgArch
	}
	mi := map[string]any{
		"general.architecture":   arch,
		arch + ".context_length": ctxLen,
		arch + ".vocab_size":     vocab,
		"anechat.chat_template":  tmpl,
	}
	if src.Params > 0 {
		mi["general.parameter_count"] = src.Params
	}
	d := s.cfg.Defaults(r.Context())
	var params bytes.Buffer
	fmt.Fprintf(&params, "temperature %v\n", d.Temperature)
	if d.MaxTokens > 0 {
		fmt.Fprintf(&params, "num_predict %d\n", d.MaxTokens)
	}
	fmt.Fprintf(&params, "num_ctx %d\n", ctxLen)
	writeJSON(w, http.StatusOK, ollamaShowReply{ModifiedAt: info.ModifiedAt, Parameters: params.String(), Details: info.Details,
		ModelInfo: mi, Capabilities: caps})
}
