package kvindex

import (
	"context"
	"slices"
	"testing"

	"anechat/engine"
	"anechat/storage"
)

// TestLongestPrefixUnowned: only a snapshot saved under the empty key that
// nothing pins is offered as Unowned (SaveRun may drop only those): not a
// pinned one, not one a library prompt pins, not a conversation's.
func TestLongestPrefixUnowned(t *testing.T) {
	ctx := context.Background()
	x, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	r := &engine.Resumer{Store: x, Meta: killMeta}
	unowned := func(ids []int32) bool {
		t.Helper()
		s, ok, err := x.LongestPrefix(ctx, killMeta, append(slices.Clone(ids), 1))
		if err != nil || !ok {
			t.Fatalf("LongestPrefix: %v %v", ok, err)
		}
		return s.Unowned
	}
	c, ids := killCache(t, 200, 1)
	if _, err := r.Save(ctx, "", ids, c); err != nil {
		t.Fatal(err)
	}
	if !unowned(ids) {
		t.Error("a snapshot saved under the empty key is not Unowned")
	}
	rows, err := x.db.ListSnapshots(ctx)
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	id := rows[0].ID
	if err := x.db.SetSnapshotPinned(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if unowned(ids) {
		t.Error("a pinned snapshot is Unowned")
	}
	if err := x.db.SetSnapshotPinned(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	p, err := x.db.CreatePrompt(ctx, storage.PromptInput{Title: "p", Body: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.db.SetPromptSnapshot(ctx, p.ID, id); err != nil {
		t.Fatal(err)
	}
	if unowned(ids) {
		t.Error("a snapshot a prompt pins is Unowned")
	}
	conv, err := x.db.CreateConversation(ctx, storage.ConversationInput{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	c2, ids2 := killCache(t, 300, 2)
	if _, err := r.Save(ctx, ConversationKey(conv.ID), ids2, c2); err != nil {
		t.Fatal(err)
	}
	if unowned(ids2) {
		t.Error("a conversation's snapshot is Unowned")
	}
}
