package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf16"

	"anechat/storage"
)

// Events the chat service emits while it generates a reply. Every stream ends
// with exactly one EventDone or EventError.
const (
	// EventToken carries a TokenEvent: a piece of reply text.
	EventToken = "chat:token"
	// EventDone carries a DoneEvent: the reply as stored (also when cancelled).
	EventDone = "chat:done"
	// EventError carries an ErrorEvent: generation failed, nothing was stored.
	EventError = "chat:error"
	// EventProgress carries a ProgressEvent: how far the prompt's prefill is,
	// before the first token (a long prompt takes a while).
	EventProgress = "chat:progress"
)

// ProgressEvent says how many of the prompt's tokens the model has read.
type ProgressEvent struct {
	ConversationID int64 `json:"conversationId"`
	ParentID       int64 `json:"parentId"`
	Done           int   `json:"done"`
	Total          int   `json:"total"`
}

// TokenEvent is a piece of streamed reply text. ParentID is the user message
// being answered, which identifies the stream within its conversation. Seq
// numbers the pieces of one stream from 0: an event transport may reorder
// them (Wails' dev server sends each event from its own goroutine), so the
// window orders by Seq.
type TokenEvent struct {
	ConversationID int64 `json:"conversationId"`
	ParentID       int64 `json:"parentId"`
	Seq            int   `json:"seq"`
	// Piece is the text, whether it came from an accepted speculative
	// draft, and the reply's counts when it came out (tokens so far, those
	// from accepted drafts, model calls made), so the window shows τ and
	// the drafted share exactly while the reply streams. Events may arrive
	// out of order: the counts of the highest Seq are the latest.
	Piece
}

// DoneEvent ends a stream: Message is the stored reply (nil when it was
// cancelled before any text), Stats how it went.
type DoneEvent struct {
	ConversationID int64            `json:"conversationId"`
	ParentID       int64            `json:"parentId"`
	Message        *storage.Message `json:"message"`
	Stats          GenerateStats    `json:"stats"`
}

// ErrorEvent ends a stream that failed.
type ErrorEvent struct {
	ConversationID int64  `json:"conversationId"`
	ParentID       int64  `json:"parentId"`
	Error          string `json:"error"`
}

// ErrBusy: the conversation is already generating a reply.
var ErrBusy = errors.New("chat: this conversation is already generating a reply; stop it first")

// Chat is the conversation service: conversations, their message trees, and
// sending messages whose replies stream back as events.
type Chat struct {
	c        *core
	settings *Settings
	models   *Models
	library  *Library
	gen      Generator

	// starting serialises StartFromPrompt, so that two clicks at once find
	// each other's conversation instead of making two.
	starting sync.Mutex

	mu      sync.Mutex
	streams map[int64]*stream   // by conversation id
	titles  map[int64]*titleJob // model-written titles in progress, by conversation id
	wg      sync.WaitGroup
}

// stream is one reply being generated.
type stream struct {
	parentID int64
	cancel   context.CancelFunc
	done     chan struct{} // closed once the reply is stored (or failed)
}

// NewConversation is what CreateConversation needs; every field is optional.
type NewConversation struct {
	Title    string `json:"title"`
	ModelID  int64  `json:"modelId"`  // 0: the default model (remembered from the first reply on)
	PromptID int64  `json:"promptId"` // start from a library prompt (its system prompt and title)
}

// Thread is one conversation as the window draws it: every message of the
// tree, and the ids of the active branch from root to leaf.
type Thread struct {
	Conversation storage.Conversation `json:"conversation"`
	Messages     []storage.Message    `json:"messages"`
	Path         []int64              `json:"path"`
	// Generating is the user message being answered right now, 0 if none.
	Generating int64 `json:"generating"`
	// Model is the model that answers the next message (the conversation's
	// own, else the default): the chat header shows it with a picker
	// (Chat.SetModel). nil when there is none to run.
	Model *storage.Model `json:"model"`
	// Settings are what the next reply runs with: the conversation's own
	// options (Chat.SetOptions) over the Settings page's.
	Settings GenerationSettings `json:"settings"`
}

