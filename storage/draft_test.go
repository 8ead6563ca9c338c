package storage

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDraftIsStoredWithoutReorderingTheList(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	clock := time.UnixMilli(1_700_000_000_000)
	d.now = func() time.Time { clock = clock.Add(time.Second); return clock } // every write a second later
	a, _ := d.CreateConversation(ctx, ConversationInput{Title: "a"})
	b, _ := d.CreateConversation(ctx, ConversationInput{Title: "b"})
	if a.Draft != "" {
		t.Fatalf("a new conversation has draft %q", a.Draft)
	}
	if err := d.SetDraft(ctx, a.ID, "half a thought"); err != nil {
		t.Fatal(err)
	}
	got, _ := d.GetConversation(ctx, a.ID)
	if got.Draft != "half a thought" || !got.UpdatedAt.Equal(a.UpdatedAt) {
		t.Fatalf("after SetDraft: draft %q, updated %v (was %v)", got.Draft, got.UpdatedAt, a.UpdatedAt)
	}
	list, _ := d.ListConversations(ctx, 0, 0)
	if len(list) != 2 || list[0].ID != b.ID || list[1].Draft != "half a thought" {
		t.Fatalf("list after a draft: %+v (want b first: typing is not activity)", list)
	}
	if err := d.SetDraft(ctx, a.ID, strings.Repeat("x", MaxDraftBytes+1)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("an oversized draft: %v, want ErrInvalid naming the limit", err)
	}
	if err := d.SetDraft(ctx, 999, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("draft of a missing conversation: %v", err)
	}
	if err := d.SoftDeleteConversation(ctx, b.ID, d.now()); err != nil {
		t.Fatal(err)
	}
	if err := d.SetDraft(ctx, b.ID, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("draft of a deleted conversation: %v", err)
	}
}

func TestEmptyConversationFromPrompt(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	p, _ := d.CreatePrompt(ctx, PromptInput{Title: "Reviewer", Body: "Review this."})
	q, _ := d.CreatePrompt(ctx, PromptInput{Title: "Other", Body: "x"})
	if _, err := d.EmptyConversationFromPrompt(ctx, p.ID, p.Body); !errors.Is(err, ErrNotFound) {
		t.Fatalf("none yet: %v", err)
	}
	older, _ := d.CreateConversation(ctx, ConversationInput{Title: "Reviewer", PromptID: p.ID})
	newer, _ := d.CreateConversation(ctx, ConversationInput{Title: "Reviewer", PromptID: p.ID})
	d.CreateConversation(ctx, ConversationInput{Title: "Other", PromptID: q.ID})
	if c, err := d.EmptyConversationFromPrompt(ctx, p.ID, p.Body); err != nil || c.ID != newer.ID {
		t.Fatalf("empty one: %+v, %v; want the newest (%d)", c, err, newer.ID)
	}
	// The prompt's body kept as the draft still counts as empty; the user's own text does not.
	d.SetDraft(ctx, newer.ID, p.Body)
	if c, _ := d.EmptyConversationFromPrompt(ctx, p.ID, p.Body); c.ID != newer.ID {
		t.Fatalf("with the body as its draft: got %d, want %d", c.ID, newer.ID)
	}
	d.SetDraft(ctx, newer.ID, "my own words")
	if c, _ := d.EmptyConversationFromPrompt(ctx, p.ID, p.Body); c.ID != older.ID {
		t.Fatalf("with a draft of the user's: got %d, want the older empty one %d", c.ID, older.ID)
	}
	// A message makes it not empty; deleted ones are not found.
	if _, err := d.AppendMessage(ctx, MessageInput{ConversationID: older.ID, Role: RoleUser, Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.EmptyConversationFromPrompt(ctx, p.ID, p.Body); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after a message: %v", err)
	}
	d.SetDraft(ctx, newer.ID, "")
	d.SoftDeleteConversation(ctx, newer.ID, d.now())
	if _, err := d.EmptyConversationFromPrompt(ctx, p.ID, p.Body); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted one found: %v", err)
	}
}
