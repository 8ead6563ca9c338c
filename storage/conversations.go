package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"anechat/storage/db"
)

// Conversation is one chat. Its messages form a tree (see Message); the
// active leaf marks the branch on screen.
type Conversation struct {
	ID    int64  `json:"id"`
	Title string `json:"title"`
	// TitleSource says who wrote the title: "" (the default), "message" (the
	// first user message), "model" (written by the model), "prompt" (the
	// library prompt's title), "import" or "user".
	TitleSource  string          `json:"titleSource"`
	ModelID      int64           `json:"modelId"`  // 0 if none
	PromptID     int64           `json:"promptId"` // the library prompt it started from, 0 if none
	SystemPrompt string          `json:"systemPrompt"`
	Options      json.RawMessage `json:"options,omitempty"` // generation options as JSON, nil if none
	ActiveLeafID int64           `json:"activeLeafId"`      // 0 while empty
	// Pinned conversations are listed first.
	Pinned bool `json:"pinned"`
	// Draft is the composer's unsent text (SetDraft), "" when none.
	Draft     string    `json:"draft"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Title sources (Conversation.TitleSource).
const (
	TitleDefault = ""
	TitleMessage = "message"
	TitleModel   = "model"
	TitlePrompt  = "prompt"
	TitleImport  = "import"
	TitleUser    = "user"
)

func validTitleSource(s string) bool {
	switch s {
	case TitleDefault, TitleMessage, TitleModel, TitlePrompt, TitleImport, TitleUser:
		return true
	}
	return false
}

// ConversationInput is what CreateConversation and UpdateConversation store
// (UpdateConversation ignores PromptID and Pinned).
type ConversationInput struct {
	Title        string
	TitleSource  string // one of the Title* constants
	ModelID      int64  // 0 for none
	PromptID     int64  // 0 for none
	SystemPrompt string
	Options      json.RawMessage // nil for none
	Pinned       bool
}

func conversationOut(c db.Conversation) Conversation {
	return Conversation{ID: c.ID, Title: c.Title, TitleSource: c.TitleSource, ModelID: idOut(c.ModelID), PromptID: idOut(c.PromptID),
		SystemPrompt: c.SystemPrompt, Options: jsonOut(c.Options), ActiveLeafID: idOut(c.ActiveLeafID), Pinned: c.Pinned != 0,
		Draft: c.Draft, CreatedAt: fromMillis(c.CreatedAt), UpdatedAt: fromMillis(c.UpdatedAt)}
}

// CreateConversation starts an empty conversation.
func (d *DB) CreateConversation(ctx context.Context, in ConversationInput) (Conversation, error) {
	now := d.now()
	return d.createConversation(ctx, d.q, in, now, now)
}

func (d *DB) createConversation(ctx context.Context, q *db.Queries, in ConversationInput, created, updated time.Time) (Conversation, error) {
	const op = "create conversation"
	if !validTitleSource(in.TitleSource) {
		return Conversation{}, invalid(op, "title source %q is not one of message, model, prompt, import, user or empty", in.TitleSource)
	}
	opts, err := jsonIn(op+" options", in.Options)
	if err != nil {
		return Conversation{}, err
	}
	c, err := q.CreateConversation(ctx, db.CreateConversationParams{Title: in.Title, TitleSource: in.TitleSource,
		ModelID: idIn(in.ModelID), PromptID: idIn(in.PromptID), SystemPrompt: in.SystemPrompt, Options: opts,
		Pinned: boolInt(in.Pinned), CreatedAt: millis(created), UpdatedAt: millis(updated)})
	if err != nil {
		return Conversation{}, d.fail(op, err)
	}
	return conversationOut(c), nil
}

// GetConversation returns the conversation with id, or ErrNotFound.
func (d *DB) GetConversation(ctx context.Context, id int64) (Conversation, error) {
	c, err := d.q.GetConversation(ctx, id)
	if err != nil {
		return Conversation{}, d.fail(fmt.Sprintf("get conversation %d", id), err)
	}
	return conversationOut(c), nil
}

// ListConversations lists the conversations (not deleted ones), pinned
// first, then most recently updated first; limit <= 0 means all.
func (d *DB) ListConversations(ctx context.Context, limit, offset int) ([]Conversation, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	cs, err := d.q.ListConversations(ctx, db.ListConversationsParams{Limit: int64(limit), Offset: int64(max(offset, 0))})
	if err != nil {
		return nil, d.fail("list conversations", err)
	}
	out := make([]Conversation, len(cs))
	for i, c := range cs {
		out[i] = conversationOut(c)
	}
	return out, nil
}

// UpdateConversation replaces title, title source, model, system prompt
// and options.
func (d *DB) UpdateConversation(ctx context.Context, id int64, in ConversationInput) (Conversation, error) {
	op := fmt.Sprintf("update conversation %d", id)
	if !validTitleSource(in.TitleSource) {
		return Conversation{}, invalid(op, "title source %q is not one of message, model, prompt, import, user or empty", in.TitleSource)
	}
	opts, err := jsonIn(op+" options", in.Options)
	if err != nil {
		return Conversation{}, err
	}
	n, err := d.q.UpdateConversation(ctx, db.UpdateConversationParams{Title: in.Title, TitleSource: in.TitleSource,
		ModelID: idIn(in.ModelID), SystemPrompt: in.SystemPrompt, Options: opts, UpdatedAt: millis(d.now()), ID: id})
	if err := oneRow(op, n, err); err != nil {
		return Conversation{}, d.fail(op, err)
	}
	return d.GetConversation(ctx, id)
}

// SetTitleIf sets the conversation's title and its source, but only while
// the title's source is still expect: an automatic title (from the first
// message, or by the model) never replaces one the user typed meanwhile.
// changed is false when the source was no longer expect.
func (d *DB) SetTitleIf(ctx context.Context, id int64, title, source, expect string) (changed bool, err error) {
	op := fmt.Sprintf("set title of conversation %d", id)
	if !validTitleSource(source) {
		return false, invalid(op, "title source %q is not one of message, model, prompt, import, user or empty", source)
	}
	n, err := d.q.SetConversationTitleIf(ctx, db.SetConversationTitleIfParams{Title: title, TitleSource: source,
		UpdatedAt: millis(d.now()), ID: id, ExpectSource: expect})
	if err != nil {
		return false, d.fail(op, err)
	}
	return n == 1, nil
}

// SetPinned pins or unpins the conversation (pinned ones are listed first).
func (d *DB) SetPinned(ctx context.Context, id int64, pinned bool) (Conversation, error) {
	op := fmt.Sprintf("pin conversation %d", id)
	n, err := d.q.SetConversationPinned(ctx, db.SetConversationPinnedParams{Pinned: boolInt(pinned), ID: id})
	if err := oneRow(op, n, err); err != nil {
		return Conversation{}, d.fail(op, err)
	}
	return d.GetConversation(ctx, id)
}

// MaxDraftBytes bounds a conversation's stored draft (SetDraft): far more
// than anyone types, small enough that saving it on every pause is cheap.
const MaxDraftBytes = 1 << 20

// SetDraft stores the conversation's unsent text ("" clears it). It does not
// change updated_at: typing does not move a conversation up the list.
func (d *DB) SetDraft(ctx context.Context, id int64, draft string) error {
	op := fmt.Sprintf("save the draft of conversation %d", id)
	if len(draft) > MaxDraftBytes {
		return invalid(op, "the draft is %d bytes, over the %d-byte limit: send or shorten it", len(draft), MaxDraftBytes)
	}
	n, err := d.q.SetConversationDraft(ctx, db.SetConversationDraftParams{Draft: draft, ID: id})
	return d.fail(op, oneRow(op, n, err))
}

// EmptyConversationFromPrompt returns the newest live conversation started
// from library prompt promptID that holds nothing the user wrote: no message,
// and no draft other than body (the prompt's opening, kept when it could not
// be sent); ErrNotFound if there is none.
func (d *DB) EmptyConversationFromPrompt(ctx context.Context, promptID int64, body string) (Conversation, error) {
	c, err := d.q.EmptyConversationFromPrompt(ctx, db.EmptyConversationFromPromptParams{PromptID: idIn(promptID), Body: body})
	if err != nil {
		return Conversation{}, d.fail(fmt.Sprintf("find an empty conversation from prompt %d", promptID), err)
	}
	return conversationOut(c), nil
}

// DeleteConversation deletes the conversation and all its messages at once
// (no undo: see SoftDeleteConversation). Its KV snapshots stay (unlinked)
// until evicted.
func (d *DB) DeleteConversation(ctx context.Context, id int64) error {
	op := fmt.Sprintf("delete conversation %d", id)
	return d.tx(ctx, op, func(q *db.Queries) error {
		// Flat first, so that the delete does not recurse (see DetachMessages).
		if err := q.DetachMessages(ctx, id); err != nil {
			return err
		}
		n, err := q.DeleteConversation(ctx, id)
		return oneRow(op, n, err)
	})
}

// SoftDeleteConversation hides the conversation from every list, search and
// lookup, as deleted at time at; RestoreConversation brings it back until
// PurgeDeleted removes it.
func (d *DB) SoftDeleteConversation(ctx context.Context, id int64, at time.Time) error {
	op := fmt.Sprintf("delete conversation %d", id)
	n, err := d.q.SoftDeleteConversation(ctx, db.SoftDeleteConversationParams{DeletedAt: idIn(millis(at)), ID: id})
	return d.fail(op, oneRow(op, n, err))
}

// RestoreConversation undoes SoftDeleteConversation when the deletion was
// made at or after notBefore; ErrNotFound if there is no such deletion (the
// conversation is live, was purged, or was deleted before notBefore).
func (d *DB) RestoreConversation(ctx context.Context, id int64, notBefore time.Time) (Conversation, error) {
	op := fmt.Sprintf("restore conversation %d", id)
	n, err := d.q.RestoreConversation(ctx, db.RestoreConversationParams{ID: id, Cutoff: idIn(millis(notBefore))})
	if err := oneRow(op, n, err); err != nil {
		return Conversation{}, d.fail(op, err)
	}
	return d.GetConversation(ctx, id)
}

// PurgeDeleted removes for good, with their messages, the conversations
// deleted before cutoff. It returns how many went. Each goes in a
// transaction of its own: a long one does not hold the database for the
// others' time, and one that fails is reported (with the others' errors)
// without keeping the rest from going.
func (d *DB) PurgeDeleted(ctx context.Context, cutoff time.Time) (int64, error) {
	var purged int64
	var errs []error
	for after := int64(0); ; {
		id, err := d.q.NextPurgeable(ctx, db.NextPurgeableParams{Cutoff: idIn(millis(cutoff)), After: after})
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			errs = append(errs, d.fail("purge deleted conversations", err))
			break
		}
		after = id
		var n int64
		err = d.tx(ctx, fmt.Sprintf("purge conversation %d", id), func(q *db.Queries) error {
			// Flat first, so that the delete does not recurse (see DetachMessages).
			if err := q.DetachMessages(ctx, id); err != nil {
				return err
			}
			// Still deleted before cutoff: a restore may have come in between.
			n, err = q.PurgeDeletedConversation(ctx, db.PurgeDeletedConversationParams{ID: id, Cutoff: idIn(millis(cutoff))})
			return err
		})
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		purged += n
	}
	return purged, errors.Join(errs...)
}

// SetActiveLeaf makes the branch ending at message leafID the one on screen.
func (d *DB) SetActiveLeaf(ctx context.Context, conversationID, leafID int64) error {
	op := fmt.Sprintf("set active message of conversation %d", conversationID)
	return d.tx(ctx, op, func(q *db.Queries) error {
		if leafID != 0 {
			m, err := q.GetMessage(ctx, leafID)
			if err != nil {
				return fmt.Errorf("message %d: %w", leafID, err)
			}
			if m.ConversationID != conversationID {
				return invalid(op, "message %d belongs to conversation %d", leafID, m.ConversationID)
			}
		}
		n, err := q.SetActiveLeaf(ctx, db.SetActiveLeafParams{ActiveLeafID: idIn(leafID), UpdatedAt: millis(d.now()), ID: conversationID})
		return oneRow(op, n, err)
	})
}

// Roles a message may have.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one node of a conversation's message tree. Editing a message or
// regenerating an answer appends a sibling (same parent), creating a branch.
type Message struct {
	ID             int64           `json:"id"`
	ConversationID int64           `json:"conversationId"`
	ParentID       int64           `json:"parentId"` // 0 for a root
	Role           string          `json:"role"`
	Content        string          `json:"content"`
	Stats          json.RawMessage `json:"stats,omitempty"` // generation stats as JSON, nil if none
	CreatedAt      time.Time       `json:"createdAt"`
}

// MessageInput is what AppendMessage stores.
type MessageInput struct {
	ConversationID int64
	ParentID       int64 // 0 for a root message
	Role           string
	Content        string
	Stats          json.RawMessage // nil for none
}

func messageOut(m db.Message) Message {
	return Message{ID: m.ID, ConversationID: m.ConversationID, ParentID: idOut(m.ParentID), Role: m.Role,
		Content: m.Content, Stats: jsonOut(m.Stats), CreatedAt: fromMillis(m.CreatedAt)}
}

func messagesOut(ms []db.Message) []Message {
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = messageOut(m)
	}
	return out
}

func validRole(r string) bool { return r == RoleSystem || r == RoleUser || r == RoleAssistant }

// AppendMessage adds a message under in.ParentID (0: a new root) and makes it
// the conversation's active leaf, in one transaction.
func (d *DB) AppendMessage(ctx context.Context, in MessageInput) (Message, error) {
	op := fmt.Sprintf("append message to conversation %d", in.ConversationID)
	if !validRole(in.Role) {
		return Message{}, invalid(op, "role %q is not system, user or assistant", in.Role)
	}
	stats, err := jsonIn(op+" stats", in.Stats)
	if err != nil {
		return Message{}, err
	}
	var out Message
	err = d.tx(ctx, op, func(q *db.Queries) error {
		if _, err := q.GetConversation(ctx, in.ConversationID); err != nil {
			return fmt.Errorf("conversation %d: %w", in.ConversationID, err)
		}
		if in.ParentID != 0 {
			p, err := q.GetMessage(ctx, in.ParentID)
			if err != nil {
				return fmt.Errorf("parent message %d: %w", in.ParentID, err)
			}
			if p.ConversationID != in.ConversationID {
				return invalid(op, "parent message %d belongs to conversation %d", in.ParentID, p.ConversationID)
			}
		}
		now := millis(d.now())
		m, err := q.InsertMessage(ctx, db.InsertMessageParams{ConversationID: in.ConversationID, ParentID: idIn(in.ParentID),
			Role: in.Role, Content: in.Content, Stats: stats, CreatedAt: now})
		if err != nil {
			return err
		}
		if _, err := q.SetActiveLeaf(ctx, db.SetActiveLeafParams{ActiveLeafID: idIn(m.ID), UpdatedAt: now, ID: in.ConversationID}); err != nil {
			return err
		}
		out = messageOut(m)
		return nil
	})
	return out, err
}

// GetMessage returns the message with id, or ErrNotFound.
func (d *DB) GetMessage(ctx context.Context, id int64) (Message, error) {
	m, err := d.q.GetMessage(ctx, id)
	if err != nil {
		return Message{}, d.fail(fmt.Sprintf("get message %d", id), err)
	}
	return messageOut(m), nil
}

// UpdateMessage replaces a message's content and stats (e.g. when a streamed
// answer finishes). The full-text index follows.
func (d *DB) UpdateMessage(ctx context.Context, id int64, content string, stats json.RawMessage) error {
	op := fmt.Sprintf("update message %d", id)
	s, err := jsonIn(op+" stats", stats)
	if err != nil {
		return err
	}
	n, err := d.q.UpdateMessage(ctx, db.UpdateMessageParams{Content: content, Stats: s, ID: id})
	return d.fail(op, oneRow(op, n, err))
}

// Branch returns the messages from the root down to leafID, root first: the
// conversation as the model sees it.
func (d *DB) Branch(ctx context.Context, leafID int64) ([]Message, error) {
	op := fmt.Sprintf("list branch of message %d", leafID)
	ms, err := d.q.ListBranch(ctx, leafID)
	if err != nil {
		return nil, d.fail(op, err)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("storage: %s: %w", op, ErrNotFound)
	}
	return messagesOut(ms), nil
}

// ActiveBranch returns the branch ending at the conversation's active leaf
// (empty for an empty conversation).
func (d *DB) ActiveBranch(ctx context.Context, conversationID int64) ([]Message, error) {
	c, err := d.GetConversation(ctx, conversationID)
	if err != nil {
		return nil, err
	}
	if c.ActiveLeafID == 0 {
		return []Message{}, nil
	}
	return d.Branch(ctx, c.ActiveLeafID)
}

// Tree returns every message of the conversation, parents before children
// (ordered by id); group by ParentID to draw the tree.
func (d *DB) Tree(ctx context.Context, conversationID int64) ([]Message, error) {
	ms, err := d.q.ListConversationMessages(ctx, conversationID)
	if err != nil {
		return nil, d.fail(fmt.Sprintf("list messages of conversation %d", conversationID), err)
	}
	return messagesOut(ms), nil
}

// Children returns the direct replies to message id (its branches), oldest first.
func (d *DB) Children(ctx context.Context, id int64) ([]Message, error) {
	ms, err := d.q.ListChildren(ctx, sql.NullInt64{Int64: id, Valid: true})
	if err != nil {
		return nil, d.fail(fmt.Sprintf("list replies to message %d", id), err)
	}
	return messagesOut(ms), nil
}

// reparentBatch is how many ids one Reparent statement binds, well under
// SQLite's limit on a statement's variables (32,766).
const reparentBatch = 1000

// DeleteMessage deletes a message and its whole subtree. If the active leaf
// was inside it, the deleted message's parent becomes the active leaf.
func (d *DB) DeleteMessage(ctx context.Context, id int64) error {
	op := fmt.Sprintf("delete message %d", id)
	return d.tx(ctx, op, func(q *db.Queries) error {
		m, err := q.GetMessage(ctx, id)
		if err != nil {
			return err
		}
		c, err := q.GetConversation(ctx, m.ConversationID)
		if err != nil {
			return err
		}
		// Flat first, so that the delete does not recurse (see ListBelow).
		below, err := q.ListBelow(ctx, idIn(id))
		if err != nil {
			return err
		}
		for ids := range slices.Chunk(below, reparentBatch) {
			if err := q.Reparent(ctx, db.ReparentParams{ParentID: idIn(id), Ids: ids}); err != nil {
				return err
			}
		}
		if _, err := q.DeleteMessage(ctx, id); err != nil {
			return err
		}
		if c.ActiveLeafID.Valid {
			if _, err := q.GetMessage(ctx, c.ActiveLeafID.Int64); isNotFound(err) {
				// The active leaf went with the subtree (the foreign key set it NULL).
				_, err = q.SetActiveLeaf(ctx, db.SetActiveLeafParams{ActiveLeafID: m.ParentID, UpdatedAt: millis(d.now()), ID: c.ID})
				return err
			} else if err != nil {
				return err
			}
		}
		return nil
	})
}

// Siblings returns message id and its alternatives (the messages with the
// same parent: the edits or regenerations a UI pages through), oldest first.
func (d *DB) Siblings(ctx context.Context, id int64) ([]Message, error) {
	ms, err := d.q.ListSiblings(ctx, id)
	if err != nil {
		return nil, d.fail(fmt.Sprintf("list alternatives of message %d", id), err)
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("storage: list alternatives of message %d: %w", id, ErrNotFound)
	}
	return messagesOut(ms), nil
}

// LatestLeaf returns the leaf reached from message id by following the
// newest reply at each step (id itself if it has none): where to land when
// the user switches to another alternative.
func (d *DB) LatestLeaf(ctx context.Context, id int64) (int64, error) {
	leaf, err := d.q.LatestLeaf(ctx, id)
	if err != nil {
		return 0, d.fail(fmt.Sprintf("find the latest leaf under message %d", id), err)
	}
	return leaf, nil
}

// ImportedMessage is one message of a conversation being imported.
type ImportedMessage struct {
	// Parent is the index in ConversationImport.Messages of the message this
	// one answers, -1 for a root; a parent comes before its children.
	Parent    int
	Role      string
	Content   string
	Stats     json.RawMessage // nil for none
	CreatedAt time.Time
}

// ConversationImport is a whole conversation to store at once.
type ConversationImport struct {
	Conversation         ConversationInput
	CreatedAt, UpdatedAt time.Time
	Messages             []ImportedMessage
	// ActiveLeaf is the index of the message whose branch is on screen, -1
	// for none (an empty conversation).
	ActiveLeaf int
}

// ImportConversation stores a conversation with its message tree in one
// transaction: all of it or, on any error, nothing. Messages keep their
// times; ids are new.
func (d *DB) ImportConversation(ctx context.Context, in ConversationImport) (Conversation, error) {
	const op = "import conversation"
	for i, m := range in.Messages {
		switch {
		case m.Parent < -1 || m.Parent >= i:
			return Conversation{}, invalid(op, "message %d: parent %d is not an earlier message", i, m.Parent)
		case !validRole(m.Role):
			return Conversation{}, invalid(op, "message %d: role %q is not system, user or assistant", i, m.Role)
		}
	}
	if in.ActiveLeaf < -1 || in.ActiveLeaf >= len(in.Messages) || (in.ActiveLeaf == -1 && len(in.Messages) > 0) {
		return Conversation{}, invalid(op, "active leaf %d is not one of the %d messages", in.ActiveLeaf, len(in.Messages))
	}
	var id int64
	err := d.tx(ctx, op, func(q *db.Queries) error {
		c, err := d.createConversation(ctx, q, in.Conversation, in.CreatedAt, in.UpdatedAt)
		if err != nil {
			return err
		}
		id = c.ID
		ids := make([]int64, len(in.Messages))
		for i, m := range in.Messages {
			stats, err := jsonIn(fmt.Sprintf("%s message %d stats", op, i), m.Stats)
			if err != nil {
				return err
			}
			var parent int64
			if m.Parent >= 0 {
				parent = ids[m.Parent]
			}
			row, err := q.InsertMessage(ctx, db.InsertMessageParams{ConversationID: id, ParentID: idIn(parent),
				Role: m.Role, Content: m.Content, Stats: stats, CreatedAt: millis(m.CreatedAt)})
			if err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			ids[i] = row.ID
		}
		if in.ActiveLeaf >= 0 {
			_, err := q.SetActiveLeaf(ctx, db.SetActiveLeafParams{ActiveLeafID: idIn(ids[in.ActiveLeaf]), UpdatedAt: millis(in.UpdatedAt), ID: id})
			return err
		}
		return nil
	})
	if err != nil {
		return Conversation{}, err
	}
	return d.GetConversation(ctx, id)
}
