package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"anechat/storage"
)

// The prompt library's file format (Library.Export, Library.Import):
//
//	{"format": "anechat.prompts", "version": 1, "exportedAt": "…",
//	 "prompts": [{"title": "…", "systemPrompt": "…", "body": "…", "tags": ["…"]}]}
//
// title is required, the other fields optional; unknown fields are errors
// (a typo must not drop text silently). Snapshots are not exported: they
// belong to this machine's models.
const (
	promptsFormat  = "anechat.prompts"
	promptsVersion = 1
	// maxImportBytes bounds an imported file (prompts or a conversation).
	maxImportBytes = 64 << 20
)

// promptsFile is the JSON of an exported library.
type promptsFile struct {
	Format     string        `json:"format"`
	Version    int           `json:"version"`
	ExportedAt time.Time     `json:"exportedAt"`
	Prompts    []promptEntry `json:"prompts"`
}

type promptEntry struct {
	Title        string   `json:"title"`
	SystemPrompt string   `json:"systemPrompt,omitempty"`
	Body         string   `json:"body,omitempty"`
	Tags         []string `json:"tags,omitempty"`
}

// ExportFile is a file the window offers to save: a suggested name, its
// media type and its text.
type ExportFile struct {
	FileName string `json:"fileName"`
	MimeType string `json:"mimeType"`
	Text     string `json:"text"`
}

// Export writes the prompts with ids (all of them when ids is empty) as a
// prompt library file.
func (l *Library) Export(ids []int64) (ExportFile, error) {
	d, err := l.c.db()
	if err != nil {
		return ExportFile{}, err
	}
	ctx := l.c.context()
	var ps []storage.Prompt
	if len(ids) == 0 {
		if ps, err = d.ListPrompts(ctx, ""); err != nil {
			return ExportFile{}, err
		}
	}
	for _, id := range ids {
		p, err := d.GetPrompt(ctx, id)
		if err != nil {
			return ExportFile{}, fmt.Errorf("library: export prompt %d: %w", id, err)
		}
		ps = append(ps, p)
	}
	f := promptsFile{Format: promptsFormat, Version: promptsVersion, ExportedAt: l.c.now().UTC().Truncate(time.Second), Prompts: []promptEntry{}}
	for _, p := range ps {
		f.Prompts = append(f.Prompts, promptEntry{Title: p.Title, SystemPrompt: p.SystemPrompt, Body: p.Body, Tags: p.Tags})
	}
	text, err := marshalFile(f)
	if err != nil {
		return ExportFile{}, err
	}
	return ExportFile{FileName: "anechat-prompts.json", MimeType: "application/json", Text: text}, nil
}

