package app

import (
	"context"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"anechat/storage"
)

// EventTitle carries a TitleEvent: a conversation's title changed, or the
// model started or stopped writing one.
const EventTitle = "chat:title"

// TitleEvent says what a conversation is called now. Pending is true while
// the model is writing a title (Chat.CancelTitle stops it); the event that
// ends it has Pending false and the title as it then stands.
type TitleEvent struct {
	ConversationID int64  `json:"conversationId"`
	Title          string `json:"title"`
	// Source is who wrote it: storage.Title* ("message", "model", ...).
	Source  string `json:"source"`
	Pending bool   `json:"pending"`
}

// MaxTitleRunes is the longest automatic title, in characters.
const MaxTitleRunes = 60

// TitleFromText makes a title from the start of a message: its first
// non-empty line without Markdown heading, quote or list markers, spaces
// collapsed, cut at the last word boundary within MaxTitleRunes characters
// (with "…" when cut). "" when the text has no words.
func TitleFromText(text string) string {
	var line string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimLeft(strings.TrimSpace(l), "#>*-+` \t")
		if strings.TrimSpace(l) != "" {
			line = l
			break
		}
	}
	return clip(strings.Join(strings.Fields(line), " "), MaxTitleRunes)
}

// clip cuts s to at most n runes at a word boundary, adding "…" when it cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)[:n-1] // room for the ellipsis
	cut := len(r)
	for i := len(r) - 1; i > 0; i-- {
		if unicode.IsSpace(r[i]) {
			cut = i
			break
		}
	}
	// A single word longer than a third of the title is cut inside it.
	if cut < n/3 {
		cut = len(r)
	}
	return strings.TrimRightFunc(string(r[:cut]), func(c rune) bool { return unicode.IsSpace(c) || unicode.IsPunct(c) }) + "…"
}

// cleanModelTitle turns what the model wrote into a title: the first
// non-empty line, without a "Title:" label, quotes, Markdown emphasis or a
// final full stop, clipped like TitleFromText. "" when nothing is left.
func cleanModelTitle(s string) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if k := strings.Index(l, ":"); k >= 0 && k <= 6 && strings.EqualFold(strings.TrimSpace(l[:k]), "title") {
			l = l[k+1:]
		}
		const marks = " \t\"'`*_#“”‘’«»"
		l = strings.Trim(strings.TrimSuffix(strings.Trim(l, marks), "."), marks)
		l = strings.Join(strings.Fields(l), " ")
		return clip(l, MaxTitleRunes)
	}
	return ""
}

// titlePrompt is what the model is asked to write a title from.
func titlePrompt(question, answer string) []ChatMessage {
	const max = 1500 // bytes of each turn: a title needs the gist only
	cut := func(s string) string {
		if len(s) <= max {
			return s
		}
		for i := max; i > 0; i-- {
			if utf8.RuneStart(s[i]) {
				return s[:i] + "…"
			}
		}
		return ""
	}
	return []ChatMessage{
		{Role: storage.RoleSystem, Content: "You write short titles for conversations. Reply with the title only: at most six words, no quotes."},
		{Role: storage.RoleUser, Content: "Write a title for this conversation.\n\nUser: " + cut(question) + "\n\nAssistant: " + cut(answer)},
	}
}

// titleJob is a model-written title being generated for one conversation.
type titleJob struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// CancelTitle stops the model writing the conversation's title; the title
// stays as it is. It reports whether a title was being written.
func (ch *Chat) CancelTitle(conversationID int64) bool {
	ch.mu.Lock()
	j := ch.titles[conversationID]
	ch.mu.Unlock()
	if j == nil {
		return false
	}
	j.cancel()
	return true
}

// cancelTitlesLocked gives up every title being written: a reply is
// starting and must not wait for one. ch.mu is held.
func (ch *Chat) cancelTitlesLocked() {
	for _, j := range ch.titles {
		j.cancel()
	}
}

// modelTitle has the model write a title for conversation c from its first
// exchange, in the background, when the setting asks for it. It runs only
// while no reply is being generated and gives up as soon as one starts
// (Chat.start cancels it), so it never delays a reply; the title is stored
// only if it is still the one taken from the first message.
func (ch *Chat) modelTitle(c storage.Conversation, mdl storage.Model, question, answer string) {
	prefs, err := ch.settings.Get()
	if err != nil || !prefs.ModelTitles || ch.gen == nil {
		return
	}
	ch.mu.Lock()
	if len(ch.streams) > 0 || ch.titles[c.ID] != nil {
		ch.mu.Unlock()
		return // the model is busy: the first message's title stays
	}
	ctx, cancel := context.WithCancel(ch.c.context())
	j := &titleJob{cancel: cancel, done: make(chan struct{})}
	ch.titles[c.ID] = j
	ch.wg.Add(1)
	ch.mu.Unlock()
	ch.c.send(EventTitle, TitleEvent{ConversationID: c.ID, Title: c.Title, Source: c.TitleSource, Pending: true})
	go func() {
		defer ch.wg.Done()
		title, source := c.Title, c.TitleSource
		defer func() {
			cancel()
			ch.mu.Lock()
			delete(ch.titles, c.ID)
			ch.mu.Unlock()
			close(j.done)
			ch.c.send(EventTitle, TitleEvent{ConversationID: c.ID, Title: title, Source: source})
		}()
		var out strings.Builder
		req := GenerateRequest{Model: mdl, Messages: titlePrompt(question, answer), Width: 1, MaxTokens: 24}
		_, err := ch.gen.Generate(ctx, req, func(p Piece) error {
			out.WriteString(p.Text)
			if strings.Contains(strings.TrimSpace(out.String()), "\n") {
				return errTitleDone // one line is all a title needs
			}
			return nil
		})
		if err != nil && !errors.Is(err, errTitleDone) {
			if ctx.Err() == nil {
				ch.c.log.Warn("model title not written", "conversation", c.ID, "err", err)
			}
			return
		}
		t := cleanModelTitle(out.String())
		if t == "" {
			return
		}
		d, err := ch.c.db()
		if err != nil {
			return
		}
		ok, err := d.SetTitleIf(context.WithoutCancel(ctx), c.ID, t, storage.TitleModel, storage.TitleMessage)
		if err != nil {
			ch.c.log.Warn("model title not stored", "conversation", c.ID, "err", err)
			return
		}
		if ok {
			title, source = t, storage.TitleModel
		} else if cur, err := d.GetConversation(ctx, c.ID); err == nil {
			title, source = cur.Title, cur.TitleSource // renamed meanwhile
		}
	}()
}

// errTitleDone stops a title's generation once it has a line.
var errTitleDone = errors.New("title complete")
