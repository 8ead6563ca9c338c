// Package sessions keeps one model loaded on the engine and runs replies on it,
// one at a time: the wiring that the app's chat, the HTTP API (package
// server) and the CLI share. A Manager loads the model a request names
// (unloading another) and keeps several engine.Sessions warm, their KV in
// memory (bounded by Warm, the least recently used dropped first), so that
// the next request of any of the conversations it served lately only
// prefills what is new, whatever other requests came in between (an editor
// and an agent on one server); it resumes from and saves KV snapshots in the
// data directory's index when no warm session holds a prompt, keeps the
// measured call costs, and feeds the drafting corpus (suffix matching over
// the texts of earlier requests) that speculation draws from.
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

// Warm bounds the sessions a Manager keeps in memory between requests, each
// holding one sequence's KV cache. Past either bound the least recently used
// sessions are dropped (their memory goes with them); a dropped
// conversation's next turn resumes from its snapshot on disk, if stored.
// The session that ran last always stays, whatever its size.
type Warm struct {
	// Sessions is the most sessions kept, at least 1.
	Sessions int
	// Bytes bounds the memory their KV caches take (kv.Cache.Bytes), at
	// least 1; it is checked as a request starts and when it ends.
	Bytes int64
}

// DefaultWarm is the bound a Manager starts with: a handful of clients
// (the app, an editor, an agent) each with a conversation or two and a text
// completion, and at most 1 GiB of KV, a few thousand tokens each on the
// small models anechat runs (SmolLM2-135M holds 46 KB a token in float32).
var DefaultWarm = Warm{Sessions: 8, Bytes: 1 << 30}

// Check says what is wrong with w, naming the field; nil when it is usable.
func (w Warm) Check() error {
	switch {
	case w.Sessions < 1:
		return fmt.Errorf("warm sessions %d: want at least 1", w.Sessions)
	case w.Bytes < 1:
		return fmt.Errorf("warm bytes %d: want at least 1", w.Bytes)
	}
	return nil
}

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
	warm   Warm // the bound on the loaded model's sessions
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
	return &Manager{log: log, registry: registry, lock: make(chan struct{}, 1), warm: DefaultWarm}
}

// KeepWarm bounds the sessions kept in memory from now on (DefaultWarm
// until then), dropping those past it at once. It fails, changing nothing,
// when w does not Check. It waits for a running request to end.
func (r *Manager) KeepWarm(w Warm) error {
	if err := w.Check(); err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	r.warm = w
	if r.loaded != nil {
		r.loaded.trim()
	}
	return nil
}

