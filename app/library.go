package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"anechat/internal/kvindex"
	"anechat/storage"
)

// Library is the prompt library service: saved prompts with tags. A prompt
// can be prepared: its opening (system prompt and body) is prefilled once and
// its KV snapshot pinned to it (never evicted), so every chat started from it
// resumes instead of prefilling it again.
type Library struct {
	c      *core
	gen    Generator
	models *Models
}

// ErrPromptTooShort: the prompt's opening is shorter than one KV block, too
// short for a snapshot to pay.
var ErrPromptTooShort = errors.New("library: this prompt is too short to need preparing (a snapshot pays from 64 tokens on); chats from it start quickly anyway")

// Prompt is a library prompt as the window shows it: the stored prompt, the
// variables it asks for, and whether it is ready to resume.
type Prompt struct {
	storage.Prompt
	// Variables are its {{name}} placeholders in order (PromptVariables),
	// asked for when a chat starts from it.
	Variables []string `json:"variables"`
	// Snapshot is its prepared KV snapshot, nil when it is not prepared.
	Snapshot *PromptSnapshot `json:"snapshot"`
}

// PromptSnapshot is a prepared prompt's KV snapshot: which model it was
// made with and whether a chat started from the prompt now would resume
// from it.
type PromptSnapshot struct {
	ID        int64     `json:"id"`
	Tokens    int       `json:"tokens"`
	Bytes     int64     `json:"bytes"`
	CreatedAt time.Time `json:"createdAt"`
	// ModelID and ModelName are the registered model it was made with (0
	// and "" when no registered model has its fingerprint any more).
	ModelID   int64  `json:"modelId"`
	ModelName string `json:"modelName"`
	// Ready: a chat started now (with the default model) resumes from it.
	// When not, Reason says why and what to do.
	Ready  bool   `json:"ready"`
	Reason string `json:"reason"`
}

// PrepareResult is what Prepare did: the prompt's snapshot is made
// (OutcomePrepared), or its opening is too short to need one
// (OutcomeTooShort: a fact, not a failure; the message says so).
type PrepareResult struct {
	Prompt  Prompt  `json:"prompt"`
	Outcome Outcome `json:"outcome"`
}

// PromptInput is a prompt as the editor submits it.
type PromptInput struct {
	Title        string   `json:"title"`
	SystemPrompt string   `json:"systemPrompt"`
	Body         string   `json:"body"`
	Tags         []string `json:"tags"`
}

func (in PromptInput) storage() storage.PromptInput {
	in.Title = strings.TrimSpace(in.Title)
	return storage.PromptInput{Title: in.Title, SystemPrompt: in.SystemPrompt, Body: in.Body, Tags: in.Tags}
}

// List returns the prompts, most recently updated first; a non-empty tag
// keeps those carrying it, a non-empty query those whose title, system prompt,
// body or tags contain every word of it (case-insensitively).
func (l *Library) List(tag, query string) ([]Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return nil, err
	}
	ps, err := d.ListPrompts(l.c.context(), tag)
	if err != nil {
		return nil, err
	}
	words := strings.Fields(strings.ToLower(query))
	out := []Prompt{}
	def := l.defaultModel()
	for _, p := range ps {
		hay := strings.ToLower(p.Title + "\n" + p.SystemPrompt + "\n" + p.Body + "\n" + strings.Join(p.Tags, " "))
		all := true
		for _, w := range words {
			if !strings.Contains(hay, w) {
				all = false
				break
			}
		}
		if all {
			out = append(out, l.viewWith(d, p, def))
		}
	}
	return out, nil
}

// defaultModel is the model a chat from a prompt would use now, nil for none.
func (l *Library) defaultModel() *storage.Model {
	if m, err := l.models.resolve(0); err == nil {
		return &m
	}
	return nil
}

// view is p as the window shows it (viewWith the default model).
func (l *Library) view(d *storage.DB, p storage.Prompt) Prompt {
	return l.viewWith(d, p, l.defaultModel())
}

