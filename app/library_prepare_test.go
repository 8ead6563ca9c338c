package app

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"anechat/storage"

	"anechat/internal/testres"
)

// A long system prompt: well over one 64-token KV block on stories260K.
const storySystem = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends. " +
	"One day, Lily saw a big red ball under a tree. She ran to the ball and picked it up. Her friend Tom came and said, " +
	"\"Can I play with the ball too?\" Lily smiled and said, \"Yes, let's play together!\" They played all day and were very happy."

// replyTo sends text in a new conversation started from prompt promptID and
// returns the stored reply and its stats.
func replyTo(t *testing.T, a *App, rec *recorder, promptID int64, text string) (storage.Message, GenerateStats) {
	t.Helper()
	c, err := a.Chat.CreateConversation(NewConversation{PromptID: promptID})
	if err != nil {
		t.Fatal(err)
	}
	before := len(rec.named(EventDone))
	if _, err := a.Chat.Send(c.ID, text); err != nil {
		t.Fatal(err)
	}
	done := rec.waitCount(t, EventDone, before+1)[before].(DoneEvent)
	if done.Message == nil {
		t.Fatalf("no reply: %+v", done)
	}
	var st GenerateStats
	if err := json.Unmarshal(done.Message.Stats, &st); err != nil {
		t.Fatal(err)
	}
	return *done.Message, st
}

func TestPreparedPromptResumesWithTheFreshOutput(t *testing.T) {
	path := testres.Stories(t)
	dir := t.TempDir()
	setup := func() (*App, *recorder, *EngineGenerator) {
		g := NewEngineGenerator(nil)
		a, rec, _ := startIn(t, dir, g)
		return a, rec, g
	}
	a, _, g := setup()
	mdl, err := a.Models.Register(path)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := a.Settings.Get()
	p.MaxTokens = 24
	if _, err := a.Settings.Update(p); err != nil {
		t.Fatal(err)
	}
	pr, err := a.Library.Create(PromptInput{Title: "Lily", SystemPrompt: storySystem, Body: "Tell me more."})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Library.Prepare(pr.ID)
	if err != nil || res.Outcome.Kind != OutcomePrepared || res.Prompt.PinnedSnapshotID == 0 {
		t.Fatalf("Prepare = %+v, %v; want a pinned snapshot", res, err)
	}
	pr = res.Prompt
	// Ready to resume, naming the model it was made with.
	if s := pr.Snapshot; s == nil || !s.Ready || s.ModelID != mdl.ID || s.ModelName != "stories260K" || s.Tokens < 64 || s.Reason != "" ||
		!strings.Contains(res.Outcome.Message, "stories260K") {
		t.Fatalf("prepared prompt's snapshot %+v (message %q)", pr.Snapshot, res.Outcome.Message)
	}
	// A restart: nothing in memory, the snapshot on disk is all there is.
	a.Shutdown()
	g.Close()
	a, rec, g := setup()
	defer g.Close()
	reply, st := replyTo(t, a, rec, pr.ID, pr.Body)
	if st.ResumedTokens == 0 || st.PrefillTokens > 8 {
		t.Fatalf("chat from the prepared prompt: stats %+v, want it resumed (only the last tokens prefilled)", st)
	}
	// Identical to a run with no cache at all.
	fresh := NewEngineGenerator(nil)
	defer fresh.Close()
	want, fst := collect(t, fresh, GenerateRequest{Model: mdl, MaxTokens: 24, Width: 4,
		Messages: []ChatMessage{{Role: "system", Content: storySystem}, {Role: "user", Content: pr.Body}}})
	if fst.ResumedTokens != 0 || reply.Content != want {
		t.Fatalf("resumed reply %q, fresh %q (fresh stats %+v)", reply.Content, want, fst)
	}

	// Pinned: a quota of one byte evicts every other snapshot, never it.
	p, _ = a.Settings.Get()
	p.KVQuotaBytes = 1
	a.Settings.Update(p)
	replyTo(t, a, rec, 0, storySystem) // saves (and evicts) a conversation snapshot
	d, _ := a.core.db()
	if _, err := d.GetSnapshot(context.Background(), pr.PinnedSnapshotID); err != nil {
		t.Fatalf("the prompt's snapshot was evicted: %v", err)
	}
	// Editing the body unpins it: the snapshot no longer holds the prompt.
	up, err := a.Library.Update(pr.ID, PromptInput{Title: "Lily", SystemPrompt: storySystem, Body: "Tell me more, please."})
	if err != nil || up.PinnedSnapshotID != 0 {
		t.Fatalf("Update = %+v, %v; want it unpinned", up, err)
	}
}