// Turn is what Send, Edit and Regenerate started: the user message being
// answered (stored); the reply arrives through events.
type Turn struct {
	ConversationID int64           `json:"conversationId"`
	User           storage.Message `json:"user"`
}

// ListConversations lists every conversation, most recently updated first.
func (ch *Chat) ListConversations() ([]storage.Conversation, error) {
	d, err := ch.c.db()
	if err != nil {
		return nil, err
	}
	return d.ListConversations(ch.c.context(), 0, 0)
}

// CreateConversation starts an empty conversation.
func (ch *Chat) CreateConversation(in NewConversation) (storage.Conversation, error) {
	d, err := ch.c.db()
	if err != nil {
		return storage.Conversation{}, err
	}
	ctx := ch.c.context()
	sc := storage.ConversationInput{Title: strings.TrimSpace(in.Title), ModelID: in.ModelID, PromptID: in.PromptID}
	if sc.Title != "" {
		sc.TitleSource = storage.TitleUser
	}
	if in.ModelID != 0 {
		if _, err := d.GetModel(ctx, in.ModelID); err != nil {
			return storage.Conversation{}, fmt.Errorf("chat: model %d: %w", in.ModelID, err)
		}
	} else if p, err := ch.settings.Get(); err == nil {
		// The conversation remembers the model it started with.
		sc.ModelID = p.DefaultModelID
	}
	if in.PromptID != 0 {
		p, err := d.GetPrompt(ctx, in.PromptID)
		if err != nil {
			return storage.Conversation{}, fmt.Errorf("chat: prompt %d: %w", in.PromptID, err)
		}
		sc.SystemPrompt = p.SystemPrompt
		if sc.Title == "" {
			sc.Title, sc.TitleSource = p.Title, storage.TitlePrompt
		}
	} else if p, err := ch.settings.Get(); err == nil {
		sc.SystemPrompt = p.DefaultSystemPrompt
	}
	if sc.Title == "" {
		sc.Title = NewChatTitle
	}
	return d.CreateConversation(ctx, sc)
}

// NewChatTitle is the title of a conversation before its first message.
const NewChatTitle = "New chat"

// RenameConversation changes a conversation's title.
func (ch *Chat) RenameConversation(id int64, title string) (storage.Conversation, error) {
	title = strings.TrimSpace(title)
	if title == "" {
		return storage.Conversation{}, errors.New("chat: a conversation needs a title")
	}
	c, err := ch.updateConversation(id, func(in *storage.ConversationInput) { in.Title, in.TitleSource = title, storage.TitleUser })
	if err == nil {
		ch.CancelTitle(id) // the user's title stands
		ch.c.send(EventTitle, TitleEvent{ConversationID: id, Title: c.Title, Source: c.TitleSource})
	}
	return c, err
}

// SetSystemPrompt changes the system prompt later replies are generated with.
func (ch *Chat) SetSystemPrompt(id int64, system string) (storage.Conversation, error) {
	return ch.updateConversation(id, func(in *storage.ConversationInput) { in.SystemPrompt = system })
}

// SetModel makes the conversation use model modelID (0: the default model).
func (ch *Chat) SetModel(id, modelID int64) (storage.Conversation, error) {
	if modelID != 0 {
		d, err := ch.c.db()
		if err != nil {
			return storage.Conversation{}, err
		}
		if _, err := d.GetModel(ch.c.context(), modelID); err != nil {
			return storage.Conversation{}, fmt.Errorf("chat: model %d: %w", modelID, err)
		}
	}
	return ch.updateConversation(id, func(in *storage.ConversationInput) { in.ModelID = modelID })
}

func (ch *Chat) updateConversation(id int64, change func(*storage.ConversationInput)) (storage.Conversation, error) {
	d, err := ch.c.db()
	if err != nil {
		return storage.Conversation{}, err
	}
	ctx := ch.c.context()
	c, err := d.GetConversation(ctx, id)
	if err != nil {
		return storage.Conversation{}, err
	}
	in := storage.ConversationInput{Title: c.Title, TitleSource: c.TitleSource, ModelID: c.ModelID, PromptID: c.PromptID,
		SystemPrompt: c.SystemPrompt, Options: c.Options, Pinned: c.Pinned}
	change(&in)
	return d.UpdateConversation(ctx, id, in)
}