// viewWith is p as the window shows it. Its snapshot is ready when its file
// is there and it was made with def, the model a chat from p would use now;
// a failure to tell is logged and shown as not ready.
func (l *Library) viewWith(d *storage.DB, p storage.Prompt, def *storage.Model) Prompt {
	v := Prompt{Prompt: p, Variables: PromptVariables(p.SystemPrompt, p.Body)}
	if p.PinnedSnapshotID == 0 {
		return v
	}
	ctx := l.c.context()
	s, err := d.GetSnapshot(ctx, p.PinnedSnapshotID)
	if err != nil {
		l.c.log.Warn("prompt snapshot unreadable", "prompt", p.ID, "err", err)
		return v
	}
	ps := &PromptSnapshot{ID: s.ID, Tokens: s.TokenCount, Bytes: s.Bytes, CreatedAt: s.CreatedAt}
	v.Snapshot = ps
	if ms, err := d.ModelsByFingerprint(ctx, s.ModelFingerprint); err == nil && len(ms) > 0 {
		ps.ModelID, ps.ModelName = ms[0].ID, ms[0].Name
	}
	switch {
	case ps.ModelID == 0:
		ps.Reason = "it was prepared with a model that is no longer registered: prepare it again"
	case def == nil:
		ps.Reason = "no default model is chosen: choose one on the Models page"
	case def.Fingerprint != s.ModelFingerprint:
		ps.Reason = fmt.Sprintf("it was prepared with %s, but new chats use %s (the default): prepare it again", ps.ModelName, def.Name)
	default:
		if _, err := os.Stat(filepath.Join(storage.KVPath(l.c.dataDir), filepath.FromSlash(s.FilePath))); err != nil {
			ps.Reason = "its snapshot file is missing: prepare it again"
		} else {
			ps.Ready = true
		}
	}
	return v
}

// Get returns prompt id.
func (l *Library) Get(id int64) (Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return Prompt{}, err
	}
	p, err := d.GetPrompt(l.c.context(), id)
	if err != nil {
		return Prompt{}, err
	}
	return l.view(d, p), nil
}

// Create saves a new prompt.
func (l *Library) Create(in PromptInput) (Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return Prompt{}, err
	}
	p, err := d.CreatePrompt(l.c.context(), in.storage())
	if err != nil {
		return Prompt{}, err
	}
	return l.view(d, p), nil
}

// Update replaces prompt id. A change to its system prompt or body unpins
// its snapshot (it no longer holds the prompt); prepare it again.
func (l *Library) Update(id int64, in PromptInput) (Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return Prompt{}, err
	}
	ctx := l.c.context()
	old, err := d.GetPrompt(ctx, id)
	if err != nil {
		return Prompt{}, err
	}
	p, err := d.UpdatePrompt(ctx, id, in.storage())
	if err != nil {
		return Prompt{}, err
	}
	if p.PinnedSnapshotID != 0 && (p.SystemPrompt != old.SystemPrompt || p.Body != old.Body) {
		if err := d.SetPromptSnapshot(ctx, id, 0); err != nil {
			return Prompt{}, err
		}
		if p, err = d.GetPrompt(ctx, id); err != nil {
			return Prompt{}, err
		}
	}
	return l.view(d, p), nil
}

// Prepare prefills prompt id's opening with the default model and pins its
// KV snapshot to it; the prompt's Snapshot then says it is ready to resume.
// An opening too short to need a snapshot is not an error: the result says
// so (OutcomeTooShort).
func (l *Library) Prepare(id int64) (PrepareResult, error) {
	d, err := l.c.db()
	if err != nil {
		return PrepareResult{}, err
	}
	ctx := l.c.context()
	p, err := d.GetPrompt(ctx, id)
	if err != nil {
		return PrepareResult{}, err
	}
	res := PrepareResult{Outcome: Outcome{Kind: OutcomePrepared}}
	np, err := l.prepare(ctx, d, p, 0, nil)
	switch {
	case errors.Is(err, ErrPromptTooShort):
		np, res.Outcome = p, Outcome{Kind: OutcomeTooShort, Message: strings.TrimPrefix(err.Error(), "library: ")}
	case err != nil:
		return PrepareResult{}, err
	}
	res.Prompt = l.view(d, np)
	if res.Outcome.Kind == OutcomePrepared && res.Prompt.Snapshot != nil {
		res.Outcome.Message = "ready to resume with " + res.Prompt.Snapshot.ModelName
	}
	return res, nil
}

