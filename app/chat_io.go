package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"anechat/storage"
)

// PromptStart is what StartFromPrompt did: the conversation, and the
// prompt's first message sent (User) or, when it could not be sent, kept as
// the conversation's draft (User.ID is 0 and Unsent says why: no model yet,
// say), so the text waits in the composer, stored.
type PromptStart struct {
	Turn
	Unsent string `json:"unsent"`
}

// StartFromPrompt starts a chat from library prompt promptID: a
// conversation with the prompt's title and system prompt, and its body sent
// as the first message, each with its {{name}} variables filled from values
// (every variable needs a value; see PromptVariables for the rules). When
// the prompt is prepared and the conversation opens as the prompt does, the
// reply resumes from its KV snapshot (and its stats say so: ResumedPrompt).
//
// It never leaves empty duplicates: an empty conversation from the prompt
// (no message, no draft but the body) is reused rather than another made,
// and a start while an identical one from the prompt is still answering its
// first message returns that one (a double click starts one chat). A prompt
// without a body only creates (or finds) the conversation.
func (ch *Chat) StartFromPrompt(promptID int64, values map[string]string) (PromptStart, error) {
	d, err := ch.c.db()
	if err != nil {
		return PromptStart{}, err
	}
	ctx := ch.c.context()
	p, err := d.GetPrompt(ctx, promptID)
	if err != nil {
		return PromptStart{}, fmt.Errorf("chat: prompt %d: %w", promptID, err)
	}
	system, err := FillVariables(p.SystemPrompt, values)
	if err != nil {
		return PromptStart{}, err
	}
	body, err := FillVariables(p.Body, values)
	if err != nil {
		return PromptStart{}, err
	}
	ch.starting.Lock()
	defer ch.starting.Unlock()
	if t, ok := ch.startingFrom(ctx, d, promptID, system, body); ok {
		return PromptStart{Turn: t}, nil
	}
	c, err := d.EmptyConversationFromPrompt(ctx, promptID, body)
	made := errors.Is(err, storage.ErrNotFound)
	switch {
	case made:
		if c, err = ch.CreateConversation(NewConversation{PromptID: promptID}); err != nil {
			return PromptStart{}, err
		}
	case err != nil:
		return PromptStart{}, err
	}
	if system != c.SystemPrompt {
		if c, err = ch.SetSystemPrompt(c.ID, system); err != nil {
			return PromptStart{}, err
		}
	}
	if strings.TrimSpace(body) == "" {
		return PromptStart{Turn: Turn{ConversationID: c.ID}}, nil
	}
	t, err := ch.Send(c.ID, body)
	if err == nil {
		return PromptStart{Turn: t}, nil
	}
	// Not sent (no model yet, say): the text waits in the conversation's
	// composer, stored, and the window says why.
	if derr := d.SetDraft(ctx, c.ID, body); derr != nil {
		if made {
			if rerr := d.DeleteConversation(ctx, c.ID); rerr != nil {
				ch.c.log.Warn("empty conversation not removed", "conversation", c.ID, "err", rerr)
			}
		}
		return PromptStart{}, errors.Join(err, derr)
	}
	return PromptStart{Turn: Turn{ConversationID: c.ID}, Unsent: err.Error()}, nil
}

// startingFrom finds a conversation from prompt promptID that is answering
// its first message, body, with system prompt system: a start identical to
// one still running. Conversations it cannot read are not it.
func (ch *Chat) startingFrom(ctx context.Context, d *storage.DB, promptID int64, system, body string) (Turn, bool) {
	ch.mu.Lock()
	running := make(map[int64]int64, len(ch.streams)) // conversation: the message being answered
	for id, s := range ch.streams {
		running[id] = s.parentID
	}
	ch.mu.Unlock()
	for id, parent := range running {
		c, err := d.GetConversation(ctx, id)
		if err != nil || c.PromptID != promptID || c.SystemPrompt != system || parent == 0 {
			continue
		}
		u, err := d.GetMessage(ctx, parent)
		if err != nil || u.ParentID != 0 || u.Role != storage.RoleUser || u.Content != body {
			continue
		}
		return Turn{ConversationID: c.ID, User: u}, true
	}
	return Turn{}, false
}

