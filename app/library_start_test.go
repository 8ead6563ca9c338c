package app

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"anechat/internal/testres"
	"anechat/storage"
)

// fromPrompt lists the conversations started from prompt id.
func fromPrompt(t *testing.T, a *App, id int64) []storage.Conversation {
	t.Helper()
	list, err := a.Chat.ListConversations()
	if err != nil {
		t.Fatal(err)
	}
	var out []storage.Conversation
	for _, c := range list {
		if c.PromptID == id {
			out = append(out, c)
		}
	}
	return out
}

func TestStartFromPromptSendsItOnceAndMakesNoEmptyDuplicates(t *testing.T) {
	gen := &scripted{pieces: []string{"Looks ", "fine."}, block: true, sent: make(chan struct{})}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	p, _ := a.Library.Create(PromptInput{Title: "Python code reviewer", SystemPrompt: "You review Python.", Body: "Review my code."})
	// Two clicks at once: one conversation, one message, one reply.
	var wg sync.WaitGroup
	starts := make([]PromptStart, 2)
	errs := make([]error, 2)
	for i := range starts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			starts[i], errs[i] = a.Chat.StartFromPrompt(p.ID, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || starts[i].User.ID == 0 || starts[i].Unsent != "" {
			t.Fatalf("start %d: %+v, %v; want the body sent", i, starts[i], err)
		}
	}
	if starts[0].ConversationID != starts[1].ConversationID || starts[0].User.ID != starts[1].User.ID {
		t.Fatalf("two starts at once made %+v and %+v, want the same conversation and message", starts[0], starts[1])
	}
	<-gen.sent
	if cs := fromPrompt(t, a, p.ID); len(cs) != 1 {
		t.Fatalf("conversations from the prompt: %+v, want one", cs)
	}
	th, _ := a.Chat.Thread(starts[0].ConversationID)
	if len(th.Messages) != 1 || th.Messages[0].Content != "Review my code." || th.Generating != th.Messages[0].ID ||
		th.Conversation.Title != "Python code reviewer" || th.Conversation.SystemPrompt != "You review Python." {
		t.Fatalf("thread %+v: want the body sent and being answered", th)
	}
	// A later click, once that chat is under way, starts another chat: sent,
	// so never an empty one.
	a.Chat.Cancel(starts[0].ConversationID)
	rec.waitFor(t, EventDone)
	gen.block = false
	again, err := a.Chat.StartFromPrompt(p.ID, nil)
	if err != nil || again.ConversationID == starts[0].ConversationID || again.User.Content != "Review my code." {
		t.Fatalf("a later start: %+v, %v", again, err)
	}
	rec.waitCount(t, EventDone, 2)
	for _, c := range fromPrompt(t, a, p.ID) {
		if th, _ := a.Chat.Thread(c.ID); len(th.Messages) == 0 {
			t.Fatalf("an empty conversation from the prompt: %+v", c)
		}
	}
	if n := len(gen.reqs); n != 2 {
		t.Fatalf("%d replies generated, want 2 (the double start answered once)", n)
	}

	// A prompt without a body: the conversation only, found again, not made twice.
	sys, _ := a.Library.Create(PromptInput{Title: "Pirate", SystemPrompt: "Talk like a pirate."})
	s1, err1 := a.Chat.StartFromPrompt(sys.ID, nil)
	s2, err2 := a.Chat.StartFromPrompt(sys.ID, nil)
	if err1 != nil || err2 != nil || s1.User.ID != 0 || s1.ConversationID != s2.ConversationID || len(fromPrompt(t, a, sys.ID)) != 1 {
		t.Fatalf("body-less prompt started twice: %+v %v, %+v %v, %d conversations", s1, err1, s2, err2, len(fromPrompt(t, a, sys.ID)))
	}
	// What the user typed there is theirs: the next start does not reuse it.
	if err := a.Chat.SetDraft(s1.ConversationID, "Arr, my own words"); err != nil {
		t.Fatal(err)
	}
	if s3, _ := a.Chat.StartFromPrompt(sys.ID, nil); s3.ConversationID == s1.ConversationID {
		t.Fatalf("a start reused the conversation holding the user's draft")
	}
}