func TestFirstChatFromAPromptPreparesIt(t *testing.T) {
	path := testres.Stories(t)
	g := NewEngineGenerator(nil)
	defer g.Close()
	a, rec, _ := start(t, g)
	if _, err := a.Models.Register(path); err != nil {
		t.Fatal(err)
	}
	p, _ := a.Settings.Get()
	p.MaxTokens = 8
	a.Settings.Update(p)
	pr, _ := a.Library.Create(PromptInput{Title: "Lily", SystemPrompt: storySystem, Body: "And then?"})
	// A first message other than the body does not prepare it.
	replyTo(t, a, rec, pr.ID, "Something else")
	if got, _ := a.Library.Get(pr.ID); got.PinnedSnapshotID != 0 {
		t.Fatalf("prepared by a chat that did not open with its body: %+v", got)
	}
	before := len(rec.named(EventProgress))
	replyTo(t, a, rec, pr.ID, pr.Body)
	got, _ := a.Library.Get(pr.ID)
	if got.PinnedSnapshotID == 0 {
		t.Fatalf("prompt %+v not prepared by its first use", got)
	}
	// Its prefill (done while preparing) still reports progress to the
	// window: the preparing prefill's, then the reply's (its last token).
	prog := rec.named(EventProgress)[before:]
	if len(prog) < 2 || prog[len(prog)-1].(ProgressEvent) != (ProgressEvent{prog[0].(ProgressEvent).ConversationID, prog[0].(ProgressEvent).ParentID, 1, 1}) {
		t.Fatalf("progress while preparing on first use: %+v, want the opening's reports, then 1/1 for the reply", prog)
	}
	// The next chat from it resumes from the pinned snapshot.
	_, st := replyTo(t, a, rec, pr.ID, pr.Body)
	if st.ResumedTokens == 0 {
		t.Fatalf("second chat from the prompt: %+v, want resumed tokens", st)
	}
	// A short prompt needs no preparing: a fact, not an error.
	short, _ := a.Library.Create(PromptInput{Title: "Hi", Body: "Hi"})
	res, err := a.Library.Prepare(short.ID)
	if err != nil || res.Outcome.Kind != OutcomeTooShort || !strings.Contains(res.Outcome.Message, "too short to need preparing") ||
		res.Prompt.ID != short.ID || res.Prompt.Snapshot != nil {
		t.Fatalf("Prepare of a short prompt = %+v, %v", res, err)
	}
	// Another default model: the snapshot is no longer ready, and says why.
	other := filepath.Join(t.TempDir(), "other.gguf")
	writeOtherGGUF(t, other)
	om, err := a.Models.Register(other)
	if err != nil {
		t.Fatal(err)
	}
	// Another file (the same file twice is one model): another fingerprint.
	if err := a.Models.SetDefault(om.ID); err != nil {
		t.Fatal(err)
	}
	after, _ := a.Library.Get(pr.ID)
	if s := after.Snapshot; s == nil || s.Ready || !strings.Contains(s.Reason, "prepared with stories260K, but new chats use other") {
		t.Fatalf("after changing the default: %+v", after.Snapshot)
	}
}

// Prepared in the same process, after the session ran another conversation:
// the chat from the prompt reports the opening as resumed, not prefilled.
func TestPrepareAfterAnotherChatResumes(t *testing.T) {
	path := testres.Stories(t)
	g := NewEngineGenerator(nil)
	defer g.Close()
	a, rec, _ := start(t, g)
	if _, err := a.Models.Register(path); err != nil {
		t.Fatal(err)
	}
	p, _ := a.Settings.Get()
	p.MaxTokens = 16
	a.Settings.Update(p)
	replyTo(t, a, rec, 0, "Once upon a time")
	pr, _ := a.Library.Create(PromptInput{Title: "Lily", SystemPrompt: storySystem, Body: "Tell me more."})
	if _, err := a.Library.Prepare(pr.ID); err != nil {
		t.Fatal(err)
	}
	_, st := replyTo(t, a, rec, pr.ID, pr.Body)
	if st.ResumedTokens == 0 || st.PrefillTokens > 8 {
		t.Fatalf("chat from the prompt prepared in this process: %+v, want it resumed", st)
	}
}

// Two prompts with the same opening make the same snapshot file: both stay
// prepared, and unpreparing one leaves the other's snapshot (and its file) in
// place.
func TestPromptsWithTheSameOpeningShareOneSnapshot(t *testing.T) {
	path := testres.Stories(t)
	g := NewEngineGenerator(nil)
	defer g.Close()
	a, _, _ := startIn(t, t.TempDir(), g)
	if _, err := a.Models.Register(path); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, title := range []string{"Lily", "Lily again"} {
		pr, err := a.Library.Create(PromptInput{Title: title, SystemPrompt: storySystem, Body: "Tell me more."})
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Library.Prepare(pr.ID)
		if err != nil || res.Outcome.Kind != OutcomePrepared {
			t.Fatalf("Prepare(%s) = %+v, %v", title, res, err)
		}
		ids = append(ids, pr.ID)
	}
	ready := func(id int64) *PromptSnapshot {
		t.Helper()
		p, err := a.Library.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if p.Snapshot == nil || !p.Snapshot.Ready {
			return nil
		}
		return p.Snapshot
	}
	first, second := ready(ids[0]), ready(ids[1])
	if first == nil || second == nil {
		t.Fatalf("after preparing both: first %+v, second %+v; want both ready", first, second)
	}
	if first.ID != second.ID {
		t.Fatalf("the same opening made two snapshot rows (%d, %d); want one, shared", first.ID, second.ID)
	}
	if _, err := a.Library.Unprepare(ids[0]); err != nil {
		t.Fatal(err)
	}
	if ready(ids[0]) != nil {
		t.Fatal("the unprepared prompt still says ready")
	}
	if ready(ids[1]) == nil {
		t.Fatal("unpreparing the first prompt took the second's snapshot with it")
	}
	// Prepared again, then the other prompt deleted: the first keeps it.
	if _, err := a.Library.Prepare(ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := a.Library.Delete(ids[1]); err != nil {
		t.Fatal(err)
	}
	if ready(ids[0]) == nil {
		t.Fatal("deleting the second prompt took the first's snapshot with it")
	}
}
