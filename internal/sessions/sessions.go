// Package sessions keeps one model loaded on the engine and runs replies on it,
// one at a time: the wiring that the app's chat and the HTTP API (package
// server) share. A Manager loads the model a request names (unloading
// another), keeps an engine.Session per kind of prompt so the next request
// that extends the last one only prefills what is new, resumes from and
// saves KV snapshots in the data directory's index, keeps the measured call
// costs, and feeds the drafting corpus (suffix matching over the texts of
// earlier requests) that speculation draws from.
package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/spec"
	"anechat/engine/tokenizer"
	"anechat/internal/backends"
)

// Mode is how a prompt's ids were made; each mode has a session of its own,
// and its snapshots are bound to it (kv.Meta's Template).
type Mode int

const (
	// Chat prompts are messages rendered with the model's chat template;
	// generation also stops at the template's end-of-turn ids.
	Chat Mode = iota
	// Raw prompts are BOS (if the tokenizer adds one) and the encoded text
	// (engine.RawPrompt, `anechat generate --raw`); generation stops at EOS.
	Raw
	// IDs prompts are token ids fed as given (`anechat generate
	// --prompt-ids`): no tokenizer made them; generation stops at EOS.
	IDs
	modes
)

// ErrEnough, returned by a Request's Emit, ends the reply as complete (the
// caller saw a stop string): Reply then returns no error, reports Stopped
// "stop" and keeps the session, which holds the tokens generated so far.
var ErrEnough = errors.New("sessions: the caller ended the reply")

// Manager keeps one model loaded and runs requests on it one at a time. It
// is safe for concurrent use: Do serialises its callers.
type Manager struct {
	log      *slog.Logger
	registry *load.Registry

	// lock is held (a value in it) by the caller of Do; a channel so that a
	// waiting caller can give up when its context ends.
	lock   chan struct{}
	loaded *Model
	// loadedPath is loaded's path ("" for none), readable without the
	// lock: a status report must not wait for a reply to end.
	loadedPath atomic.Value         // string
	store      engine.SnapshotStore // nil: no KV snapshots
	costs      engine.CostStore     // nil: call costs measured each start
	// forget: every request prefills its whole prompt (NoResume).
	forget bool
}

// New returns a Manager that opens models through registry (nil: this
// build's backends) and logs to log (nil: discarded).
func New(log *slog.Logger, registry *load.Registry) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if registry == nil {
		registry = backends.Registry()
	}
	return &Manager{log: log, registry: registry, lock: make(chan struct{}, 1)}
}

// UseStorage sets the KV snapshot store and the store of measured call
// costs (nil turns each off). The loaded model's sessions are rebuilt on
// them at the next request. It waits for a running request to end.
func (r *Manager) UseStorage(snapshots engine.SnapshotStore, costs engine.CostStore) {
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	r.store, r.costs = snapshots, costs
	if r.loaded != nil {
		r.loaded.sessions = [modes]*engine.Session{}
	}
}

// NoResume makes every later request prefill its whole prompt: sessions
// start over before each one, as a server that keeps nothing between
// requests does (benchmarks compare against it). With UseStorage's
// snapshots still set, they are still restored from.
func (r *Manager) NoResume() {
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	r.forget = true
}

// UseRegistry makes the manager open models through reg from the next load
// on (the app does when a backend setting changes, such as Core ML's compute
// units). If reload is not nil and says so of the loaded model's backend,
// that model is unloaded, so the next request opens it through reg. It
// waits for a running request to end.
func (r *Manager) UseRegistry(reg *load.Registry, reload func(model.Backend) bool) {
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	r.registry = reg
	if r.loaded != nil && reload != nil && reload(r.loaded.backend) {
		r.unload()
	}
}

// Preload loads the model at path (unloading another) unless it is loaded
// already, so that the next request finds it loaded; progress, if not nil,
// hears how far the backend is (a Core ML bundle compiles the first time).
// A load that fails or is cancelled leaves no model loaded.
func (r *Manager) Preload(ctx context.Context, path string, progress func(done, total int)) error {
	select {
	case r.lock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.lock }()
	_, err := r.load(ctx, path, progress)
	return err
}

// HasSnapshots reports whether UseStorage gave a snapshot store. Call it
// inside Do.
func (r *Manager) HasSnapshots() bool { return r.store != nil }

// Do loads the model at path (unless it is loaded already) and runs fn with
// it, alone: other callers wait. A caller whose ctx ends while it waits gets
// ctx.Err() and fn does not run.
func (r *Manager) Do(ctx context.Context, path string, fn func(*Model) error) error {
	select {
	case r.lock <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-r.lock }()
	if err := ctx.Err(); err != nil {
		return err // both were ready: the caller has gone
	}
	m, err := r.load(ctx, path, nil)
	if err != nil {
		return err
	}
	return fn(m)
}

