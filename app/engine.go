package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/spec"
	"anechat/engine/tokenizer"
	"anechat/internal/backends"
	"anechat/internal/kvindex"
)

// EngineGenerator is the Generator over anechat's engine: it loads the
// requested model (one at a time, kept loaded between replies), renders the
// conversation with the model's chat template and decodes with speculation
// at the requested width. Its session keeps the KV of the last conversation,
// so the next turn of that conversation only prefills the new messages; with
// the data directory's storage (UseStorage) it also saves each
// conversation's KV to disk after a reply and resumes from the longest
// stored prefix, so a conversation continues without re-running its history
// even after a restart, and keeps the measured call costs of each model.
type EngineGenerator struct {
	log *slog.Logger
	// registry opens models on this build's backends.
	registry *load.Registry

	mu     sync.Mutex // one reply at a time: a Session is not concurrent
	loaded *loadedModel
	store  engine.SnapshotStore // nil: no KV snapshots
	costs  engine.CostStore     // nil: call costs measured each start
}

// StorageUser is a Generator that keeps KV snapshots and measured call costs
// in the data directory; App.Startup hands it the snapshot index and the
// database.
type StorageUser interface {
	UseStorage(snapshots engine.SnapshotStore, costs engine.CostStore)
}

// UseStorage sets the KV snapshot store and the store of measured call
// costs (nil turns each off). The loaded model's session is rebuilt on them
// at the next reply.
func (g *EngineGenerator) UseStorage(snapshots engine.SnapshotStore, costs engine.CostStore) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.store, g.costs = snapshots, costs
	if g.loaded != nil {
		g.loaded.session = nil
	}
}

// loadedModel is the open model and the session running it.
type loadedModel struct {
	path    string
	backend model.Backend
	tok     *tokenizer.Tokenizer
	tmpl    chat.Template
	session *engine.Session // nil until the first reply after a load or UseStorage
	// corpus holds the finished messages of the conversations answered and
	// the prompt library, for suffix-matching drafts (spec.Corpus) across
	// turns and conversations; seen keeps a text from being added twice.
	corpus *spec.Corpus
	seen   map[string]bool
}

// maxSeen bounds the memory of texts already in the corpus; past it the
// memory starts over (a repeated text then costs one more Add).
const maxSeen = 1 << 14

// learn adds ids to the corpus once per key.
func (m *loadedModel) learn(key string, ids func() []int32) {
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

// learnText adds the tokens of text to the corpus once.
func (m *loadedModel) learnText(text string) {
	m.learn(text, func() []int32 { return m.tok.Encode(text) })
}

// NewEngineGenerator returns a Generator that runs models on the engine.
func NewEngineGenerator(log *slog.Logger) *EngineGenerator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &EngineGenerator{log: log, registry: backends.Registry()}
}

// Generate implements Generator.
func (g *EngineGenerator) Generate(ctx context.Context, req GenerateRequest, emit func(Piece) error) (GenerateStats, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ids, err := g.prefill(ctx, req)
	if err != nil {
		return GenerateStats{}, err
	}
	// Drafts may come from the conversation's finished messages and the
	// library (the prompt itself is prompt lookup's).
	for _, t := range req.Library {
		m.learnText(t)
	}
	for _, cm := range req.Messages {
		m.learnText(cm.Content)
	}
	st, err := m.session.Generate(ctx, engine.GenerateOptions{MaxTokens: req.MaxTokens, Width: req.Width,
		Temperature: req.Temperature, Seed: req.Seed, Stop: m.tmpl.Stops()}, func(t engine.Token) error {
		if t.Text == "" {
			return nil
		}
		return emit(Piece{Text: t.Text, Drafted: t.Drafted})
	})
	out := GenerateStats{Tokens: st.Tokens, PrefillTokens: st.PrefillTokens, ResumedTokens: st.ResumedTokens,
		TargetCalls: st.TargetCalls, Drafted: st.Drafted, Accepted: st.Accepted, TTFTms: st.TTFTms,
		DecodeTokS: st.DecodeTokS, Stopped: st.Stopped}
	if err != nil {
		// The reply is cut short: the stored text will not match the
		// session's tokens, so the next turn starts over.
		m.session.Reset()
		return out, err
	}
	// The reply, as the ids the model chose, for later turns and chats.
	if toks := m.session.Tokens(); len(toks) > len(ids) {
		reply := slices.Clone(toks[len(ids):])
		m.learn(m.tok.Decode(reply), func() []int32 { return reply })
	}
	if req.ConversationID != 0 {
		// A failed save only costs a prefill next time: log it, keep the reply.
		if _, serr := m.session.Save(context.WithoutCancel(ctx), kvindex.ConversationKey(req.ConversationID)); serr != nil {
			g.log.Warn("kv snapshot not saved", "conversation", req.ConversationID, "err", serr)
		}
	}
	return out, nil
}

