package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"anechat/storage/db"
)

// Prompt is an entry of the prompt library.
type Prompt struct {
	ID               int64     `json:"id"`
	Title            string    `json:"title"`
	SystemPrompt     string    `json:"systemPrompt"`
	Body             string    `json:"body"`
	Tags             []string  `json:"tags"`             // normalised, sorted
	PinnedSnapshotID int64     `json:"pinnedSnapshotId"` // KV snapshot of the rendered prompt, 0 if none
	CreatedAt        time.Time `json:"createdAt"`
	UpdatedAt        time.Time `json:"updatedAt"`
}

// PromptInput is what CreatePrompt and UpdatePrompt store.
type PromptInput struct {
	Title        string
	SystemPrompt string
	Body         string
	Tags         []string // trimmed and lower-cased; empty and duplicate tags dropped
}

// TagCount is a tag and how many prompts carry it.
type TagCount struct {
	Tag     string `json:"tag"`
	Prompts int64  `json:"prompts"`
}

// NormalizeTags trims and lower-cases tags, drops empty ones and duplicates,
// and sorts them: the form tags are stored and matched in.
func NormalizeTags(tags []string) []string {
	out := []string{}
	for _, t := range tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

func promptOut(p db.Prompt, tags []string) Prompt {
	if tags == nil {
		tags = []string{}
	}
	return Prompt{ID: p.ID, Title: p.Title, SystemPrompt: p.SystemPrompt, Body: p.Body, Tags: tags,
		PinnedSnapshotID: idOut(p.PinnedSnapshotID), CreatedAt: fromMillis(p.CreatedAt), UpdatedAt: fromMillis(p.UpdatedAt)}
}

func setTags(ctx context.Context, q *db.Queries, id int64, tags []string) error {
	if err := q.ClearPromptTags(ctx, id); err != nil {
		return err
	}
	for _, t := range tags {
		if err := q.AddPromptTag(ctx, db.AddPromptTagParams{PromptID: id, Tag: t}); err != nil {
			return err
		}
	}
	return nil
}

// CreatePrompt adds a prompt with its tags.
func (d *DB) CreatePrompt(ctx context.Context, in PromptInput) (Prompt, error) {
	const op = "create prompt"
	if strings.TrimSpace(in.Title) == "" {
		return Prompt{}, invalid(op, "a prompt needs a title")
	}
	tags := NormalizeTags(in.Tags)
	var out Prompt
	err := d.tx(ctx, op, func(q *db.Queries) error {
		now := millis(d.now())
		p, err := q.CreatePrompt(ctx, db.CreatePromptParams{Title: in.Title, SystemPrompt: in.SystemPrompt, Body: in.Body,
			CreatedAt: now, UpdatedAt: now})
		if err != nil {
			return err
		}
		if err := setTags(ctx, q, p.ID, tags); err != nil {
			return err
		}
		out = promptOut(p, tags)
		return nil
	})
	return out, err
}

// UpdatePrompt replaces a prompt's title, system prompt, body and tags.
func (d *DB) UpdatePrompt(ctx context.Context, id int64, in PromptInput) (Prompt, error) {
	op := fmt.Sprintf("update prompt %d", id)
	if strings.TrimSpace(in.Title) == "" {
		return Prompt{}, invalid(op, "a prompt needs a title")
	}
	tags := NormalizeTags(in.Tags)
	err := d.tx(ctx, op, func(q *db.Queries) error {
		n, err := q.UpdatePrompt(ctx, db.UpdatePromptParams{Title: in.Title, SystemPrompt: in.SystemPrompt, Body: in.Body,
			UpdatedAt: millis(d.now()), ID: id})
		if err := oneRow(op, n, err); err != nil {
			return err
		}
		return setTags(ctx, q, id, tags)
	})
	if err != nil {
		return Prompt{}, err
	}
	return d.GetPrompt(ctx, id)
}

// GetPrompt returns the prompt with id and its tags, or ErrNotFound.
func (d *DB) GetPrompt(ctx context.Context, id int64) (Prompt, error) {
	op := fmt.Sprintf("get prompt %d", id)
	p, err := d.q.GetPrompt(ctx, id)
	if err != nil {
		return Prompt{}, d.fail(op, err)
	}
	tags, err := d.q.ListPromptTags(ctx, id)
	if err != nil {
		return Prompt{}, d.fail(op, err)
	}
	return promptOut(p, tags), nil
}

// ListPrompts lists prompts, most recently updated first; with a non-empty
// tag only the prompts carrying it.
func (d *DB) ListPrompts(ctx context.Context, tag string) ([]Prompt, error) {
	const op = "list prompts"
	var ps []db.Prompt
	var err error
	if t := NormalizeTags([]string{tag}); len(t) == 1 {
		ps, err = d.q.ListPromptsByTag(ctx, t[0])
	} else {
		ps, err = d.q.ListPrompts(ctx)
	}
	if err != nil {
		return nil, d.fail(op, err)
	}
	out := make([]Prompt, len(ps))
	for i, p := range ps {
		tags, err := d.q.ListPromptTags(ctx, p.ID)
		if err != nil {
			return nil, d.fail(op, err)
		}
		out[i] = promptOut(p, tags)
	}
	return out, nil
}

// ListTags lists every tag in use with its number of prompts, by name.
func (d *DB) ListTags(ctx context.Context) ([]TagCount, error) {
	rows, err := d.q.ListAllTags(ctx)
	if err != nil {
		return nil, d.fail("list tags", err)
	}
	out := make([]TagCount, len(rows))
	for i, r := range rows {
		out[i] = TagCount{Tag: r.Tag, Prompts: r.Prompts}
	}
	return out, nil
}

// DeletePrompt deletes a prompt and its tags. Its pinned snapshot row stays
// (no longer pinned by the prompt) until evicted; conversations started from
// it keep their messages.
func (d *DB) DeletePrompt(ctx context.Context, id int64) error {
	op := fmt.Sprintf("delete prompt %d", id)
	n, err := d.q.DeletePrompt(ctx, id)
	return d.fail(op, oneRow(op, n, err))
}

// PromptsPinning lists the prompts that pin snapshot snapshotID (more than
// one when prompts share their opening, and so its snapshot file), in id order.
func (d *DB) PromptsPinning(ctx context.Context, snapshotID int64) ([]int64, error) {
	ids, err := d.q.ListPromptsPinning(ctx, idIn(snapshotID))
	return ids, d.fail(fmt.Sprintf("list the prompts pinning snapshot %d", snapshotID), err)
}

// SetPromptSnapshot pins KV snapshot snapshotID to the prompt (0 unpins).
// A snapshot a prompt pins is never an eviction candidate.
func (d *DB) SetPromptSnapshot(ctx context.Context, promptID, snapshotID int64) error {
	op := fmt.Sprintf("pin snapshot %d to prompt %d", snapshotID, promptID)
	n, err := d.q.SetPromptSnapshot(ctx, db.SetPromptSnapshotParams{PinnedSnapshotID: idIn(snapshotID), UpdatedAt: millis(d.now()), ID: promptID})
	return d.fail(op, oneRow(op, n, err))
}
