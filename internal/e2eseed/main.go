// Command e2eseed stores the conversations the end-to-end tests read but the
// test model cannot write: replies of hostile Markdown (frontend/testdata/
// hostile-markdown.json) with drafted spans, so that frontend/e2e/hostile.spec.ts
// sees them rendered by the real page, fetched through the real Go services.
// build/scripts/e2e.sh runs it on the fresh data directory before it starts
// the backend.
//
// usage: go run ./internal/e2eseed -corpus FILE [-data-dir DIR]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"unicode/utf16"

	"anechat/app"
	"anechat/engine"
	"anechat/engine/spec"
	"anechat/storage"
)

// Title is the title of the conversation seed stores.
const Title = "Hostile Markdown"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "e2eseed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("e2eseed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	corpus := fs.String("corpus", "", "JSON file with the Markdown documents: {\"docs\": [...]}")
	dataDir := fs.String("data-dir", "", "data directory (default $ANECHAT_HOME or the OS default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *corpus == "" {
		return errors.New("-corpus FILE is required (frontend/testdata/hostile-markdown.json)")
	}
	docs, err := readCorpus(*corpus)
	if err != nil {
		return err
	}
	dir, err := storage.DataDir(*dataDir, slog.New(slog.NewTextHandler(stderr, nil)))
	if err != nil {
		return err
	}
	db, err := storage.Open(ctx, storage.DBPath(dir))
	if err != nil {
		return err
	}
	_, err = seed(ctx, db, docs)
	return errors.Join(err, db.Close())
}

// readCorpus reads the documents of a corpus file.
func readCorpus(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var c struct {
		Docs []string `json:"docs"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("corpus %s: %w (want {\"docs\": [\"...\"]})", path, err)
	}
	if len(c.Docs) == 0 {
		return nil, fmt.Errorf("corpus %s: no documents in \"docs\"", path)
	}
	return c.Docs, nil
}

// seed stores one conversation titled Title whose active branch is, for each
// document in order and each of its span patterns (see patterns), a user
// message and an assistant reply holding the document with those drafted
// spans in its stats.
func seed(ctx context.Context, db *storage.DB, docs []string) (storage.Conversation, error) {
	c, err := db.CreateConversation(ctx, storage.ConversationInput{Title: Title})
	if err != nil {
		return storage.Conversation{}, err
	}
	parent := int64(0)
	for i, doc := range docs {
		for j, spans := range patterns(len(utf16.Encode([]rune(doc)))) {
			u, err := db.AppendMessage(ctx, storage.MessageInput{ConversationID: c.ID, ParentID: parent,
				Role: storage.RoleUser, Content: fmt.Sprintf("document %d, spans %d", i, j)})
			if err != nil {
				return c, err
			}
			stats, err := json.Marshal(app.GenerateStats{Stats: engine.Stats{Stats: spec.Stats{Tokens: len(doc), TargetCalls: 1, Stopped: "stop"}}, DraftedSpans: spans})
			if err != nil {
				return c, err
			}
			a, err := db.AppendMessage(ctx, storage.MessageInput{ConversationID: c.ID, ParentID: u.ID,
				Role: storage.RoleAssistant, Content: doc, Stats: stats})
			if err != nil {
				return c, err
			}
			parent = a.ID
		}
	}
	return db.GetConversation(ctx, c.ID)
}

// patterns are the drafted spans each document is stored with, for a text
// of n UTF-16 units: none; one unit out of two from the first, and from the
// second (so that every offset starts a span in one and ends one in the
// other); and the whole text.
func patterns(n int) [][][2]int {
	units := func(from int) [][2]int {
		var s [][2]int
		for i := from; i < n; i += 2 {
			s = append(s, [2]int{i, i + 1})
		}
		return s
	}
	return [][][2]int{nil, units(0), units(1), {{0, n}}}
}
