package app

import (
	"context"
	"fmt"
	"log/slog"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/internal/kvindex"
	"anechat/internal/sessions"
)

// EngineGenerator is the Generator over anechat's engine: it loads the
// requested model (one at a time, kept loaded between replies), renders the
// conversation with the model's chat template and decodes with speculation
// at the requested width. Its sessions keep the KV of the conversations
// answered lately (sessions.DefaultWarm), so the next turn of each only
// prefills the new messages, whatever the Local API answered between; with
// the data directory's storage (UseStorage) it also saves each
// conversation's KV to disk after a reply and resumes from the longest
// stored prefix, so a conversation continues without re-running its history
// even after a restart, and keeps the measured call costs of each model.
// The wiring lives in internal/sessions, which the HTTP API (API, package
// server) runs on too: both share the loaded model, one reply at a time.
type EngineGenerator struct {
	log *slog.Logger
	run *sessions.Manager
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
	g.run.UseStorage(snapshots, costs)
}

// NewEngineGenerator returns a Generator that runs models on the engine.
func NewEngineGenerator(log *slog.Logger) *EngineGenerator {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &EngineGenerator{log: log, run: sessions.New(log, nil)}
}

// Sessions is the manager the generator's replies run on; the in-app HTTP
// API serves its requests on the same one.
func (g *EngineGenerator) Sessions() *sessions.Manager { return g.run }

// Generate implements Generator.
func (g *EngineGenerator) Generate(ctx context.Context, req GenerateRequest, emit func(Piece) error) (GenerateStats, error) {
	var out GenerateStats
	err := g.run.Do(ctx, req.Model.Path, func(m *sessions.Model) error {
		ids, err := m.Render(ctx, chatMessages(req.Messages))
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		// Drafts may come from the conversation's finished messages and the
		// library (the prompt itself is prompt lookup's).
		learn := append([]string(nil), req.Library...)
		for _, cm := range req.Messages {
			learn = append(learn, cm.Content)
		}
		st, err := m.Reply(ctx, sessions.Request{Mode: sessions.Chat, Prompt: ids, Learn: learn, Progress: req.Progress,
			Options: engine.GenerateOptions{MaxTokens: req.MaxTokens, Width: req.Width, Temperature: req.Temperature, Seed: req.Seed},
			Emit: func(t engine.Token) error {
				if t.Text == "" {
					return nil // held back: a later piece carries its counts
				}
				return emit(t)
			}})
		out = GenerateStats{Stats: st}
		if err != nil {
			return err
		}
		if req.ConversationID != 0 {
			// A failed save only costs a prefill next time: log it, keep the reply.
			s, _ := m.Session(sessions.Chat)
			if _, serr := s.Save(context.WithoutCancel(ctx), kvindex.ConversationKey(req.ConversationID)); serr != nil {
				g.log.Warn("kv snapshot not saved", "conversation", req.ConversationID, "err", serr)
			}
		}
		return nil
	})
	return out, err
}

// chatMessages converts the conversation for the chat template.
func chatMessages(in []ChatMessage) []chat.Message {
	msgs := make([]chat.Message, len(in))
	for i, cm := range in {
		msgs[i] = chat.Message{Role: cm.Role, Content: cm.Content}
	}
	return msgs
}

// Prepare implements Preparer. The session is reset afterwards: a reply to
// the opening restores it from the snapshot just saved (a file read), and its
// stats then count this prefill as resumed, not as its own.
func (g *EngineGenerator) Prepare(ctx context.Context, req GenerateRequest, key string) (Prepared, error) {
	var out Prepared
	err := g.run.Do(ctx, req.Model.Path, func(m *sessions.Model) error {
		if !g.run.HasSnapshots() {
			return fmt.Errorf("engine: prepare %s: no KV snapshot store (the data directory's kv/ index did not open)", key)
		}
		ids, err := m.Render(ctx, chatMessages(req.Messages))
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		s, err := m.Prefill(ctx, sessions.Chat, ids, req.Progress)
		if err != nil {
			return err
		}
		path, err := s.Save(ctx, key)
		s.Reset()
		if err != nil {
			return err
		}
		if path != "" {
			out = Prepared{Path: path, Tokens: len(ids)}
		}
		return nil
	})
	return out, err
}

// Close unloads the model.
func (g *EngineGenerator) Close() error { return g.run.Close() }