// UseStorage sets the KV snapshot store and the store of measured call
// costs (nil turns each off). The loaded model's sessions are rebuilt on
// them at the next request. It waits for a running request to end.
func (r *Manager) UseStorage(snapshots engine.SnapshotStore, costs engine.CostStore) {
	r.lock <- struct{}{}
	defer func() { <-r.lock }()
	r.store, r.costs = snapshots, costs
	if r.loaded != nil {
		r.loaded.warm = nil
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
	// warm are the sessions kept, the most recently used first, within
	// the manager's Warm; emptied by UseStorage. A session serves every
	// width: width 1 is the verify loop with no drafts, so changing it
	// keeps the KV.
	warm []warmSession
	// costs is the cost model a session measured (nil: none yet): the
	// backend's, so later sessions start from it instead of measuring again.
	costs *spec.Costs
	// corpus holds the finished messages and replies of the requests
	// answered since the model loaded (and the app's prompt library), for
	// suffix-matching drafts across requests (spec.Corpus); seen keeps a
	// text from being added twice.
	corpus *spec.Corpus
	seen   map[string]bool
}

// warmSession is a session kept in memory and the Mode its prompts are made
// in (its snapshots are bound to it).
type warmSession struct {
	mode Mode
	s    *engine.Session
	// prompt is the length of the last prompt it was given: the next turn
	// of its conversation holds that prompt whole.
	prompt int
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

// Session returns the session the last request of mode ran on (Prefill's
// choice: Reply's caller saves its snapshot from it), building one when mode
// has none warm.
func (m *Model) Session(mode Mode) (*engine.Session, error) {
	if mode < 0 || mode >= modes {
		return nil, fmt.Errorf("sessions: mode %d: want Chat, Raw or IDs", mode)
	}
	for _, w := range m.warm {
		if w.mode == mode {
			return w.s, nil
		}
	}
	return m.newSession(mode)
}

// newSession builds an empty session of mode and keeps it as the most
// recently used, dropping others past the bound.
func (m *Model) newSession(mode Mode) (*engine.Session, error) {
	s, err := engine.NewSession(m.backend, engine.SessionOptions{
		Text:      func() engine.TextStream { return m.tok.NewStream() },
		Corpus:    m.corpus,
		Costs:     m.costs,
		CostStore: m.r.costs,
		Snapshots: m.r.store,
		Meta:      m.SnapshotMeta(mode),
		Log:       m.r.log,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: new session for %s: %w", m.path, err)
	}
	m.warm = slices.Insert(m.warm, 0, warmSession{mode: mode, s: s})
	m.trim()
	return s, nil
}

// pick returns the session that a prompt of mode should run on, made the
// most recently used: the warm one that keeps most of ids (Reusable), else
// an empty one, else a new one (the least recently used dropped if the
// bound is reached); a session that keeps nothing restores from the
// snapshots on disk. With room for more than one session, a session is cut
// back only for a prompt of its own conversation: one that holds its last
// prompt whole (the next turn) or that it holds whole (a rerun, a
// regenerated reply). Another conversation that shares only an opening
// with it (a default system prompt, an agent's instructions) would take it
// from its own, whose next turn would then prefill everything; that one
// gets a session of its own, which restores the opening from a snapshot
// on disk when one is stored.
func (m *Model) pick(mode Mode, ids []int32) (*engine.Session, error) {
	best, most := -1, 0
	for i, w := range m.warm {
		if w.mode != mode {
			continue
		}
		k := w.s.Reusable(ids)
		if k < w.prompt && k < len(ids)-1 && m.r.warm.Sessions > 1 {
			k = 0
		}
		if k > most {
			best, most = i, k
		} else if best < 0 && len(w.s.Tokens()) == 0 && w.s.Cache().Len() == 0 {
			best = i // empty: nothing of another conversation is lost
		}
	}
	if best < 0 {
		s, err := m.newSession(mode)
		if err == nil {
			m.warm[0].prompt = len(ids)
		}
		return s, err
	}
	w := m.warm[best]
	w.prompt = len(ids)
	m.warm = slices.Insert(slices.Delete(m.warm, best, best+1), 0, w)
	return w.s, nil
}

// trim drops sessions past the manager's Warm, never the most recently
// used: empty ones first, then the least recently used.
func (m *Model) trim() {
	bound := m.r.warm
	for len(m.warm) > 1 {
		var held int64
		for _, w := range m.warm {
			held += w.s.Cache().Bytes()
		}
		if len(m.warm) <= bound.Sessions && held <= bound.Bytes {
			return
		}
		victim := len(m.warm) - 1
		for i := len(m.warm) - 1; i > 0; i-- {
			if m.warm[i].s.Cache().Len() == 0 {
				victim = i
				break
			}
		}
		// Nothing else refers to the session: its KV cache is garbage once
		// it leaves the list (a Core ML backend keeps only a weak pointer).
		m.warm[victim] = warmSession{}
		m.warm = slices.Delete(m.warm, victim, victim+1)
	}
}

// Warm reports the sessions kept and the memory their KV caches take.
func (m *Model) Warm() Warm {
	w := Warm{Sessions: len(m.warm)}
	for _, ws := range m.warm {
		w.Bytes += ws.s.Cache().Bytes()
	}
	return w
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

// Prefill makes a session of mode hold ids, prefilled (Session.Resume), and
// returns it: the warm session that holds most of ids continues, else one
// restores the longest stored snapshot; the rest is prefilled in batched
// calls. progress hears how far it is. On error the session starts over.
func (m *Model) Prefill(ctx context.Context, mode Mode, ids []int32, progress func(done, total int)) (*engine.Session, error) {
	if mode < 0 || mode >= modes {
		return nil, fmt.Errorf("sessions: mode %d: want Chat, Raw or IDs", mode)
	}
	var s *engine.Session
	var err error
	if m.r.forget {
		if s, err = m.Session(mode); err == nil {
			s.Reset()
		}
	} else {
		s, err = m.pick(mode, ids)
	}
	if err != nil {
		return nil, err
	}
	err = s.Resume(ctx, ids, progress)
	m.trim() // the cache grew
	if err != nil {
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
	if s.Measurements() > 0 {
		m.costs = s.Costs()
	}
	m.trim() // the cache grew
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
