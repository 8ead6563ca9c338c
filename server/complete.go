package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/model"
	"anechat/engine/tokenizer"
	"anechat/internal/sessions"
)

// job is one completion to run: what the handler parsed and checked.
type job struct {
	chat   bool // a chat completion (else a text completion)
	model  Model
	msgs   []chat.Message // chat
	prompt string         // text completion
	p      params
	tools  toolJob // chat: the tools offered (server/tools.go)
	// began is when the request arrived (run sets it).
	began time.Time
	// ollama, when not nil, is an Ollama request's own settings: its reply
	// goes out in Ollama's shape (ollamaOutput), else in OpenAI's (output).
	ollama *ollamaJob
}

// replyWriter sends one reply in its API's shape as it is generated.
type replyWriter interface {
	// useTokenizer gives the writer the model's tokenizer once it is
	// loaded, to spell the tokens of logprobs.
	useTokenizer(tok *tokenizer.Tokenizer)
	// piece sends (or keeps, when not streamed) a piece of the reply's
	// text, with the logprobs of the tokens it starts (when asked).
	piece(text string, lps []tokenLogprob) error
	// toolCalls sends (or keeps) the calls the reply was read as.
	toolCalls(calls []chat.ToolCall) error
	// finish ends the reply.
	finish(end replyEnd) error
	// fail reports e: with its status before anything was sent, else in
	// the stream.
	fail(e *apiError)
}

// replyEnd is how a reply ended: what its last event reports.
type replyEnd struct {
	reason string // "stop" or "length"
	usage  usage
	fig    *figures
	stats  engine.Stats
	// prompt and reply are the ids the model was given and those it
	// generated (Ollama's "context").
	prompt, reply []int32
	// loaded is when the model was ready for the request (after the queue
	// and the load); ended when the reply's last token came.
	loaded, ended time.Time
}

// newWriter returns the writer of j's reply in its API's shape.
func newWriter(w http.ResponseWriter, j job) replyWriter {
	if j.ollama != nil {
		return newOllamaOutput(w, j)
	}
	return newOutput(w, j)
}

// request is a completion request's body: it checks itself into a job.
type request interface {
	job(d Defaults) (job, *apiError)
}

// completion is the handler of a completion endpoint whose body is a new
// request.
func (s *Server) completion(body func() request) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req := body()
		if e := decode(r, req); e != nil {
			writeError(w, e)
			return
		}
		j, e := req.job(s.cfg.Defaults(r.Context()))
		if e != nil {
			writeError(w, e)
			return
		}
		s.run(w, r, j)
	}
}

// run queues j for the model and generates its reply.
func (s *Server) run(w http.ResponseWriter, r *http.Request, j job) {
	ctx := r.Context()
	began := time.Now()
	if j.began.IsZero() {
		j.began = began
	}
	m, e := s.model(ctx, j.p.model)
	if e != nil {
		newWriter(w, j).fail(e)
		return
	}
	j.model = m
	release, err := s.queue.acquire(ctx)
	if errors.Is(err, errQueueFull) {
		newWriter(w, j).fail(&apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "queue_full", retryAfter: s.queue.retryAfter(),
			msg: fmt.Sprintf("the model is busy and %d requests already wait for it: retry later", s.cfg.Queue)})
		return
	}
	if err != nil {
		s.log.Info("api request gave up in the queue", "path", r.URL.Path, "err", err)
		return // the client has gone: nobody to answer
	}
	defer release()
	out := newWriter(w, j)
	var st engine.Stats
	var promptLen int
	err = s.cfg.Sessions.Do(ctx, m.Path, func(rm *sessions.Model) error {
		st, promptLen, err = s.reply(ctx, rm, j, out)
		return err
	})
	var ae *apiError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// The client went away (or the server is stopping): the
		// generation stopped at its next model call; nobody reads on.
		s.log.Info("api request cancelled", "path", r.URL.Path, "model", m.ID, "tokens", st.Tokens, "after", time.Since(began))
		return
	case errors.As(err, &ae):
		out.fail(m.public(ae))
	default:
		s.log.Error("api request failed", "path", r.URL.Path, "model", m.ID, "err", err)
		out.fail(m.public(&apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}))
	}
	if err == nil {
		s.log.Info("api request", "path", r.URL.Path, "model", m.ID, "stream", j.p.stream, "prompt_tokens", promptLen,
			"resumed", st.ResumedTokens, "prefilled", st.PrefillTokens, "tokens", st.Tokens, "stopped", st.Stopped,
			"ttft_ms", st.TTFTms, "calls", st.TargetCalls, "accepted", st.Accepted, "drafted", st.Drafted, "took", time.Since(began))
	}
}