// UndoWindow is how long a deleted conversation can be brought back
// (Chat.UndoDelete); after it, it is removed for good.
const UndoWindow = 2 * time.Minute

// DeletedConversation is what DeleteConversation hid, and until when
// UndoDelete brings it back.
type DeletedConversation struct {
	ConversationID int64     `json:"conversationId"`
	Title          string    `json:"title"`
	UndoUntil      time.Time `json:"undoUntil"`
}

// DeleteConversation stops its generation, if any, and deletes it: it
// disappears from the list and the search at once, and UndoDelete brings it
// back, messages and all, within UndoWindow; after that it is removed for
// good with all its messages.
func (ch *Chat) DeleteConversation(id int64) (DeletedConversation, error) {
	d, err := ch.c.db()
	if err != nil {
		return DeletedConversation{}, err
	}
	ctx := ch.c.context()
	c, err := d.GetConversation(ctx, id)
	if err != nil {
		return DeletedConversation{}, err
	}
	ch.mu.Lock()
	s := ch.streams[id]
	ch.mu.Unlock()
	if s != nil { // stop it and let it finish writing before the rows go
		s.cancel()
		<-s.done
	}
	ch.CancelTitle(id)
	if err := d.SoftDeleteConversation(ctx, id, ch.c.now()); err != nil {
		return DeletedConversation{}, err
	}
	ch.purge()
	return DeletedConversation{ConversationID: id, Title: c.Title, UndoUntil: ch.c.now().Add(UndoWindow)}, nil
}

// UndoDelete brings back conversation id deleted less than UndoWindow ago.
func (ch *Chat) UndoDelete(id int64) (storage.Conversation, error) {
	d, err := ch.c.db()
	if err != nil {
		return storage.Conversation{}, err
	}
	c, err := d.RestoreConversation(ch.c.context(), id, ch.c.now().Add(-UndoWindow))
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Conversation{}, fmt.Errorf("chat: conversation %d cannot be brought back: it was not deleted in the last %v (%w)", id, UndoWindow, err)
	}
	return c, err
}

// purge removes for good the conversations deleted more than UndoWindow
// ago. A failure only delays that: it is logged.
func (ch *Chat) purge() {
	d, err := ch.c.db()
	if err != nil {
		return
	}
	if n, err := d.PurgeDeleted(ch.c.context(), ch.c.now().Add(-UndoWindow)); err != nil {
		ch.c.log.Warn("deleted conversations not purged", "purged", n, "err", err)
	} else if n > 0 {
		ch.c.log.Info("deleted conversations purged", "count", n)
	}
}

// SetPinned pins a conversation (listed first) or unpins it.
func (ch *Chat) SetPinned(id int64, pinned bool) (storage.Conversation, error) {
	d, err := ch.c.db()
	if err != nil {
		return storage.Conversation{}, err
	}
	return d.SetPinned(ch.c.context(), id, pinned)
}

// Thread returns the conversation with its whole message tree and the
// active branch.
func (ch *Chat) Thread(id int64) (Thread, error) {
	d, err := ch.c.db()
	if err != nil {
		return Thread{}, err
	}
	ctx := ch.c.context()
	c, err := d.GetConversation(ctx, id)
	if err != nil {
		return Thread{}, err
	}
	ms, err := d.Tree(ctx, id)
	if err != nil {
		return Thread{}, err
	}
	branch, err := d.ActiveBranch(ctx, id)
	if err != nil {
		return Thread{}, err
	}
	t := Thread{Conversation: c, Messages: ms, Path: make([]int64, len(branch))}
	for i, m := range branch {
		t.Path[i] = m.ID
	}
	if mdl, err := ch.models.resolve(c.ModelID); err == nil {
		t.Model = &mdl
	}
	prefs, err := ch.settings.Get()
	if err != nil {
		return Thread{}, err
	}
	t.Settings = ch.settingsFor(c, prefs)
	ch.mu.Lock()
	if s := ch.streams[id]; s != nil {
		t.Generating = s.parentID
	}
	ch.mu.Unlock()
	return t, nil
}