func TestStartFromPromptWithoutAModelKeepsItAsTheDraft(t *testing.T) {
	gen := &scripted{pieces: []string{"ok"}}
	a, rec, dir := start(t, gen)
	p, _ := a.Library.Create(PromptInput{Title: "Reviewer", Body: "Review {{what}}."})
	st, err := a.Chat.StartFromPrompt(p.ID, map[string]string{"what": "this"})
	if err != nil || st.ConversationID == 0 || st.User.ID != 0 || !strings.Contains(st.Unsent, "no model available") {
		t.Fatalf("start without a model = %+v, %v; want the conversation, unsent, saying why", st, err)
	}
	th, _ := a.Chat.Thread(st.ConversationID)
	if len(th.Messages) != 0 || th.Conversation.Draft != "Review this." {
		t.Fatalf("thread %+v: want no message and the filled body as the draft", th)
	}
	// Clicking again finds it (no empty duplicate).
	if again, _ := a.Chat.StartFromPrompt(p.ID, map[string]string{"what": "this"}); again.ConversationID != st.ConversationID {
		t.Fatalf("second start without a model made conversation %d, want %d again", again.ConversationID, st.ConversationID)
	}
	// With a model it is sent there, and the draft is gone.
	withModel(t, a, dir)
	sent, err := a.Chat.StartFromPrompt(p.ID, map[string]string{"what": "this"})
	if err != nil || sent.ConversationID != st.ConversationID || sent.User.Content != "Review this." {
		t.Fatalf("start with a model = %+v, %v", sent, err)
	}
	rec.waitFor(t, EventDone)
	th, _ = a.Chat.Thread(st.ConversationID)
	if th.Conversation.Draft != "" || len(th.Messages) != 2 || len(fromPrompt(t, a, p.ID)) != 1 {
		t.Fatalf("after sending: draft %q, %d messages, %d conversations", th.Conversation.Draft, len(th.Messages), len(fromPrompt(t, a, p.ID)))
	}
}

func TestDraftSurvivesARestartAndSendClearsIt(t *testing.T) {
	gen := &scripted{pieces: []string{"ok"}}
	dir := t.TempDir()
	a, _, _ := startIn(t, dir, gen)
	withModel(t, a, dir)
	c1, _ := a.Chat.CreateConversation(NewConversation{})
	c2, _ := a.Chat.CreateConversation(NewConversation{})
	if err := a.Chat.SetDraft(c1.ID, "unsent words"); err != nil {
		t.Fatal(err)
	}
	if err := a.Chat.SetDraft(c1.ID+c2.ID+100, "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("draft of a missing conversation: %v", err)
	}
	if err := a.Chat.SetDraft(c2.ID, strings.Repeat("y", storage.MaxDraftBytes+1)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("an oversized draft: %v", err)
	}
	a.Shutdown()
	b, rec, _ := startIn(t, dir, gen)
	list, _ := b.Chat.ListConversations()
	if len(list) != 2 || list[0].ID != c2.ID || list[1].Draft != "unsent words" || list[0].Draft != "" {
		t.Fatalf("after a restart: %+v; want the draft kept, the order unchanged", list)
	}
	if _, err := b.Chat.Send(c1.ID, "unsent words"); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, EventDone)
	if th, _ := b.Chat.Thread(c1.ID); th.Conversation.Draft != "" {
		t.Fatalf("draft after sending: %q", th.Conversation.Draft)
	}
}

