package storage

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// importChain stores a conversation whose messages form one branch of n
// messages (each answers the one before), with the last on screen.
func importChain(t *testing.T, d *DB, title string, n int) Conversation {
	t.Helper()
	t0 := time.UnixMilli(1_600_000_000_000)
	in := ConversationImport{Conversation: ConversationInput{Title: title, TitleSource: TitleImport},
		CreatedAt: t0, UpdatedAt: t0, ActiveLeaf: n - 1}
	for i := range n {
		role := RoleUser
		if i%2 == 1 {
			role = RoleAssistant
		}
		in.Messages = append(in.Messages, ImportedMessage{Parent: i - 1, Role: role, Content: "turn " + itoa(i), CreatedAt: t0})
	}
	c, err := d.ImportConversation(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// count runs a SELECT count(*) query.
func count(t *testing.T, d *DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := d.SQL().QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A branch deeper than SQLite's 1,000 levels of foreign-key cascade (each
// message's ON DELETE CASCADE on parent_id deletes its reply one level
// deeper) is still purged, hard deleted and cut, and a deep conversation
// does not keep the other deleted ones from going.
func TestDeleteDeepBranches(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	small := importChain(t, d, "small", 3)
	deep := importChain(t, d, "deep", 1200)
	deeper := importChain(t, d, "deeper", 5000)
	kept := importChain(t, d, "kept", 1200)
	at := time.UnixMilli(1_700_000_000_000)
	for _, c := range []Conversation{small, deep, deeper} {
		if err := d.SoftDeleteConversation(ctx, c.ID, at); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := d.PurgeDeleted(ctx, at.Add(time.Second)); err != nil || n != 3 {
		t.Fatalf("purge: %d, %v; want 3 purged", n, err)
	}
	if got := count(t, d, "SELECT count(*) FROM messages"); got != 1200 {
		t.Fatalf("%d messages left after the purge, want the kept conversation's 1200", got)
	}
	if got := count(t, d, "SELECT count(*) FROM conversations"); got != 1 {
		t.Fatalf("%d conversations left after the purge, want 1", got)
	}
	// The full-text index follows (its delete trigger ran for each message).
	if hits, err := d.SearchMessages(ctx, "turn", 5); err != nil || len(hits) == 0 {
		t.Fatalf("search after the purge: %v, %v", hits, err)
	}
	if got := count(t, d, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'turn'"); got != 1200 {
		t.Fatalf("full-text index holds %d messages, want 1200", got)
	}

	// Cutting a deep branch: the message and its 1,199 replies go, the
	// active leaf moves up to the cut message's parent.
	branch, err := d.ActiveBranch(ctx, kept.ID)
	if err != nil || len(branch) != 1200 {
		t.Fatalf("branch: %d messages, %v", len(branch), err)
	}
	if err := d.DeleteMessage(ctx, branch[1].ID); err != nil {
		t.Fatalf("delete a message with 1,198 replies below it: %v", err)
	}
	if got := count(t, d, "SELECT count(*) FROM messages"); got != 1 {
		t.Fatalf("%d messages left after cutting the branch, want 1", got)
	}
	if c, err := d.GetConversation(ctx, kept.ID); err != nil || c.ActiveLeafID != branch[0].ID {
		t.Fatalf("active leaf after the cut: %+v, %v; want %d", c, err, branch[0].ID)
	}

	// A hard delete of a deep conversation.
	again := importChain(t, d, "again", 1500)
	if err := d.DeleteConversation(ctx, again.ID); err != nil {
		t.Fatalf("delete a conversation with a 1,500-message branch: %v", err)
	}
	if err := d.DeleteConversation(ctx, again.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting it twice: %v", err)
	}
	if got := count(t, d, "SELECT count(*) FROM messages"); got != 1 {
		t.Fatalf("%d messages left after the hard delete, want 1", got)
	}
}

// A conversation that cannot be purged is reported and does not keep the
// others from going.
func TestPurgeGoesOnPastAFailure(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	first := importChain(t, d, "first", 2)
	stuck := importChain(t, d, "stuck", 2)
	last := importChain(t, d, "last", 2)
	// A test-only trigger stands for whatever may refuse one delete.
	if _, err := d.SQL().Exec(`CREATE TRIGGER stuck BEFORE DELETE ON conversations WHEN OLD.title = 'stuck'
		BEGIN SELECT RAISE(ABORT, 'stuck on purpose'); END`); err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1_700_000_000_000)
	for _, c := range []Conversation{first, stuck, last} {
		if err := d.SoftDeleteConversation(ctx, c.ID, at); err != nil {
			t.Fatal(err)
		}
	}
	n, err := d.PurgeDeleted(ctx, at.Add(time.Second))
	if n != 2 || err == nil || !strings.Contains(err.Error(), "stuck on purpose") {
		t.Fatalf("purge: %d, %v; want 2 purged and the stuck one's error", n, err)
	}
	// The stuck one is whole: its messages' links were put back (rolled back).
	if got := count(t, d, "SELECT count(*) FROM messages WHERE conversation_id = ? AND parent_id IS NOT NULL", stuck.ID); got != 1 {
		t.Fatalf("the stuck conversation has %d linked replies, want 1", got)
	}
	if got := count(t, d, "SELECT count(*) FROM conversations"); got != 1 {
		t.Fatalf("%d conversations left, want the stuck one", got)
	}
}