// SelectBranch shows the branch through message id: from it, the newest
// reply at each level down to a leaf becomes the active branch.
func (ch *Chat) SelectBranch(id int64) (Thread, error) {
	d, err := ch.c.db()
	if err != nil {
		return Thread{}, err
	}
	ctx := ch.c.context()
	m, err := d.GetMessage(ctx, id)
	if err != nil {
		return Thread{}, err
	}
	if ch.busy(m.ConversationID) {
		return Thread{}, ErrBusy
	}
	leaf := m.ID
	for {
		kids, err := d.Children(ctx, leaf)
		if err != nil {
			return Thread{}, err
		}
		if len(kids) == 0 {
			break
		}
		leaf = kids[len(kids)-1].ID
	}
	if err := d.SetActiveLeaf(ctx, m.ConversationID, leaf); err != nil {
		return Thread{}, err
	}
	return ch.Thread(m.ConversationID)
}

// SetDraft stores the conversation's unsent text, what its composer holds,
// so that it is still there after switching conversations or restarting;
// "" clears it (Send clears it too). At most storage.MaxDraftBytes.
func (ch *Chat) SetDraft(conversationID int64, text string) error {
	d, err := ch.c.db()
	if err != nil {
		return err
	}
	return d.SetDraft(ch.c.context(), conversationID, text)
}

// Send appends the user's message to the active branch and starts the
// reply. The conversation's draft is cleared: it was this message.
func (ch *Chat) Send(conversationID int64, text string) (Turn, error) {
	if strings.TrimSpace(text) == "" {
		return Turn{}, errors.New("chat: the message is empty")
	}
	d, err := ch.c.db()
	if err != nil {
		return Turn{}, err
	}
	c, err := d.GetConversation(ch.c.context(), conversationID)
	if err != nil {
		return Turn{}, err
	}
	return ch.start(c, func(ctx context.Context) (storage.Message, error) {
		m, err := d.AppendMessage(ctx, storage.MessageInput{ConversationID: c.ID, ParentID: c.ActiveLeafID, Role: storage.RoleUser, Content: text})
		if err == nil {
			if err := d.SetDraft(ctx, c.ID, ""); err != nil {
				// The message is sent; a stale draft only costs a cleared composer.
				ch.c.log.Warn("draft not cleared", "conversation", c.ID, "err", err)
			}
		}
		return m, err
	})
}

// Edit makes a new version of user message id with text (a sibling, so the
// old version stays as another branch) and starts its reply.
func (ch *Chat) Edit(id int64, text string) (Turn, error) {
	if strings.TrimSpace(text) == "" {
		return Turn{}, errors.New("chat: the message is empty")
	}
	d, err := ch.c.db()
	if err != nil {
		return Turn{}, err
	}
	ctx := ch.c.context()
	m, err := d.GetMessage(ctx, id)
	if err != nil {
		return Turn{}, err
	}
	if m.Role != storage.RoleUser {
		return Turn{}, fmt.Errorf("chat: message %d is a %s message; only user messages can be edited (regenerate an answer instead)", id, m.Role)
	}
	c, err := d.GetConversation(ctx, m.ConversationID)
	if err != nil {
		return Turn{}, err
	}
	return ch.start(c, func(ctx context.Context) (storage.Message, error) {
		return d.AppendMessage(ctx, storage.MessageInput{ConversationID: c.ID, ParentID: m.ParentID, Role: storage.RoleUser, Content: text})
	})
}