// The real engine on stories260K: a chat started from a prepared prompt
// resumes from its snapshot and says so; Unprepare drops the snapshot (row
// and file), and the next chat from the prompt does not claim a resume.
func TestStartFromPreparedPromptSaysSoAndUnprepareDropsTheSnapshot(t *testing.T) {
	path := testres.Stories(t)
	g := NewEngineGenerator(nil)
	defer g.Close()
	a, rec, dir := start(t, g)
	if _, err := a.Models.Register(path); err != nil {
		t.Fatal(err)
	}
	prefs, _ := a.Settings.Get()
	prefs.MaxTokens = 8
	a.Settings.Update(prefs)
	pr, _ := a.Library.Create(PromptInput{Title: "Lily", SystemPrompt: storySystem, Body: "Tell me more."})
	res, err := a.Library.Prepare(pr.ID)
	if err != nil || res.Prompt.Snapshot == nil || res.Prompt.Snapshot.Bytes <= 0 {
		t.Fatalf("Prepare = %+v, %v", res, err)
	}
	snap := res.Prompt.Snapshot
	d, _ := a.core.db()
	row, err := d.GetSnapshot(context.Background(), snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(storage.KVPath(dir), filepath.FromSlash(row.FilePath))
	if fi, err := os.Stat(file); err != nil || fi.Size() != snap.Bytes {
		t.Fatalf("snapshot file %s: %v, %v; want %d bytes (the size the library shows)", file, fi, err, snap.Bytes)
	}
	startChat := func() GenerateStats {
		t.Helper()
		before := len(rec.named(EventDone))
		st, err := a.Chat.StartFromPrompt(pr.ID, nil)
		if err != nil || st.User.ID == 0 {
			t.Fatalf("StartFromPrompt = %+v, %v", st, err)
		}
		done := rec.waitCount(t, EventDone, before+1)[before].(DoneEvent)
		var s GenerateStats
		if done.ParentID != st.User.ID || done.Message == nil || json.Unmarshal(done.Message.Stats, &s) != nil {
			t.Fatalf("done %+v, want the reply to message %d", done, st.User.ID)
		}
		return s
	}
	if st := startChat(); st.ResumedPrompt != "Lily" || st.ResumedTokens == 0 {
		t.Fatalf("chat from the prepared prompt: %+v, want it resumed and naming the prompt", st)
	}
	// A chat from the prompt that opens differently makes no such claim.
	if _, st := replyTo(t, a, rec, pr.ID, "Something else"); st.ResumedPrompt != "" {
		t.Fatalf("chat from the prompt with another first message: %+v", st)
	}

	up, err := a.Library.Unprepare(pr.ID)
	if err != nil || up.PinnedSnapshotID != 0 || up.Snapshot != nil {
		t.Fatalf("Unprepare = %+v, %v; want no snapshot", up, err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("snapshot file after Unprepare: %v, want it deleted", err)
	}
	if _, err := d.GetSnapshot(context.Background(), snap.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("snapshot row after Unprepare: %v", err)
	}
	if u, _ := a.Settings.Cache(); u.Pinned != 0 {
		t.Fatalf("cache after Unprepare: %+v, want nothing pinned", u)
	}
	if again, err := a.Library.Unprepare(pr.ID); err != nil || again.Snapshot != nil {
		t.Fatalf("Unprepare of a prompt not prepared: %+v, %v", again, err)
	}
	// The next chat from it reads its opening again (and prepares it anew on
	// that first use), so it does not say it resumed from the prompt.
	if after := startChat(); after.ResumedPrompt != "" {
		t.Fatalf("chat after Unprepare: %+v, want no resume claimed", after)
	}
	if got, _ := a.Library.Get(pr.ID); got.Snapshot == nil || got.Snapshot.ID == snap.ID {
		t.Fatalf("after the first chat since Unprepare: %+v, want a new snapshot", got.Snapshot)
	}
	if _, err := a.Library.Unprepare(pr.ID + 100); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Unprepare of a missing prompt: %v", err)
	}
}