// prefill loads req's model, renders req.Messages with the generation prompt
// and makes the session hold them, prefilled: Session.Resume continues the
// session when it holds a prefix of this prompt (the next turn of the same
// conversation), else restores the longest stored snapshot, and prefills
// the rest in batched calls.
func (g *EngineGenerator) prefill(ctx context.Context, req GenerateRequest) (*loadedModel, []int32, error) {
	m, err := g.load(req.Model.Path)
	if err != nil {
		return nil, nil, err
	}
	if m.session == nil {
		// One session for every width: width 1 is the verify loop with no
		// drafts, so changing the setting keeps the conversation's KV.
		m.session, err = engine.NewSession(m.backend, engine.SessionOptions{
			Text:      func() engine.TextStream { return m.tok.NewStream() },
			Corpus:    m.corpus,
			CostStore: g.costs,
			Snapshots: g.store,
			Meta: kv.Meta{Model: m.backend.Config().Fingerprint, Tokenizer: m.tok.Fingerprint(),
				Template: "chat:" + m.tmpl.Hash()},
			Log: g.log,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("engine: new session for %s: %w", m.path, err)
		}
	}
	msgs := make([]chat.Message, len(req.Messages))
	for i, cm := range req.Messages {
		msgs[i] = chat.Message{Role: cm.Role, Content: cm.Content}
	}
	ids, err := m.tmpl.Render(msgs, true)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: render the conversation with template %s: %w", m.tmpl.Name(), err)
	}
	if err := m.session.Resume(ctx, ids, req.Progress); err != nil {
		m.session.Reset() // a cancelled prefill leaves the sequence half-fed
		return nil, nil, err
	}
	return m, ids, nil
}

// Prepare implements Preparer. The session is reset afterwards: a reply to
// the opening restores it from the snapshot just saved (a file read), and its
// stats then count this prefill as resumed, not as its own.
func (g *EngineGenerator) Prepare(ctx context.Context, req GenerateRequest, key string) (Prepared, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.store == nil {
		return Prepared{}, fmt.Errorf("engine: prepare %s: no KV snapshot store (the data directory's kv/ index did not open)", key)
	}
	m, ids, err := g.prefill(ctx, req)
	if err != nil {
		return Prepared{}, err
	}
	path, err := m.session.Save(ctx, key)
	m.session.Reset()
	if err != nil {
		return Prepared{}, err
	}
	if path == "" {
		return Prepared{}, nil
	}
	return Prepared{Path: path, Tokens: len(ids)}, nil
}

// load returns the model at path, loading it (and unloading another) first.
func (g *EngineGenerator) load(path string) (*loadedModel, error) {
	if g.loaded != nil && g.loaded.path == path {
		// A file replaced or truncated on disk (a re-download, an editor)
		// fails the reply that was running; the next one loads it again.
		err := model.CheckFiles(g.loaded.backend)
		if err == nil {
			return g.loaded, nil
		}
		g.log.Warn("model file changed on disk: loading it again", "path", path, "reason", err)
	}
	g.unload()
	lm, err := g.registry.Open(context.Background(), path, load.Options{})
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	b, tok := lm.Backend, lm.Tokenizer
	tmpl, err := chat.ForModel(b.Config().Arch, tok, lm.Chat)
	if err != nil {
		lm.Close()
		return nil, fmt.Errorf("load model %s: chat template: %w", path, err)
	}
	g.log.Info("model loaded", "path", path, "arch", b.Config().Arch, "backend", lm.BackendName, "template", tmpl.Name())
	g.loaded = &loadedModel{path: path, backend: b, tok: tok, tmpl: tmpl, corpus: spec.NewCorpus(0), seen: map[string]bool{}}
	return g.loaded, nil
}

func (g *EngineGenerator) unload() {
	if g.loaded != nil {
		closeBackend(g.loaded.backend)
		g.loaded = nil
	}
}

// Close unloads the model.
func (g *EngineGenerator) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unload()
	return nil
}

func closeBackend(b model.Backend) {
	if c, ok := b.(io.Closer); ok {
		c.Close()
	}
}