// Regenerate answers again the user message that assistant message id
// answered; the new reply is a sibling of the old one (another branch).
func (ch *Chat) Regenerate(id int64) (Turn, error) {
	d, err := ch.c.db()
	if err != nil {
		return Turn{}, err
	}
	ctx := ch.c.context()
	m, err := d.GetMessage(ctx, id)
	if err != nil {
		return Turn{}, err
	}
	if m.Role != storage.RoleAssistant || m.ParentID == 0 {
		return Turn{}, fmt.Errorf("chat: message %d is not an answer to a user message; only answers can be regenerated", id)
	}
	c, err := d.GetConversation(ctx, m.ConversationID)
	if err != nil {
		return Turn{}, err
	}
	return ch.start(c, func(ctx context.Context) (storage.Message, error) {
		u, err := d.GetMessage(ctx, m.ParentID)
		if err != nil {
			return storage.Message{}, err
		}
		// The branch on screen ends at the question until the new answer lands.
		return u, d.SetActiveLeaf(ctx, c.ID, u.ID)
	})
}

// Cancel stops the reply being generated in the conversation; what was
// generated so far is kept. It reports whether anything was running.
func (ch *Chat) Cancel(conversationID int64) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if s := ch.streams[conversationID]; s != nil {
		s.cancel()
		return true
	}
	return false
}

// Search finds messages containing every word of query, best first: one
// hit per message path (a regenerated answer that came out the same is one
// hit, the one on the branch on screen when there is one), saying whether
// the message is on the branch on screen and which alternative it is.
// OpenMessage shows a hit in its branch.
func (ch *Chat) Search(query string) ([]storage.SearchHit, error) {
	d, err := ch.c.db()
	if err != nil {
		return nil, err
	}
	return d.SearchMessages(ch.c.context(), query, 50)
}

// OpenMessage returns the conversation of message id with id on the branch
// shown: the branch on screen when id is on it (nothing changes), else the
// branch through id (as SelectBranch).
func (ch *Chat) OpenMessage(id int64) (Thread, error) {
	d, err := ch.c.db()
	if err != nil {
		return Thread{}, err
	}
	m, err := d.GetMessage(ch.c.context(), id)
	if err != nil {
		return Thread{}, err
	}
	t, err := ch.Thread(m.ConversationID)
	if err != nil {
		return Thread{}, err
	}
	if slices.Contains(t.Path, id) {
		return t, nil
	}
	return ch.SelectBranch(id)
}

func (ch *Chat) busy(conversationID int64) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.streams[conversationID] != nil
}