// reply renders j's prompt on the loaded model, checks it fits, generates
// through the stop filter into out, and saves the KV snapshot once the
// reply is sent.
func (s *Server) reply(ctx context.Context, rm *sessions.Model, j job, out replyWriter) (engine.Stats, int, error) {
	loaded := time.Now()
	if j.ollama.loadOnly() {
		return engine.Stats{}, 0, out.finish(replyEnd{reason: "load", loaded: loaded, ended: loaded})
	}
	mode, ids, e := prompt(ctx, rm, j)
	if e != nil {
		return engine.Stats{}, 0, e
	}
	if n := rm.Backend().Config().ContextLen; len(ids) >= n {
		return engine.Stats{}, len(ids), apiErr(http.StatusRequestEntityTooLarge, promptField(j), "context_length_exceeded",
			"%s: the prompt is %d tokens; the model's context holds %d, and the reply needs at least one more: shorten it", promptField(j), len(ids), n)
	}
	maxTokens := j.p.maxTokens
	if j.ollama != nil {
		if maxTokens, e = j.ollama.window(rm, len(ids), maxTokens); e != nil {
			return engine.Stats{}, len(ids), e
		}
	}
	seed := j.p.seed
	if !j.p.seeded {
		seed = randomSeed()
	}
	if j.p.logprobs && model.ArgmaxOnly(rm.Backend()) {
		return engine.Stats{}, len(ids), badField("logprobs", "model %s returns only its greedy token (a published Core ML bundle), not the logits logprobs come from: leave logprobs out, or use the model's GGUF or Hugging Face weights", j.model.ID)
	}
	out.useTokenizer(rm.Tokenizer())
	format := chat.NoTools
	if len(j.tools.tools) > 0 {
		format = chat.ToolFormatOf(rm.Template())
	}
	g := j.p.format
	if j.tools.choice.forced() {
		var e *apiError
		if g, e = forcedCall(format, j.tools); e != nil {
			return engine.Stats{}, len(ids), e
		}
	}
	if g != nil && model.ArgmaxOnly(rm.Backend()) {
		field, what := "response_format", "structured output"
		if j.tools.choice.forced() {
			field, what = "tool_choice", "a forced tool call"
		}
		return engine.Stats{}, len(ids), badField(field, "model %s returns only its greedy token (a published Core ML bundle), not the logits %s masks: leave %s out, or use the model's GGUF or Hugging Face weights", j.model.ID, what, field)
	}
	con, err := constraint(g, rm.Tokenizer())
	if err != nil {
		return engine.Stats{}, len(ids), err
	}
	var stopIDs []int32
	for _, p := range format.Stops() {
		if id, ok := rm.Tokenizer().TokenID(p); ok {
			stopIDs = append(stopIDs, id)
		}
	}
	f := &stopFilter{stops: j.p.stops}
	tc := &toolCollector{f: format}
	var ct *callText // nil: no tools, the engine's text as it is
	if format != chat.NoTools {
		ct = newCallText(format, rm.Tokenizer())
	}
	var lq *logprobQueue // nil: no logprobs asked
	if j.p.logprobs {
		lq = &logprobQueue{f: f}
	}
	var learn []string
	var generated []int32
	for _, m := range j.msgs {
		learn = append(learn, m.Content)
	}
	st, err := rm.Reply(ctx, sessions.Request{Mode: mode, Prompt: ids, Learn: learn,
		Options: engine.GenerateOptions{MaxTokens: maxTokens, Width: j.p.width, Temperature: j.p.temperature, TopP: j.p.topP, Seed: seed,
			Constraint: con, Logprobs: j.p.logprobs, TopLogprobs: j.p.topLogprobs, Stop: stopIDs},
		Emit: func(t engine.Token) error {
			if t.ID >= 0 {
				generated = append(generated, t.ID)
			}
			if lq != nil && t.ID >= 0 {
				lq.add(t) // ID -1 is the detokenizer's tail, not a token
			}
			text := t.Text
			if ct != nil {
				text = ct.next(t.ID)
			}
			text, stopped := f.push(text)
			if err := out.piece(tc.push(text), lq.release(false)); err != nil {
				return err
			}
			if stopped {
				return sessions.ErrEnough
			}
			return nil
		}})
	if err != nil {
		return st, len(ids), err
	}
	// Without a stop string, the tokens still queued go out with the
	// text held back; with one, those queued are the stop string's.
	tail := f.flush()
	if err := out.piece(tc.push(tail), lq.release(!f.stopped)); err != nil {
		return st, len(ids), err
	}
	rest, calls := tc.finish()
	if err := out.piece(rest, nil); err != nil {
		return st, len(ids), err
	}
	reason := "length" // MaxTokens, or the end of the context
	if st.Stopped == "stop" {
		reason = "stop"
	}
	if len(calls) > 0 {
		reason = "tool_calls"
		if err := out.toolCalls(calls); err != nil {
			return st, len(ids), err
		}
	}
	u := usage{PromptTokens: len(ids), CompletionTokens: st.Tokens, TotalTokens: len(ids) + st.Tokens}
	fig := &figures{Width: j.p.width, TargetCalls: st.TargetCalls, Drafted: st.Drafted, Accepted: st.Accepted,
		Declined: st.Declined, Probes: st.Probes, DraftNote: st.DraftNote, ResumedTokens: st.ResumedTokens, PrefilledTokens: st.PrefillTokens, TTFTms: st.TTFTms, DecodeTokS: st.DecodeTokS}
	if err := out.finish(replyEnd{reason: reason, usage: u, fig: fig, stats: st, prompt: ids, reply: generated, loaded: loaded, ended: time.Now()}); err != nil {
		return st, len(ids), err
	}
	// The reply is sent; a later request that shares its prefix resumes
	// from this snapshot (after a restart too). A failed save only costs
	// a prefill then.
	if sess, err := rm.Session(mode); err == nil {
		if _, err := sess.SaveRun(context.WithoutCancel(ctx)); err != nil {
			s.log.Warn("kv snapshot not saved", "err", err)
		}
	}
	return st, len(ids), nil
}