// load returns the model at path, loading it (and unloading another) first;
// progress (nil: none) hears how far the backend's load is.
func (r *Manager) load(ctx context.Context, path string, progress func(done, total int)) (*Model, error) {
	if r.loaded != nil && r.loaded.path == path {
		// A file replaced or truncated on disk (a re-download, an editor)
		// fails the reply that was running; the next one loads it again.
		err := model.CheckFiles(r.loaded.backend)
		if err == nil {
			if progress != nil {
				progress(1, 1)
			}
			return r.loaded, nil
		}
		r.log.Warn("model file changed on disk: loading it again", "path", path, "reason", err)
	}
	r.unload()
	lm, err := r.registry.Open(ctx, path, load.Options{Progress: progress})
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	b, tok := lm.Backend, lm.Tokenizer
	tmpl, err := chat.ForModel(ctx, b.Config().Arch, tok, lm.Chat)
	if err != nil {
		lm.Close()
		return nil, fmt.Errorf("load model %s: chat template: %w", path, err)
	}
	r.log.Info("model loaded", "path", path, "arch", b.Config().Arch, "backend", lm.BackendName, "template", tmpl.Name())
	r.loadedPath.Store(path)
	r.loaded = &Model{r: r, path: path, backend: b, tok: tok, tmpl: tmpl, corpus: spec.NewCorpus(0), seen: map[string]bool{}}
	return r.loaded, nil
}

func (r *Manager) unload() {
	if r.loaded != nil {
		if c, ok := r.loaded.backend.(io.Closer); ok {
			c.Close()
		}
		r.loaded = nil
		r.loadedPath.Store("")
	}
}

// LoadedPath is the path of the model loaded now, "" when none; unlike
// Loaded it does not wait for a running request.
func (r *Manager) LoadedPath() string {
	p, _ := r.loadedPath.Load().(string)
	return p
}

// Loaded returns the loaded model, nil if none, once a running request has
// ended. It is for tests and status reports: do not use the Model outside a
// Do call.
func (r *Manager) Loaded() *Model {
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	return r.loaded
}

// Close unloads the model, once a running request has ended.
func (r *Manager) Close() error {
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	r.unload()
	return nil
}

// Model is the loaded model, its tokenizer and chat template, its sessions
// and the drafting corpus. Use it only inside the Do call that passed it.
type Model struct {
	r       *Manager
	path    string
	backend model.Backend
	tok     *tokenizer.Tokenizer
	tmpl    chat.Template
	// sessions, per Mode; nil until the first request of that mode after a
	// load or UseStorage. One session serves every width: width 1 is the
	// verify loop with no drafts, so changing it keeps the KV.
	sessions [modes]*engine.Session
	// corpus holds the finished messages and replies of the requests
	// answered since the model loaded (and the app's prompt library), for
	// suffix-matching drafts across requests (spec.Corpus); seen keeps a
	// text from being added twice.
	corpus *spec.Corpus
	seen   map[string]bool
}

// maxSeen bounds the memory of texts already in the corpus; past it the
// memory starts over (a repeated text then costs one more Add).
const maxSeen = 1 << 14

// Path is the model's file or directory, as Do was given it.
func (m *Model) Path() string { return m.path }

// Backend runs the model.
func (m *Model) Backend() model.Backend { return m.backend }

// Tokenizer is the model's tokenizer.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// Template is the model's chat template (chat.ForModel).
func (m *Model) Template() chat.Template { return m.tmpl }

// Render returns the ids of msgs with the generation prompt, the prompt of a
// Chat request. An error wraps chat.ErrConversation when the messages cannot
// be rendered (a role the template does not know, a wrong order),
// chat.ErrTemplate when the model's template fails (jinja.ErrLimit too when
// it was stopped by a limit), and ctx.Err() when ctx ended first.
func (m *Model) Render(ctx context.Context, msgs []chat.Message) ([]int32, error) {
	ids, err := m.tmpl.Render(ctx, msgs, true)
	if err != nil {
		return nil, fmt.Errorf("render the conversation with template %s: %w", m.tmpl.Name(), err)
	}
	return ids, nil
}