// start checks that a reply can be generated (an engine, a model, no reply
// already running), only then stores the question through question, and
// generates the answer in the background.
func (ch *Chat) start(c storage.Conversation, question func(context.Context) (storage.Message, error)) (Turn, error) {
	if ch.gen == nil {
		return Turn{}, ErrNoEngine
	}
	mdl, err := ch.models.resolve(c.ModelID)
	if err != nil {
		return Turn{}, err
	}
	if err := runnable(mdl); err != nil {
		return Turn{}, err
	}
	prefs, err := ch.settings.Get()
	if err != nil {
		return Turn{}, err
	}
	d, err := ch.c.db()
	if err != nil {
		return Turn{}, err
	}
	ch.mu.Lock()
	if ch.streams[c.ID] != nil {
		ch.mu.Unlock()
		return Turn{}, ErrBusy
	}
	ch.cancelTitlesLocked() // a reply never waits for a title
	ctx, cancel := context.WithCancel(ch.c.context())
	s := &stream{cancel: cancel, done: make(chan struct{})}
	ch.streams[c.ID] = s // reserved before writing, so a second Send is refused
	ch.mu.Unlock()

	finish := func() {
		cancel()
		ch.mu.Lock()
		delete(ch.streams, c.ID)
		ch.mu.Unlock()
		close(s.done)
	}
	u, err := question(ctx)
	if err != nil {
		finish()
		return Turn{}, err
	}
	branch, err := d.Branch(ctx, u.ID)
	if err != nil {
		finish()
		return Turn{}, err
	}
	c = ch.remember(ctx, d, c, mdl, branch)
	ch.mu.Lock()
	s.parentID = u.ID
	ch.mu.Unlock()

	gs := ch.settingsFor(c, prefs)
	req := GenerateRequest{Model: mdl, ConversationID: c.ID, Width: int(gs.SpeculationWidth),
		MaxTokens: gs.MaxTokens, Temperature: gs.Temperature, Seed: uint64(time.Now().UnixNano())}
	if strings.TrimSpace(c.SystemPrompt) != "" {
		req.Messages = append(req.Messages, ChatMessage{Role: storage.RoleSystem, Content: c.SystemPrompt})
	}
	for _, m := range branch {
		req.Messages = append(req.Messages, ChatMessage{Role: m.Role, Content: m.Content})
	}
	// The library's texts feed the speculative drafter; without them the
	// reply is only slower to decode, never different.
	if ps, err := d.ListPrompts(ctx, ""); err != nil {
		ch.c.log.Warn("prompt library not read for drafting", "err", err)
	} else {
		for _, p := range ps {
			for _, t := range []string{p.SystemPrompt, p.Body} {
				if strings.TrimSpace(t) != "" {
					req.Library = append(req.Library, t)
				}
			}
		}
	}
	ch.wg.Add(1)
	go func() {
		defer ch.wg.Done()
		warm := ""
		if c.PromptID != 0 && len(branch) == 1 {
			warm = ch.warmPrompt(ctx, d, c, branch[0], mdl)
			// Its prefill is the reply's: the window sees its progress.
			ch.preparePrompt(ctx, d, c, branch[0], mdl.ID, func(done, total int) {
				ch.c.send(EventProgress, ProgressEvent{ConversationID: c.ID, ParentID: u.ID, Done: done, Total: total})
			})
		}
		name, data := ch.generate(ctx, d, req, u, warm)
		// The stream is gone before the window hears it ended, so a Send
		// right after the event is never refused as busy.
		finish()
		ch.c.send(name, data)
		if done, ok := data.(DoneEvent); ok && done.Message != nil && len(branch) == 1 && c.TitleSource == storage.TitleMessage {
			ch.modelTitle(c, mdl, branch[0].Content, done.Message.Content)
		}
	}()
	return Turn{ConversationID: c.ID, User: u}, nil
}

// remember records what the first message decides: the conversation keeps
// the model that answers it (so a later change of the default does not
// switch it), and, while its title is the default, it is titled after the
// first user message (EventTitle tells the window). Failures only cost
// that: they are logged, the reply goes on.
func (ch *Chat) remember(ctx context.Context, d *storage.DB, c storage.Conversation, mdl storage.Model, branch []storage.Message) storage.Conversation {
	if c.ModelID == 0 {
		if nc, err := ch.updateConversation(c.ID, func(in *storage.ConversationInput) { in.ModelID = mdl.ID }); err != nil {
			ch.c.log.Warn("conversation model not recorded", "conversation", c.ID, "err", err)
		} else {
			c = nc
		}
	}
	if c.TitleSource != storage.TitleDefault || len(branch) != 1 {
		return c
	}
	t := TitleFromText(branch[0].Content)
	if t == "" {
		return c
	}
	ok, err := d.SetTitleIf(ctx, c.ID, t, storage.TitleMessage, storage.TitleDefault)
	if err != nil || !ok {
		if err != nil {
			ch.c.log.Warn("conversation title not set", "conversation", c.ID, "err", err)
		}
		return c
	}
	c.Title, c.TitleSource = t, storage.TitleMessage
	ch.c.send(EventTitle, TitleEvent{ConversationID: c.ID, Title: t, Source: storage.TitleMessage})
	return c
}

// warmPrompt is the title of the library prompt c was started from when a
// reply to first, c's first message, can resume from the prompt's prepared
// snapshot: it is ready for mdl (Library's view says so) and c opens
// exactly as the prompt does. "" otherwise, also when the prompt cannot be
// read (that only costs the note in the reply).
func (ch *Chat) warmPrompt(ctx context.Context, d *storage.DB, c storage.Conversation, first storage.Message, mdl storage.Model) string {
	if ch.library == nil {
		return ""
	}
	p, err := d.GetPrompt(ctx, c.PromptID)
	if err != nil || p.PinnedSnapshotID == 0 || first.Content != p.Body || c.SystemPrompt != p.SystemPrompt {
		return ""
	}
	if v := ch.library.viewWith(d, p, &mdl); v.Snapshot == nil || !v.Snapshot.Ready {
		return ""
	}
	return p.Title
}