// prompt returns j's prompt ids: the messages rendered with the model's
// chat template, or BOS and the text, as `anechat generate --raw` makes. A
// template that fails (a hostile one stopped by its limits) fails this
// request only, with a 500 naming the template and why.
func prompt(ctx context.Context, rm *sessions.Model, j job) (sessions.Mode, []int32, *apiError) {
	if !j.chat {
		ids, e := j.ollama.withContext(rm, engine.RawPrompt(rm.Tokenizer(), j.prompt))
		return sessions.Raw, ids, e
	}
	var ids []int32
	var err error
	if len(j.tools.tools) > 0 || hasToolMessages(j.msgs) {
		ids, err = renderTools(ctx, rm, j)
	} else {
		ids, err = rm.Render(ctx, j.msgs)
	}
	var ae *apiError
	switch {
	case err == nil:
		ids, e := j.ollama.withContext(rm, ids)
		return sessions.Chat, ids, e
	case errors.As(err, &ae):
		return sessions.Chat, nil, ae
	case errors.Is(err, chat.ErrConversation):
		return sessions.Chat, nil, badField(promptField(j), "%v", err)
	case errors.Is(err, chat.ErrTemplate):
		return sessions.Chat, nil, &apiError{status: http.StatusInternalServerError, typ: "server_error", code: "chat_template_failed", msg: err.Error()}
	}
	return sessions.Chat, nil, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}
}

func promptField(j job) string {
	if j.chat && !j.ollama.isGenerate() {
		return "messages"
	}
	return "prompt"
}

// randomSeed seeds a sampled request that gave no seed.
func randomSeed() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// output writes one reply: whole JSON at the end, or server-sent events as
// the text comes (the HTTP status goes out with the first event, so an
// error before any text still gets its own status).
type output struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       job
	id      string
	created int64
	text    []byte        // the whole reply, when not streamed
	calls   []toolCallOut // its tool calls, when not streamed
	started bool          // the stream's headers and first event are out
	// tok gives the logprobs' token texts; logprobs are the reply's
	// tokens', when asked and not streamed.
	tok      *tokenizer.Tokenizer
	logprobs []tokenLogprob
}

func newOutput(w http.ResponseWriter, j job) *output {
	var b [12]byte
	rand.Read(b[:])
	prefix := "cmpl-"
	if j.chat {
		prefix = "chatcmpl-"
	}
	return &output{w: w, rc: http.NewResponseController(w), j: j, id: prefix + hex.EncodeToString(b[:]), created: time.Now().Unix()}
}

// useTokenizer implements replyWriter.
func (o *output) useTokenizer(tok *tokenizer.Tokenizer) { o.tok = tok }