// The conversation file format (Chat.Export "json", Chat.Import):
//
//	{"format": "anechat.conversation", "version": 1, "exportedAt": "…",
//	 "conversation": {"title": "…", "systemPrompt": "…", "pinned": false,
//	                  "createdAt": "…", "updatedAt": "…",
//	                  "model": {"name": "…", "fingerprint": "…"}, "options": {…}},
//	 "messages": [{"id": 1, "parent": null, "role": "user", "content": "…",
//	               "createdAt": "…", "stats": {…}}, …],
//	 "activeLeaf": 2}
//
// It keeps the whole message tree: every branch (edits, regenerations),
// each message naming its parent by the file's own ids (a parent comes
// first), and the branch on screen (activeLeaf). Optional: systemPrompt,
// pinned, the times (import time when absent), model, options, stats.
const (
	conversationFormat  = "anechat.conversation"
	conversationVersion = 1
)

type conversationFile struct {
	Format       string            `json:"format"`
	Version      int               `json:"version"`
	ExportedAt   time.Time         `json:"exportedAt"`
	Conversation conversationMeta  `json:"conversation"`
	Messages     []conversationMsg `json:"messages"`
	ActiveLeaf   *int64            `json:"activeLeaf"`
}

type conversationMeta struct {
	Title        string          `json:"title"`
	SystemPrompt string          `json:"systemPrompt,omitempty"`
	Pinned       bool            `json:"pinned,omitempty"`
	CreatedAt    *time.Time      `json:"createdAt,omitempty"`
	UpdatedAt    *time.Time      `json:"updatedAt,omitempty"`
	Model        *modelRef       `json:"model,omitempty"`
	Options      json.RawMessage `json:"options,omitempty"`
}

type modelRef struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
}

type conversationMsg struct {
	ID        int64           `json:"id"`
	Parent    *int64          `json:"parent"`
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	CreatedAt *time.Time      `json:"createdAt,omitempty"`
	Stats     json.RawMessage `json:"stats,omitempty"`
}

// Export formats.
const (
	ExportMarkdown = "markdown"
	ExportJSON     = "json"
)

// Export writes conversation id as Markdown (the branch on screen, for
// reading and sharing) or JSON (the whole tree with every branch, which
// Import reads back).
func (ch *Chat) Export(id int64, format string) (ExportFile, error) {
	if format != ExportMarkdown && format != ExportJSON {
		return ExportFile{}, fmt.Errorf("chat: export format %q: want %q or %q", format, ExportMarkdown, ExportJSON)
	}
	d, err := ch.c.db()
	if err != nil {
		return ExportFile{}, err
	}
	ctx := ch.c.context()
	c, err := d.GetConversation(ctx, id)
	if err != nil {
		return ExportFile{}, err
	}
	var mdl *storage.Model
	if c.ModelID != 0 {
		if m, err := d.GetModel(ctx, c.ModelID); err == nil {
			mdl = &m
		}
	}
	base := fileSafe(c.Title)
	if format == ExportMarkdown {
		branch, err := d.ActiveBranch(ctx, id)
		if err != nil {
			return ExportFile{}, err
		}
		return ExportFile{FileName: base + ".md", MimeType: "text/markdown", Text: conversationMarkdown(c, mdl, branch, ch.c.now())}, nil
	}
	ms, err := d.Tree(ctx, id)
	if err != nil {
		return ExportFile{}, err
	}
	f := conversationFile{Format: conversationFormat, Version: conversationVersion, ExportedAt: ch.c.now().UTC().Truncate(time.Second),
		Conversation: conversationMeta{Title: c.Title, SystemPrompt: c.SystemPrompt, Pinned: c.Pinned,
			CreatedAt: utcPtr(c.CreatedAt), UpdatedAt: utcPtr(c.UpdatedAt), Options: c.Options},
		Messages: []conversationMsg{}}
	if mdl != nil {
		f.Conversation.Model = &modelRef{Name: mdl.Name, Fingerprint: mdl.Fingerprint}
	}
	// The file's ids are 1, 2, 3, ... in tree order (parents first).
	ref := map[int64]int64{}
	for i, m := range ms {
		ref[m.ID] = int64(i + 1)
		cm := conversationMsg{ID: int64(i + 1), Role: m.Role, Content: m.Content, CreatedAt: utcPtr(m.CreatedAt), Stats: m.Stats}
		if m.ParentID != 0 {
			p := ref[m.ParentID]
			cm.Parent = &p
		}
		f.Messages = append(f.Messages, cm)
	}
	if c.ActiveLeafID != 0 {
		leaf := ref[c.ActiveLeafID]
		f.ActiveLeaf = &leaf
	}
	text, err := marshalFile(f)
	if err != nil {
		return ExportFile{}, err
	}
	return ExportFile{FileName: base + ".json", MimeType: "application/json", Text: text}, nil
}