// preparePrompt pins a snapshot of the library prompt c was started from when
// its first message is the prompt's body unchanged and the prompt has none
// yet: the first use prepares it (the reply then restores it from the file), every
// later chat from it resumes. Failure only costs that resume: it is logged.
func (ch *Chat) preparePrompt(ctx context.Context, d *storage.DB, c storage.Conversation, first storage.Message, modelID int64, progress func(done, total int)) {
	if _, ok := ch.gen.(Preparer); !ok || ch.library == nil {
		return
	}
	p, err := d.GetPrompt(ctx, c.PromptID)
	if err != nil || p.PinnedSnapshotID != 0 || first.Content != p.Body || c.SystemPrompt != p.SystemPrompt {
		return // deleted, already prepared, or this chat opens differently
	}
	if _, err := ch.library.prepare(ctx, d, p, modelID, progress); err != nil {
		lvl := slog.LevelWarn
		if errors.Is(err, ErrPromptTooShort) || ctx.Err() != nil {
			lvl = slog.LevelDebug
		}
		ch.c.log.Log(ctx, lvl, "prompt not prepared on first use", "prompt", p.ID, "err", err)
	}
}

// generate runs the model, streams its text and stores the reply. It returns
// the stream's final event (EventDone or EventError) for the caller to send.
// warm is the title of the prepared library prompt the reply can resume
// from ("" for none): when it did resume, its stats name the prompt.
func (ch *Chat) generate(ctx context.Context, d *storage.DB, req GenerateRequest, u storage.Message, warm string) (string, any) {
	var text strings.Builder
	seq, at := 0, 0 // at: the text's length in UTF-16 units
	var spans [][2]int
	req.Progress = func(done, total int) {
		ch.c.send(EventProgress, ProgressEvent{ConversationID: u.ConversationID, ParentID: u.ID, Done: done, Total: total})
	}
	stats, err := ch.gen.Generate(ctx, req, func(p Piece) error {
		text.WriteString(p.Text)
		n := utf16Len(p.Text)
		spans = addPiece(spans, at, n, p.Drafted)
		at += n
		ch.c.send(EventToken, TokenEvent{ConversationID: u.ConversationID, ParentID: u.ID, Seq: seq, Piece: p})
		seq++
		return nil
	})
	stats.Width = req.Width
	stats.DraftedSpans = spans
	stats.Model = req.Model.Name
	if warm != "" && stats.ResumedTokens > 0 {
		stats.ResumedPrompt = warm
	}
	cancelled := errors.Is(err, context.Canceled) && ctx.Err() != nil
	if err != nil && !cancelled {
		ch.c.log.Error("generate", "conversation", u.ConversationID, "err", err)
		return EventError, ErrorEvent{ConversationID: u.ConversationID, ParentID: u.ID, Error: err.Error()}
	}
	if cancelled {
		stats.Stopped = "cancelled"
	}
	done := DoneEvent{ConversationID: u.ConversationID, ParentID: u.ID, Stats: stats}
	if text.Len() > 0 {
		raw, _ := json.Marshal(stats) // plain struct of numbers and a string: cannot fail
		// Store even when the window is closing: the text was already shown.
		m, err := d.AppendMessage(context.WithoutCancel(ctx), storage.MessageInput{ConversationID: u.ConversationID,
			ParentID: u.ID, Role: storage.RoleAssistant, Content: text.String(), Stats: raw})
		if err != nil {
			ch.c.log.Error("store reply", "conversation", u.ConversationID, "err", err)
			return EventError, ErrorEvent{ConversationID: u.ConversationID, ParentID: u.ID, Error: err.Error()}
		}
		done.Message = &m
	}
	return EventDone, done
}

// utf16Len is the length of s in UTF-16 code units (JavaScript's length).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// wait blocks until every running generation has ended.
func (ch *Chat) wait() { ch.wg.Wait() }