// toolCalls sends the reply's calls: in the message at the end, or as
// delta.tool_calls chunks, each call's id, type and name, then its
// arguments.
func (o *output) toolCalls(calls []chat.ToolCall) error {
	if !o.j.p.stream {
		for _, c := range calls {
			o.calls = append(o.calls, toolCallOut{ID: c.ID, Type: "function", Function: functionCall{Name: c.Name, Arguments: c.Arguments}})
		}
		return nil
	}
	if err := o.start(); err != nil {
		return err
	}
	for i, c := range calls {
		for _, piece := range []toolCallOut{
			{Index: &i, ID: c.ID, Type: "function", Function: functionCall{Name: c.Name}},
			{Index: &i, Function: functionCall{Arguments: c.Arguments}},
		} {
			if err := o.event(o.chunk(choice{Delta: &message{ToolCalls: []toolCallOut{piece}}})); err != nil {
				return err
			}
		}
	}
	return nil
}

// object is the completion's "object".
func (o *output) object() string {
	switch {
	case o.j.chat && o.j.p.stream:
		return "chat.completion.chunk"
	case o.j.chat:
		return "chat.completion"
	}
	return "text_completion"
}

// chunk is a completion carrying ch.
func (o *output) chunk(ch choice) completion {
	c := completion{ID: o.id, Object: o.object(), Created: o.created, Model: o.j.model.ID, Choices: []choice{ch}}
	if o.j.p.includeUsage {
		c.Usage = json.RawMessage("null")
	}
	return c
}

// textChoice carries text as a chat message, a chat delta or completion
// text.
func (o *output) textChoice(text string, role string) choice {
	if !o.j.chat {
		return choice{Text: &text}
	}
	m := &message{Role: role, Content: &text}
	if o.j.p.stream {
		return choice{Delta: m}
	}
	return choice{Message: m}
}

// piece sends (or keeps) a piece of the reply's text and the logprobs of
// the tokens that start in it.
func (o *output) piece(text string, lps []tokenLogprob) error {
	if text == "" && len(lps) == 0 {
		return nil
	}
	if !o.j.p.stream {
		o.text = append(o.text, text...)
		o.logprobs = append(o.logprobs, lps...)
		return nil
	}
	if err := o.start(); err != nil {
		return err
	}
	ch := o.textChoice(text, "")
	if len(lps) > 0 {
		ch.Logprobs = logprobsJSON(o.tok, o.j.chat, lps)
	}
	return o.event(o.chunk(ch))
}

// start sends the stream's headers and, for a chat, the assistant role.
func (o *output) start() error {
	if o.started {
		return nil
	}
	o.started = true
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
	if o.j.chat {
		return o.event(o.chunk(o.textChoice("", "assistant")))
	}
	return nil
}

// event writes one server-sent event and flushes it to the client.
func (o *output) event(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(o.w, "data: %s\n\n", b); err != nil {
		return err
	}
	return o.rc.Flush()
}

// finish ends the reply: the whole completion, or the stream's last
// events (the finish reason with anechat's figures, the usage if asked,
// then [DONE]).
func (o *output) finish(end replyEnd) error {
	reason, fig := end.reason, end.fig
	ub, _ := json.Marshal(end.usage) // three ints
	if !o.j.p.stream {
		ch := o.textChoice(string(o.text), "assistant")
		if len(o.calls) > 0 {
			ch.Message.ToolCalls = o.calls
			if strings.TrimSpace(string(o.text)) == "" {
				ch.Message.Content = nil // OpenAI's null content beside calls
			}
		}
		ch.FinishReason = &reason
		if o.j.p.logprobs {
			ch.Logprobs = logprobsJSON(o.tok, o.j.chat, o.logprobs)
		}
		writeJSON(o.w, http.StatusOK, completion{ID: o.id, Object: o.object(), Created: o.created, Model: o.j.model.ID,
			Choices: []choice{ch}, Usage: ub, Anechat: fig})
		return o.rc.Flush() // before the snapshot is saved
	}
	if err := o.start(); err != nil {
		return err
	}
	ch := choice{FinishReason: &reason}
	if o.j.chat {
		ch.Delta = &message{}
	} else {
		empty := ""
		ch.Text = &empty
	}
	last := o.chunk(ch)
	last.Anechat = fig
	if err := o.event(last); err != nil {
		return err
	}
	if o.j.p.includeUsage {
		c := o.chunk(choice{})
		c.Choices, c.Usage = []choice{}, ub
		if err := o.event(c); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprint(o.w, "data: [DONE]\n\n"); err != nil {
		return err
	}
	return o.rc.Flush()
}

// fail reports e: with its status before the stream started, else as an
// error event that ends the stream.
func (o *output) fail(e *apiError) {
	if !o.started {
		writeError(o.w, e)
		return
	}
	o.event(e.body())
	fmt.Fprint(o.w, "data: [DONE]\n\n")
	o.rc.Flush()
}
