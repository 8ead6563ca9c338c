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
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"anechat/engine/chat"
	"anechat/engine/load"
	"anechat/engine/tokenizer"
	"anechat/internal/sessions"
)

// Ollama's API, for the clients that speak only it: POST /api/chat and
// /api/generate (NDJSON streams), GET /api/tags, POST /api/show and GET
// /api/version. They run on the same path as the OpenAI routes (the token,
// Host and CORS checks, the queue, internal/sessions and its resume from
// KV); only the request's fields and the reply's shape differ. What this
// server cannot honour is refused with a 400 naming the field, as the
// OpenAI routes do, never ignored.

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

// ollamaMessage is a chat message of an Ollama request or reply.
type ollamaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
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

	// /api/chat.
	Messages []struct {
		Role      string            `json:"role"`
		Content   *string           `json:"content"`
		Images    []json.RawMessage `json:"images"`
		ToolCalls []json.RawMessage `json:"tool_calls"`
		ToolName  *string           `json:"tool_name"`
		Thinking  *string           `json:"thinking"`
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

// ollamaOptions are the options a request may give: honoured (temperature,
// seed, top_p, num_predict, stop, num_ctx), neutral only (top_k and the
// penalties, which this server does not apply), or the runtime's own
// (threads, GPU layers, batch, memory mapping), which this server chooses
// itself and which change no reply.
var ollamaRuntimeOptions = []string{"numa", "num_batch", "num_gpu", "main_gpu", "low_vram", "f16_kv", "logits_all",
	"use_mmap", "use_mlock", "num_thread", "num_keep"}

// neutral are the values of the options this server does not apply that
// leave the reply as it is.
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
				return 0, badField(field, "want a number, got %s", v)
			}
			return f, nil
		}
		integer := func() (int64, *apiError) {
			var n int64
			if err := json.Unmarshal(v, &n); err != nil {
				return 0, badField(field, "want an integer, got %s", v)
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
// rule, so the value changes nothing.
func checkKeepAlive(raw json.RawMessage) *apiError {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if _, err := time.ParseDuration(s); err == nil {
			return nil
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return nil
		}
	}
	return badField("keep_alive", "want a number of seconds or a duration such as \"5m\", got %s", raw)
}

// coming refuses a field issue 25 adds to this server but that is not here
// yet.
func coming(field, what string) *apiError {
	return badField(field, "%s is coming to this server (issue 25) but is not supported yet; leave it out", what)
}

// job checks the request and returns it as a job, with the defaults d.
func (r *ollamaRequest) job(generate bool, d Defaults) (job, *apiError) {
	j := job{ollama: &ollamaJob{generate: generate}}
	if r.Model == nil || *r.Model == "" {
		return j, badField("model", "required: the name of a model GET /api/tags lists")
	}
	switch f := strings.TrimSpace(string(r.Format)); f {
	case "", "null", `""`:
	default:
		return j, coming("format", "structured output (\"json\" or a JSON schema)")
	}
	if len(r.Tools) > 0 {
		return j, coming("tools", "function calling")
	}
	if r.Logprobs != nil && *r.Logprobs {
		return j, coming("logprobs", "log-probabilities")
	}
	if r.TopLogs != nil && *r.TopLogs != 0 {
		return j, coming("top_logprobs", "log-probabilities")
	}
	if t := strings.TrimSpace(string(r.Think)); t != "" && t != "null" && t != "false" {
		return j, badField("think", "%s: this server does not separate a model's thinking from its reply; leave it out or false", t)
	}
	if e := checkKeepAlive(r.KeepAlive); e != nil {
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
	sm := sampling{Model: r.Model, Temperature: o.temperature, TopP: o.topP, Seed: o.seed, MaxTokens: o.numPredict, Stream: &stream}
	p, e := sm.check(d)
	if e != nil {
		e.param = "options." + e.param
		e.msg = "options." + e.msg
		return j, e
	}
	p.stops = o.stops
	j.p = p
	if generate {
		return j, r.generateJob(&j)
	}
	return j, r.chatJob(&j)
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
	if len(r.Messages) == 0 {
		j.ollama.load = true
		return nil
	}
	for i, m := range r.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant:
		case "tool":
			return coming(at+".role", "function calling (tool results)")
		default:
			return badField(at+".role", "%q: want system, user or assistant", m.Role)
		}
		switch {
		case len(m.Images) > 0:
			return badField(at+".images", "not supported: the model reads text only; leave it out")
		case len(m.ToolCalls) > 0:
			return coming(at+".tool_calls", "function calling")
		case m.ToolName != nil && *m.ToolName != "":
			return coming(at+".tool_name", "function calling")
		case m.Thinking != nil && *m.Thinking != "":
			return badField(at+".thinking", "not supported: this server does not separate a model's thinking from its reply; leave it out")
		}
		content := ""
		if m.Content != nil {
			content = *m.Content
		}
		j.msgs = append(j.msgs, chat.Message{Role: m.Role, Content: content})
	}
	return nil
}

// generateJob checks /api/generate's own fields into j.
func (r *ollamaRequest) generateJob(j *job) *apiError {
	if r.Messages != nil {
		return badField("messages", "a field of /api/chat, not of /api/generate: send the text as prompt")
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
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       job
	text    []byte // the whole reply, when not streamed
	started bool
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

// useTokenizer implements replyWriter: Ollama's replies spell no tokens.
func (o *ollamaOutput) useTokenizer(*tokenizer.Tokenizer) {}

// toolCalls implements replyWriter. An Ollama request offers no tools yet
// (ollamaRequest refuses "tools"), so no reply is read as calls.
func (o *ollamaOutput) toolCalls(calls []chat.ToolCall) error {
	if len(calls) == 0 {
		return nil
	}
	return fmt.Errorf("server: an Ollama reply read as %d tool calls, though its request offered no tools", len(calls))
}

func (o *ollamaOutput) piece(text string, _ []tokenLogprob) error {
	if text == "" {
		return nil
	}
	if !o.j.p.stream {
		o.text = append(o.text, text...)
		return nil
	}
	return o.send(o.line(text))
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
	}
	last.Done, last.DoneReason = true, end.reason
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
	src, err := load.Detect(m.Path)
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
	err := s.cfg.Sessions.Do(r.Context(), m.Path, func(rm *sessions.Model) error {
		c := rm.Backend().Config()
		cfgArch, ctxLen, vocab, tmpl = c.Arch, c.ContextLen, c.VocabSize, rm.Template().Name()
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
		ModelInfo: mi, Capabilities: []string{"completion"}})
}