// marshalFile is indented JSON without HTML escaping, ending in a newline.
func marshalFile(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// PromptImport is what Library.Import added, and what it skipped because
// the library already held the same prompt.
type PromptImport struct {
	Created []Prompt `json:"created"`
	Skipped []string `json:"skipped"` // titles of prompts already in the library
}

// Import adds the prompts of a prompt library file (as Export writes it).
// The whole file is checked first: an error names the entry and the field
// (prompts[2].title) and nothing is added. A prompt the library already
// holds (same title, system prompt and body) is skipped.
func (l *Library) Import(text string) (PromptImport, error) {
	f, err := decodePrompts(text)
	if err != nil {
		return PromptImport{}, err
	}
	d, err := l.c.db()
	if err != nil {
		return PromptImport{}, err
	}
	ctx := l.c.context()
	have, err := d.ListPrompts(ctx, "")
	if err != nil {
		return PromptImport{}, err
	}
	key := func(title, system, body string) string { return title + "\x00" + system + "\x00" + body }
	known := map[string]bool{}
	for _, p := range have {
		known[key(p.Title, p.SystemPrompt, p.Body)] = true
	}
	res := PromptImport{Created: []Prompt{}, Skipped: []string{}}
	for _, e := range f.Prompts {
		k := key(strings.TrimSpace(e.Title), e.SystemPrompt, e.Body)
		if known[k] {
			res.Skipped = append(res.Skipped, e.Title)
			continue
		}
		known[k] = true
		p, err := d.CreatePrompt(ctx, PromptInput{Title: e.Title, SystemPrompt: e.SystemPrompt, Body: e.Body, Tags: e.Tags}.storage())
		if err != nil {
			return res, fmt.Errorf("library: import %q: %w (the prompts before it were added)", e.Title, err)
		}
		res.Created = append(res.Created, l.view(d, p))
	}
	return res, nil
}

// decodePrompts parses and checks a prompt library file.
func decodePrompts(text string) (promptsFile, error) {
	var f promptsFile
	if len(text) > maxImportBytes {
		return f, fmt.Errorf("library: import: the file is %d bytes; at most %d are read", len(text), maxImportBytes)
	}
	// The entries are decoded one by one, so that an error names the entry.
	var raw struct {
		promptsFile
		Prompts []json.RawMessage `json:"prompts"`
	}
	if err := decodeStrict(text, &raw); err != nil {
		return f, fmt.Errorf("library: import: %w", err)
	}
	f = raw.promptsFile
	if raw.Prompts != nil {
		f.Prompts = make([]promptEntry, len(raw.Prompts))
	}
	for i, r := range raw.Prompts {
		if err := decodeStrict(string(r), &f.Prompts[i]); err != nil {
			return f, fmt.Errorf("library: import: prompts[%d]: %w", i, err)
		}
	}
	switch {
	case f.Format != promptsFormat:
		return f, fmt.Errorf("library: import: format %q: this is not an anechat prompt library file (want format %q)", f.Format, promptsFormat)
	case f.Version < 1:
		return f, fmt.Errorf("library: import: version %d: want %d", f.Version, promptsVersion)
	case f.Version > promptsVersion:
		return f, fmt.Errorf("library: import: version %d is newer than this anechat reads (%d): update anechat", f.Version, promptsVersion)
	case f.Prompts == nil:
		return f, errors.New(`library: import: no "prompts" list`)
	}
	for i, e := range f.Prompts {
		at := fmt.Sprintf("prompts[%d]", i)
		if t := strings.TrimSpace(e.Title); t != "" {
			at += fmt.Sprintf(" (%q)", t)
		}
		switch {
		case strings.TrimSpace(e.Title) == "":
			return f, fmt.Errorf("library: import: %s.title: a prompt needs a title", at)
		case len(e.Title) > 1000:
			return f, fmt.Errorf("library: import: %s.title: %d bytes; keep it under 1000", at, len(e.Title))
		case strings.TrimSpace(e.SystemPrompt) == "" && strings.TrimSpace(e.Body) == "":
			return f, fmt.Errorf("library: import: %s: neither a systemPrompt nor a body", at)
		}
		for j, t := range e.Tags {
			if strings.TrimSpace(t) == "" {
				return f, fmt.Errorf("library: import: %s.tags[%d]: an empty tag", at, j)
			}
		}
	}
	return f, nil
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// trailing data, with errors that say where (a field path or an offset).
func decodeStrict(text string, v any) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te) && te.Field == "":
			return fmt.Errorf("found a JSON %s where an object belongs", te.Value)
		case errors.As(err, &te):
			return fmt.Errorf("%s: want %s, found a JSON %s", te.Field, jsonKind(te.Type.Kind()), te.Value)
		case errors.As(err, &se):
			return fmt.Errorf("not valid JSON at byte %d: %v", se.Offset, se)
		case errors.Is(err, io.EOF):
			return errors.New("the file is empty")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return errors.New("not valid JSON: the file ends in the middle of a value")
		}
		return err // unknown field "x", and the like: the message names it
	}
	if dec.More() {
		return errors.New("more than one JSON value in the file")
	}
	return nil
}

// jsonKind names a Go kind as JSON calls it.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer, reflect.Interface:
		return "a value"
	}
	return "a number"
}
