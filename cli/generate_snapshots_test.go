package cli

import (
	"context"
	"fmt"
	"os"
	"testing"

	"anechat/internal/testres"
	"anechat/storage"
)

// TestGenerateKeepsOneSnapshot: reruns of one prompt with a data dir keep
// one KV snapshot (row and file): an identical rerun, a shorter one (the
// stored snapshot holds all its tokens: nothing saved) and a longer one (its
// snapshot holds all the stored one's tokens: that one is dropped).
func TestGenerateKeepsOneSnapshot(t *testing.T) {
	model := testres.Stories(t)
	home := t.TempDir()
	for i, tc := range []struct {
		maxTokens, resumed, stored int
	}{
		{20, 0, 169}, // prompt + 19 generated (the last one is not in the cache)
		{20, 149, 169},
		{10, 149, 169},
		{30, 149, 179},
	} {
		g := genJSON(t, "--model", model, "--prompt-ids", longPromptIDs(), "--max-tokens", fmt.Sprint(tc.maxTokens), "--data-dir", home)
		if g.Stats.ResumedTokens != tc.resumed {
			t.Errorf("run %d: resumed %d tokens, want %d", i, g.Stats.ResumedTokens, tc.resumed)
		}
		db, err := storage.Open(context.Background(), storage.DBPath(home))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.ListSnapshots(context.Background())
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		files, err := os.ReadDir(storage.KVPath(home))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || len(files) != 1 || rows[0].FilePath != files[0].Name() || rows[0].TokenCount != tc.stored {
			var names []string
			for _, f := range files {
				names = append(names, f.Name())
			}
			t.Fatalf("run %d (--max-tokens %d): rows %+v, files %v; want one snapshot of %d tokens", i, tc.maxTokens, rows, names, tc.stored)
		}
	}
}
