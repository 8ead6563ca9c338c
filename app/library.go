package app

import (
	"strings"

	"anechat/storage"
)

// Library is the prompt library service: saved prompts with tags.
type Library struct{ c *core }

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

// Update replaces prompt id.
func (l *Library) Update(id int64, in PromptInput) (storage.Prompt, error) {
	d, err := l.c.db()
	if err != nil {
		return storage.Prompt{}, err
	}
	return d.UpdatePrompt(l.c.context(), id, in.storage())
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
