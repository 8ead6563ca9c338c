package app

import (
	"context"
	"fmt"
	"log/slog"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/internal/kvindex"
	"anechat/internal/runner"
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
// The wiring lives in internal/runner, which the HTTP API (API, package
// server) runs on too: both share the loaded model, one reply at a time.
type EngineGenerator struct {
	log *slog.Logger
	run *runner.Runner
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
	return &EngineGenerator{log: log, run: runner.New(log, nil)}
}

// Runner is the runner the generator's replies run on; the in-app HTTP API
// serves its requests on the same one.
func (g *EngineGenerator) Runner() *runner.Runner { return g.run }

// Generate implements Generator.
func (g *EngineGenerator) Generate(ctx context.Context, req GenerateRequest, emit func(Piece) error) (GenerateStats, error) {
	var out GenerateStats
	err := g.run.Do(ctx, req.Model.Path, func(m *runner.Model) error {
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
		var tokens, accepted, calls int // the reply's counts so far
		st, err := m.Reply(ctx, runner.Request{Mode: runner.Chat, Prompt: ids, Learn: learn, Progress: req.Progress,
			Options: engine.GenerateOptions{MaxTokens: req.MaxTokens, Width: req.Width, Temperature: req.Temperature, Seed: req.Seed},
			Emit: func(t engine.Token) error {
				if t.ID >= 0 { // not the final text-only event
					tokens, calls = tokens+1, t.Calls
					if t.Drafted {
						accepted++
					}
				}
				if t.Text == "" {
					return nil
				}
				return emit(Piece{Text: t.Text, Drafted: t.Drafted, Tokens: tokens, Accepted: accepted, Calls: calls})
			}})
		out = GenerateStats{Tokens: st.Tokens, PrefillTokens: st.PrefillTokens, ResumedTokens: st.ResumedTokens,
			TargetCalls: st.TargetCalls, Drafted: st.Drafted, Accepted: st.Accepted, Declined: st.Declined, Probes: st.Probes,
			DraftNote: st.DraftNote, TTFTms: st.TTFTms,
			DecodeTokS: st.DecodeTokS, Stopped: st.Stopped}
		if err != nil {
			return err
		}
		if req.ConversationID != 0 {
			// A failed save only costs a prefill next time: log it, keep the reply.
			s, _ := m.Session(runner.Chat)
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
	err := g.run.Do(ctx, req.Model.Path, func(m *runner.Model) error {
		if !g.run.HasSnapshots() {
			return fmt.Errorf("engine: prepare %s: no KV snapshot store (the data directory's kv/ index did not open)", key)
		}
		ids, err := m.Render(ctx, chatMessages(req.Messages))
		if err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		s, err := m.Prefill(ctx, runner.Chat, ids, req.Progress)
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