// Session returns the session of mode, building it on first use.
func (m *Model) Session(mode Mode) (*engine.Session, error) {
	if mode < 0 || mode >= modes {
		return nil, fmt.Errorf("sessions: mode %d: want Chat, Raw or IDs", mode)
	}
	if s := m.sessions[mode]; s != nil {
		return s, nil
	}
	s, err := engine.NewSession(m.backend, engine.SessionOptions{
		Text:      func() engine.TextStream { return m.tok.NewStream() },
		Corpus:    m.corpus,
		CostStore: m.r.costs,
		Snapshots: m.r.store,
		Meta:      m.SnapshotMeta(mode),
		Log:       m.r.log,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: new session for %s: %w", m.path, err)
	}
	m.sessions[mode] = s
	return s, nil
}

// SnapshotMeta binds the snapshots of mode's session to the model and to
// how its ids were made: the tokenizer's fingerprint ("none" for IDs, which
// no tokenizer made) and the template ("chat:" and the chat template's hash,
// "raw" or "ids"). It is the one place the binding is made, so the CLI, the
// app and the API, all running on a Manager, resume from one another's
// snapshots; its values are those snapshots already stored carry.
func (m *Model) SnapshotMeta(mode Mode) kv.Meta {
	meta := kv.Meta{Model: m.backend.Config().Fingerprint, Tokenizer: m.tok.Fingerprint()}
	switch mode {
	case Chat:
		meta.Template = "chat:" + m.tmpl.Hash()
	case Raw:
		meta.Template = "raw"
	default:
		meta.Tokenizer, meta.Template = "none", "ids"
	}
	return meta
}

// Prefill makes the session of mode hold ids, prefilled (Session.Resume):
// it continues the session when that holds a prefix of ids, else restores
// the longest stored snapshot, and prefills the rest in batched calls.
// progress hears how far it is. On error the session starts over.
func (m *Model) Prefill(ctx context.Context, mode Mode, ids []int32, progress func(done, total int)) (*engine.Session, error) {
	s, err := m.Session(mode)
	if err != nil {
		return nil, err
	}
	if m.r.forget {
		s.Reset()
	}
	if err := s.Resume(ctx, ids, progress); err != nil {
		s.Reset() // a cancelled prefill leaves the sequence half-fed
		return nil, err
	}
	return s, nil
}

// Learn adds texts to the drafting corpus, each once: text the reply may
// repeat (the request's messages, the prompt library).
func (m *Model) Learn(texts ...string) {
	for _, t := range texts {
		m.learn(t, func() []int32 { return m.tok.Encode(t) })
	}
}

// learn adds ids to the corpus once per key.
func (m *Model) learn(key string, ids func() []int32) {
	if key == "" || m.seen[key] {
		return
	}
	if len(m.seen) >= maxSeen {
		clear(m.seen)
	}
	m.seen[key] = true
	if d := ids(); len(d) > 0 {
		m.corpus.Add(d)
	}
}

// Request is one reply.
type Request struct {
	// Mode says how Prompt was made.
	Mode Mode
	// Prompt is the whole prompt (Render's or engine.RawPrompt's ids, or
	// ids as given).
	Prompt []int32
	// Learn lists texts the reply may repeat, added to the drafting corpus
	// (the prompt itself is prompt lookup's).
	Learn []string
	// Options are the generation's; Chat mode adds the template's stops.
	Options engine.GenerateOptions
	// Progress, if not nil, hears how far the prompt's prefill is.
	Progress func(done, total int)
	// Emit receives each token (Session.Generate's); returning ErrEnough
	// ends the reply as complete, another error ends it with that error.
	Emit func(engine.Token) error
}

// Reply prefills req.Prompt and generates the reply. The reply, as the ids
// the model chose, joins the drafting corpus for later requests. On an error
// (cancellation included) the session starts over: the reply is cut short,
// so the text a caller keeps will not match the session's tokens.
func (m *Model) Reply(ctx context.Context, req Request) (engine.Stats, error) {
	s, err := m.Prefill(ctx, req.Mode, req.Prompt, req.Progress)
	if err != nil {
		return engine.Stats{}, err
	}
	m.Learn(req.Learn...)
	opts := req.Options
	if req.Mode == Chat {
		opts.Stop = append(slices.Clone(opts.Stop), m.tmpl.Stops()...)
	}
	st, err := s.Generate(ctx, opts, req.Emit)
	if errors.Is(err, ErrEnough) {
		err, st.Stopped = nil, "stop"
	}
	if err != nil {
		s.Reset()
		return st, err
	}
	if toks := s.Tokens(); len(toks) > len(req.Prompt) {
		reply := slices.Clone(toks[len(req.Prompt):])
		m.learn(m.tok.Decode(reply), func() []int32 { return reply })
	}
	return st, nil
}