func utcPtr(t time.Time) *time.Time {
	u := t.UTC()
	return &u
}

// fileSafe makes a title into a file name stem.
func fileSafe(title string) string {
	var b strings.Builder
	for _, r := range title {
		switch {
		case r == '/' || r == '\\' || r == ':' || r == '*' || r == '?' || r == '"' || r == '<' || r == '>' || r == '|' || r < ' ':
			b.WriteRune('-')
		default:
			b.WriteRune(r)
		}
	}
	s := strings.Trim(strings.TrimSpace(b.String()), ".")
	if s == "" {
		return "conversation"
	}
	return clip(s, 80)
}

// conversationMarkdown is the branch on screen as a Markdown document.
func conversationMarkdown(c storage.Conversation, mdl *storage.Model, branch []storage.Message, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", strings.TrimSpace(c.Title))
	fmt.Fprintf(&b, "_Exported from anechat on %s", now.UTC().Format("2006-01-02 15:04 MST"))
	if mdl != nil {
		fmt.Fprintf(&b, "; model %s", mdl.Name)
	}
	b.WriteString("._\n\n")
	if strings.TrimSpace(c.SystemPrompt) != "" {
		b.WriteString("## System\n\n")
		b.WriteString(strings.TrimSpace(c.SystemPrompt))
		b.WriteString("\n\n")
	}
	for _, m := range branch {
		switch m.Role {
		case storage.RoleUser:
			b.WriteString("## You\n\n")
		case storage.RoleAssistant:
			b.WriteString("## Assistant")
			var st GenerateStats
			if len(m.Stats) > 0 && json.Unmarshal(m.Stats, &st) == nil && st.Model != "" {
				fmt.Fprintf(&b, " (%s)", st.Model)
			}
			b.WriteString("\n\n")
		default:
			b.WriteString("## System\n\n")
		}
		b.WriteString(strings.TrimRight(m.Content, "\n "))
		b.WriteString("\n\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

// ImportedConversation is what Chat.Import stored, and what of the file it
// left out, a sentence each naming the field, for the window to show. Only
// drafted highlighting that does not fit its message is ever left out: the
// messages themselves are imported whole or not at all.
type ImportedConversation struct {
	Conversation storage.Conversation `json:"conversation"`
	Warnings     []string             `json:"warnings"`
}

// maxImportWarnings bounds the warnings Import returns (one per message at
// most); the last one says how many more there were.
const maxImportWarnings = 10

// Import adds a conversation from a file Export wrote as JSON, with its
// whole message tree. The file is checked first, and an error names the
// field (messages[3].parent) and what is wrong; nothing is stored then.
// A message's drafted spans that do not fit its text (see checkSpans) are
// the exception: they only shade text, so the message is imported without
// them and a warning says which and why.
// The conversation uses the registered model with the file's model
// fingerprint if there is one, else the default.
func (ch *Chat) Import(text string) (ImportedConversation, error) {
	in, warnings, err := ch.decodeConversation(text)
	if err != nil {
		return ImportedConversation{}, err
	}
	d, err := ch.c.db()
	if err != nil {
		return ImportedConversation{}, err
	}
	c, err := d.ImportConversation(ch.c.context(), in)
	if err != nil {
		return ImportedConversation{}, err
	}
	if len(warnings) > 0 {
		ch.c.log.Warn("conversation imported without some drafted highlighting", "conversation", c.ID, "messages", len(warnings), "first", warnings[0])
	}
	if n := len(warnings); n > maxImportWarnings {
		warnings = append(warnings[:maxImportWarnings-1], fmt.Sprintf("and %d more messages' drafted highlighting was left out", n-maxImportWarnings+1))
	}
	return ImportedConversation{Conversation: c, Warnings: append([]string{}, warnings...)}, nil
}

// decodeConversation parses and checks a conversation file. The warnings
// say what was left out (see Import).
func (ch *Chat) decodeConversation(text string) (storage.ConversationImport, []string, error) {
	var warnings []string
	fail := func(format string, a ...any) (storage.ConversationImport, []string, error) {
		return storage.ConversationImport{}, nil, fmt.Errorf("chat: import: "+format, a...)
	}
	if len(text) > maxImportBytes {
		return fail("the file is %d bytes; at most %d are read", len(text), maxImportBytes)
	}
	// Messages are decoded one by one, so that an error names the message.
	var raw struct {
		conversationFile
		Messages []json.RawMessage `json:"messages"`
	}
	if err := decodeStrict(text, &raw); err != nil {
		return fail("%v", err)
	}
	f := raw.conversationFile
	if raw.Messages != nil {
		f.Messages = make([]conversationMsg, len(raw.Messages))
	}
	for i, r := range raw.Messages {
		if err := decodeStrict(string(r), &f.Messages[i]); err != nil {
			return fail("messages[%d]: %v", i, err)
		}
	}
	switch {
	case f.Format != conversationFormat:
		return fail("format %q: this is not an anechat conversation file (want format %q)", f.Format, conversationFormat)
	case f.Version < 1:
		return fail("version %d: want %d", f.Version, conversationVersion)
	case f.Version > conversationVersion:
		return fail("version %d is newer than this anechat reads (%d): update anechat", f.Version, conversationVersion)
	case strings.TrimSpace(f.Conversation.Title) == "":
		return fail("conversation.title: a conversation needs a title")
	case f.Messages == nil:
		return fail(`no "messages" list (an empty conversation has "messages": [])`)
	}
	now := ch.c.now()
	at := func(t *time.Time) time.Time {
		if t == nil || t.IsZero() {
			return now
		}
		return *t
	}
	in := storage.ConversationImport{
		Conversation: storage.ConversationInput{Title: strings.TrimSpace(f.Conversation.Title), TitleSource: storage.TitleImport,
			SystemPrompt: f.Conversation.SystemPrompt, Pinned: f.Conversation.Pinned},
		CreatedAt: at(f.Conversation.CreatedAt), UpdatedAt: at(f.Conversation.UpdatedAt), ActiveLeaf: -1,
	}
	if len(f.Conversation.Options) > 0 && !bytes.Equal(bytes.TrimSpace(f.Conversation.Options), []byte("null")) {
		var o ConversationOptions
		if err := decodeStrict(string(f.Conversation.Options), &o); err != nil {
			return fail("conversation.options: %v", err)
		}
		if err := o.Validate(); err != nil {
			return fail("conversation.options: %v", err)
		}
		in.Conversation.Options = compact(f.Conversation.Options)
	}
	if m := f.Conversation.Model; m != nil && m.Fingerprint != "" {
		if d, err := ch.c.db(); err == nil {
			if ms, err := d.ModelsByFingerprint(ch.c.context(), m.Fingerprint); err == nil && len(ms) > 0 {
				in.Conversation.ModelID = ms[0].ID
			}
		}
	}
	index := map[int64]int{} // file id -> position
	for i, m := range f.Messages {
		where := fmt.Sprintf("messages[%d]", i)
		if _, dup := index[m.ID]; dup {
			return fail("%s.id: %d is used twice", where, m.ID)
		}
		if m.ID <= 0 {
			return fail("%s.id: %d: want a positive whole number", where, m.ID)
		}
		parent := -1
		if m.Parent != nil {
			p, ok := index[*m.Parent]
			if !ok {
				return fail("%s.parent: %d is not the id of an earlier message (a parent comes before its replies)", where, *m.Parent)
			}
			parent = p
		}
		if m.Role != storage.RoleUser && m.Role != storage.RoleAssistant && m.Role != storage.RoleSystem {
			return fail("%s.role: %q: want user, assistant or system", where, m.Role)
		}
		var stats json.RawMessage
		if len(m.Stats) > 0 && !bytes.Equal(bytes.TrimSpace(m.Stats), []byte("null")) {
			st, dropped, err := importStats(m.Stats, m.Content)
			if err != nil {
				return fail("%s.stats: %v", where, err)
			}
			if dropped != nil {
				warnings = append(warnings, fmt.Sprintf("%s.stats.draftedSpans%v: the message was imported without its drafted highlighting", where, dropped))
			}
			stats = st
		}
		index[m.ID] = i
		in.Messages = append(in.Messages, storage.ImportedMessage{Parent: parent, Role: m.Role, Content: m.Content,
			Stats: stats, CreatedAt: at(m.CreatedAt)})
	}
	switch {
	case f.ActiveLeaf != nil:
		p, ok := index[*f.ActiveLeaf]
		if !ok {
			return fail("activeLeaf: %d is not the id of a message", *f.ActiveLeaf)
		}
		in.ActiveLeaf = p
	case len(f.Messages) > 0:
		return fail("activeLeaf: missing: name the message whose branch is shown")
	}
	return in, warnings, nil
}

// importStats checks a message's stats from a conversation file, the JSON
// of GenerateStats, and returns them compacted. Drafted spans that do not
// fit the message's text (see checkSpans) are taken out, and dropped says
// why; the other figures stay as they are (they are only shown).
func importStats(raw json.RawMessage, content string) (stats json.RawMessage, dropped error, err error) {
	var st GenerateStats
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, nil, errors.New("want an object of generation figures")
	}
	if spans, ok := fields["draftedSpans"]; ok {
		if dropped = checkSpans(spans, utf16Len(content)); dropped != nil {
			delete(fields, "draftedSpans")
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false) // the file's text as it was
			if err := enc.Encode(fields); err != nil {
				return nil, nil, err
			}
			raw = b.Bytes()
		}
	}
	// The figures' types: a count must be a number.
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, nil, err
	}
	return compact(raw), dropped, nil
}

