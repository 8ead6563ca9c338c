package storage

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// TestConcurrentWriters appends from several goroutines and from a second
// DB handle on the same file (as the CLI and the app might): the busy timeout
// and IMMEDIATE transactions serialise writers with no "database is locked".
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), DBFile)
	a, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, _ := a.CreateConversation(ctx, ConversationInput{})
	const workers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		d := a
		if w%2 == 1 {
			d = b
		}
		wg.Go(func() {
			for i := range each {
				if _, err := d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleUser, Content: "w" + strconv.Itoa(w) + " m" + strconv.Itoa(i)}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tree, err := b.Tree(ctx, c.ID)
	if err != nil || len(tree) != workers*each {
		t.Errorf("%d messages, %v; want %d", len(tree), err, workers*each)
	}
	if hits, _ := a.SearchMessages(ctx, "w3", 1000); len(hits) != each {
		t.Errorf("search w3: %d hits, want %d", len(hits), each)
	}
}
