package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

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
var ErrPromptTooShort = errors.New("library: this prompt is too short to prepare (a snapshot needs at least 64 tokens); it starts quickly anyway")

// PromptInput is a prompt as the editor submits it.
type PromptInput struct {
	Title        string   `json:"title"`
	SystemPrompt string   `json:"systemPrompt"`
	Body         string   `json:"body"`
	Tags         []string `json:"tags"`
}

func (in PromptInput) storage() storage.PromptInput {
	return storage.PromptInput{Title: strings.TrimSpace(in.Title), SystemPrompt: in.SystemPrompt, Body: in.Body, Tags: in.Tags}
}

// List returns the prompts, most recently updated first; a non-empty tag
// keeps those carrying it, a non-empty query those whose title, system prompt,
// body or tags contain every word of it (case-insensitively).
func (l *Library) List(tag, query string) ([]storage.Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return nil, err
	}
	ps, err := d.ListPrompts(l.c.context(), tag)
	if err != nil {
		return nil, err
	}
	words := strings.Fields(strings.ToLower(query))
	if len(words) == 0 {
		return ps, nil
	}
	out := []storage.Prompt{}
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
			out = append(out, p)
		}
	}
	return out, nil
}

// Get returns prompt id.
func (l *Library) Get(id int64) (storage.Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return storage.Prompt{}, err
	}
	return d.GetPrompt(l.c.context(), id)
}

// Create saves a new prompt.
func (l *Library) Create(in PromptInput) (storage.Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return storage.Prompt{}, err
	}
	return d.CreatePrompt(l.c.context(), in.storage())
}

// Update replaces prompt id. A change to its system prompt or body unpins
// its snapshot (it no longer holds the prompt); prepare it again.
func (l *Library) Update(id int64, in PromptInput) (storage.Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return storage.Prompt{}, err
	}
	ctx := l.c.context()
	old, err := d.GetPrompt(ctx, id)
	if err != nil {
		return storage.Prompt{}, err
	}
	p, err := d.UpdatePrompt(ctx, id, in.storage())
	if err != nil {
		return storage.Prompt{}, err
	}
	if p.PinnedSnapshotID != 0 && (p.SystemPrompt != old.SystemPrompt || p.Body != old.Body) {
		if err := d.SetPromptSnapshot(ctx, id, 0); err != nil {
			return storage.Prompt{}, err
		}
		return d.GetPrompt(ctx, id)
	}
	return p, nil
}

// Prepare prefills prompt id's opening with the default model and pins its
// KV snapshot to it; the prompt's PinnedSnapshotID then says it is ready to
// resume.
func (l *Library) Prepare(id int64) (storage.Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return storage.Prompt{}, err
	}
	ctx := l.c.context()
	p, err := d.GetPrompt(ctx, id)
	if err != nil {
		return storage.Prompt{}, err
	}
	return l.prepare(ctx, d, p, 0, nil)
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
		if s.PromptID == p.ID && s.FilePath == filepath.ToSlash(rel) {
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