// checkSpans checks drafted spans from a file against a text n UTF-16 units
// long, the unit the window indexes strings in and Chat records them in: a
// list of [start, end] pairs of whole numbers with 0 <= start < end <= n,
// each starting at or after the end of the one before. That bounds their
// number by n too, so that the window's highlighting is linear in the
// text. The error starts with the index of the span at fault ("[3]: ...").
func checkSpans(raw json.RawMessage, n int) error {
	var spans []json.RawMessage
	if err := json.Unmarshal(raw, &spans); err != nil {
		return errors.New(": want a list of [start, end] pairs")
	}
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	end := 0
	for i, r := range spans {
		var sp []float64
		if err := json.Unmarshal(r, &sp); err != nil || len(sp) != 2 {
			return fmt.Errorf("[%d]: %s: want [start, end], two whole numbers", i, clip(string(r), 40))
		}
		s, e := sp[0], sp[1]
		at := fmt.Sprintf("[%d]: [%s, %s]", i, num(s), num(e))
		switch {
		case s != math.Trunc(s) || e != math.Trunc(e):
			return fmt.Errorf("%s: want whole numbers", at)
		case s < 0:
			return fmt.Errorf("%s: starts before the text", at)
		case e <= s:
			return fmt.Errorf("%s: ends before it starts (or where it starts)", at)
		case e > float64(n):
			return fmt.Errorf("%s: ends past the text's %d UTF-16 units", at, n)
		case s < float64(end):
			return fmt.Errorf("%s: starts before the span before it ends (%d): spans are in order and do not overlap", at, end)
		}
		end = int(e)
	}
	return nil
}

// compact is raw (valid JSON) without the file's indentation, as the app
// stores JSON.
func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