// Unprepare drops prompt id's warm snapshot: the prompt is no longer pinned
// to it and its file is deleted (its disk space freed); chats from the prompt
// then read its opening again, and Prepare (or the next chat from it)
// makes a new one. A prompt with the same opening as another shares its
// snapshot; unpreparing one leaves the file to the other. A prompt that is
// not prepared is returned as it is. A
// file that cannot be removed is logged: its row is gone, so nothing resumes
// from it, and the next start cleans it up. A chat restoring it meanwhile
// only loses that resume: snapshots fail closed.
func (l *Library) Unprepare(id int64) (Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return Prompt{}, err
	}
	ctx := l.c.context()
	p, err := d.GetPrompt(ctx, id)
	if err != nil {
		return Prompt{}, err
	}
	if p.PinnedSnapshotID != 0 {
		s, err := d.GetSnapshot(ctx, p.PinnedSnapshotID)
		switch {
		case errors.Is(err, storage.ErrNotFound):
			// Gone already: only the pin is left to drop.
		case err != nil:
			return Prompt{}, err
		default:
			// Another prompt with the same opening pins the same file: it
			// keeps it, and only this prompt's pin goes.
			pins, err := d.PromptsPinning(ctx, s.ID)
			if err != nil {
				return Prompt{}, err
			}
			if slices.ContainsFunc(pins, func(o int64) bool { return o != id }) {
				break
			}
			// The row goes first (the pin with it): no row may point at a missing file.
			if err := d.DeleteSnapshot(ctx, s.ID); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return Prompt{}, err
			}
			f := filepath.Join(storage.KVPath(l.c.dataDir), filepath.FromSlash(s.FilePath))
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				l.c.log.Warn("unprepared prompt's snapshot file not removed", "prompt", id, "path", f, "err", err)
			}
		}
		if err := d.SetPromptSnapshot(ctx, id, 0); err != nil {
			return Prompt{}, err
		}
		if p, err = d.GetPrompt(ctx, id); err != nil {
			return Prompt{}, err
		}
	}
	return l.view(d, p), nil
}

// promptOpening is the conversation a chat started from p opens with: its
// system prompt and its body sent as the first message, as Chat builds it.
func promptOpening(p storage.Prompt) []ChatMessage {
	var msgs []ChatMessage
	if strings.TrimSpace(p.SystemPrompt) != "" {
		msgs = append(msgs, ChatMessage{Role: storage.RoleSystem, Content: p.SystemPrompt})
	}
	if strings.TrimSpace(p.Body) != "" {
		msgs = append(msgs, ChatMessage{Role: storage.RoleUser, Content: p.Body})
	}
	return msgs
}

// prepare stores p's opening as a snapshot with model modelID (0: the
// default) and pins it to p; progress (may be nil) hears the prefill.
func (l *Library) prepare(ctx context.Context, d *storage.DB, p storage.Prompt, modelID int64, progress func(done, total int)) (storage.Prompt, error) {
	pr, ok := l.gen.(Preparer)
	if !ok {
		return storage.Prompt{}, ErrNoEngine
	}
	msgs := promptOpening(p)
	if len(msgs) == 0 {
		return storage.Prompt{}, fmt.Errorf("library: prompt %d has neither a system prompt nor a body to prepare", p.ID)
	}
	mdl, err := l.models.resolve(modelID)
	if err != nil {
		return storage.Prompt{}, err
	}
	snap, err := pr.Prepare(ctx, GenerateRequest{Model: mdl, Messages: msgs, Progress: progress}, kvindex.PromptKey(p.ID))
	if err != nil {
		return storage.Prompt{}, fmt.Errorf("library: prepare prompt %d: %w", p.ID, err)
	}
	if snap.Path == "" {
		return storage.Prompt{}, ErrPromptTooShort
	}
	rel, err := filepath.Rel(storage.KVPath(l.c.dataDir), snap.Path)
	if err != nil {
		return storage.Prompt{}, fmt.Errorf("library: prepare prompt %d: snapshot %s: %w", p.ID, snap.Path, err)
	}
	rows, err := d.ListSnapshots(ctx)
	if err != nil {
		return storage.Prompt{}, err
	}
	for _, s := range rows {
		// The row may be another prompt's with the same opening (one file
		// for both, storage.DB.ReplaceSnapshot): pinned by both.
		if s.FilePath == filepath.ToSlash(rel) {
			if err := d.SetPromptSnapshot(ctx, p.ID, s.ID); err != nil {
				return storage.Prompt{}, err
			}
			return d.GetPrompt(ctx, p.ID)
		}
	}
	return storage.Prompt{}, fmt.Errorf("library: prepare prompt %d: snapshot %s has no index row (it was evicted at once: raise the KV cache quota)", p.ID, snap.Path)
}

// Delete removes prompt id.
func (l *Library) Delete(id int64) error {
	d, err := l.c.db()
	if err != nil {
		return err
	}
	return d.DeletePrompt(l.c.context(), id)
}

// Tags lists the tags in use with their prompt counts.
func (l *Library) Tags() ([]storage.TagCount, error) {
	d, err := l.c.db()
	if err != nil {
		return nil, err
	}
	return d.ListTags(l.c.context())
}
