package storage

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestTitleSourcePinAndSoftDelete(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	c, err := d.CreateConversation(ctx, ConversationInput{Title: "New chat"})
	if err != nil || c.TitleSource != TitleDefault || c.Pinned {
		t.Fatalf("create: %+v, %v", c, err)
	}
	if _, err := d.CreateConversation(ctx, ConversationInput{Title: "x", TitleSource: "robot"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad title source: %v", err)
	}
	// SetTitleIf only while the source is the expected one.
	if ok, err := d.SetTitleIf(ctx, c.ID, "From message", TitleMessage, TitleDefault); err != nil || !ok {
		t.Fatalf("SetTitleIf from default: %v, %v", ok, err)
	}
	if ok, err := d.SetTitleIf(ctx, c.ID, "Again", TitleMessage, TitleDefault); err != nil || ok {
		t.Fatalf("SetTitleIf with a stale expectation: %v, %v", ok, err)
	}
	got, _ := d.GetConversation(ctx, c.ID)
	if got.Title != "From message" || got.TitleSource != TitleMessage {
		t.Fatalf("title %q (%s)", got.Title, got.TitleSource)
	}
	other, _ := d.CreateConversation(ctx, ConversationInput{Title: "other"})
	if _, err := d.SetPinned(ctx, c.ID, true); err != nil {
		t.Fatal(err)
	}
	list, _ := d.ListConversations(ctx, 0, 0)
	if len(list) != 2 || list[0].ID != c.ID || !list[0].Pinned {
		t.Fatalf("pinned not first: %+v", list)
	}
	// Soft delete: gone from lookups, lists and search; restorable after
	// the cutoff only; purged before it.
	m, _ := d.AppendMessage(ctx, MessageInput{ConversationID: other.ID, Role: RoleUser, Content: "findable text"})
	at := time.UnixMilli(1_700_000_000_000)
	if err := d.SoftDeleteConversation(ctx, other.ID, at); err != nil {
		t.Fatal(err)
	}
	if err := d.SoftDeleteConversation(ctx, other.ID, at); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting twice: %v", err)
	}
	if _, err := d.GetConversation(ctx, other.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetConversation of a deleted one: %v", err)
	}
	if hits, _ := d.SearchMessages(ctx, "findable", 10); len(hits) != 0 {
		t.Fatalf("search finds a deleted conversation: %+v", hits)
	}
	if _, err := d.AppendMessage(ctx, MessageInput{ConversationID: other.ID, ParentID: m.ID, Role: RoleAssistant, Content: "late"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("append to a deleted conversation: %v", err)
	}
	if _, err := d.RestoreConversation(ctx, other.ID, at.Add(time.Millisecond)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("restore after the window: %v", err)
	}
	r, err := d.RestoreConversation(ctx, other.ID, at)
	if err != nil || r.ID != other.ID {
		t.Fatalf("restore: %+v, %v", r, err)
	}
	if hits, _ := d.SearchMessages(ctx, "findable", 10); len(hits) != 1 {
		t.Fatalf("restored conversation not found: %+v", hits)
	}
	d.SoftDeleteConversation(ctx, other.ID, at)
	if n, err := d.PurgeDeleted(ctx, at); err != nil || n != 0 {
		t.Fatalf("purge with the cutoff at the deletion: %d, %v", n, err)
	}
	if n, err := d.PurgeDeleted(ctx, at.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if _, err := d.GetMessage(ctx, m.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a purged conversation's message: %v", err)
	}
}

func TestImportConversationIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	t0 := time.UnixMilli(1_600_000_000_000)
	in := ConversationImport{Conversation: ConversationInput{Title: "Imported", TitleSource: TitleImport, Pinned: true},
		CreatedAt: t0, UpdatedAt: t0.Add(time.Hour), ActiveLeaf: 2,
		Messages: []ImportedMessage{
			{Parent: -1, Role: RoleUser, Content: "q", CreatedAt: t0},
			{Parent: 0, Role: RoleAssistant, Content: "a1", CreatedAt: t0.Add(time.Second), Stats: json.RawMessage(`{"tokens":2}`)},
			{Parent: 0, Role: RoleAssistant, Content: "a2", CreatedAt: t0.Add(2 * time.Second)},
		}}
	c, err := d.ImportConversation(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !c.CreatedAt.Equal(t0) || !c.UpdatedAt.Equal(t0.Add(time.Hour)) || !c.Pinned || c.TitleSource != TitleImport {
		t.Fatalf("imported %+v", c)
	}
	branch, _ := d.ActiveBranch(ctx, c.ID)
	if len(branch) != 2 || branch[1].Content != "a2" || !branch[1].CreatedAt.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("active branch %+v", branch)
	}
	if sib, _ := d.Siblings(ctx, branch[1].ID); len(sib) != 2 || string(sib[0].Stats) != `{"tokens":2}` {
		t.Fatalf("siblings %+v", sib)
	}
	// Bad input stores nothing: a forward parent, a bad role, stats that
	// are not JSON (refused by the database, mid-way through the messages).
	for _, bad := range []func(*ConversationImport){
		func(x *ConversationImport) { x.Messages[1].Parent = 2 },
		func(x *ConversationImport) { x.Messages[2].Role = "robot" },
		func(x *ConversationImport) { x.ActiveLeaf = 7 },
		func(x *ConversationImport) { x.Messages[2].Stats = json.RawMessage(`{not json`) },
	} {
		x := in
		x.Messages = append([]ImportedMessage(nil), in.Messages...)
		bad(&x)
		if _, err := d.ImportConversation(ctx, x); err == nil {
			t.Fatalf("bad import %+v stored", x)
		}
	}
	list, _ := d.ListConversations(ctx, 0, 0)
	var n int
	d.SQL().QueryRow("SELECT count(*) FROM messages").Scan(&n)
	if len(list) != 1 || n != 3 {
		t.Fatalf("after rejected imports: %d conversations, %d messages; want 1 and 3", len(list), n)
	}
}

func TestSearchFoldsIdenticalBranches(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	c, _ := d.CreateConversation(ctx, ConversationInput{Title: "c"})
	q, _ := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleUser, Content: "question about tides"})
	a1, _ := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, ParentID: q.ID, Role: RoleAssistant, Content: "tides follow the moon"})
	a2, _ := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, ParentID: q.ID, Role: RoleAssistant, Content: "tides follow the moon"})
	a3, _ := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, ParentID: q.ID, Role: RoleAssistant, Content: "tides come from gravity"})
	// The same text in another conversation is another path.
	c2, _ := d.CreateConversation(ctx, ConversationInput{Title: "c2"})
	q2, _ := d.AppendMessage(ctx, MessageInput{ConversationID: c2.ID, Role: RoleUser, Content: "question about tides"})
	d.AppendMessage(ctx, MessageInput{ConversationID: c2.ID, ParentID: q2.ID, Role: RoleAssistant, Content: "tides follow the moon"})
	if err := d.SetActiveLeaf(ctx, c.ID, a1.ID); err != nil {
		t.Fatal(err)
	}
	hits, err := d.SearchMessages(ctx, "tides moon", 10)
	if err != nil {
		t.Fatal(err)
	}
	var inC []SearchHit
	for _, h := range hits {
		if h.ConversationID == c.ID {
			inC = append(inC, h)
		}
	}
	if len(hits) != 2 || len(inC) != 1 {
		t.Fatalf("hits %+v: want one per conversation", hits)
	}
	h := inC[0]
	if h.MessageID != a1.ID || !h.OnActiveBranch || h.Duplicates != 1 || h.Alternative != 1 || h.Alternatives != 3 {
		t.Fatalf("hit %+v: want a1 (on screen), 1 duplicate, alternative 1 of 3", h)
	}
	// Off the branch on screen, the newest of equals stands for the group.
	d.SetActiveLeaf(ctx, c.ID, a3.ID)
	hits, _ = d.SearchMessages(ctx, "tides moon", 10)
	for _, h := range hits {
		if h.ConversationID == c.ID && (h.MessageID != a2.ID || h.OnActiveBranch || h.Duplicates != 1 || h.Alternative != 2) {
			t.Fatalf("off-branch hit %+v: want a2, alternative 2, not on screen", h)
		}
	}
	// The limit counts hits after folding.
	if hits, _ := d.SearchMessages(ctx, "tides", 2); len(hits) != 2 {
		t.Fatalf("limit 2 gave %d hits", len(hits))
	}
}
