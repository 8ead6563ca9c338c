package app

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"anechat/engine"
	"anechat/engine/spec"
	"anechat/storage"
)

// titler is a test Generator: replies come from reply; a title request (the
// one modelTitle sends) gets title, or blocks until cancelled when block is
// set (started is closed once it is running).
type titler struct {
	reply   *scripted
	title   string
	block   bool
	started chan struct{}
	once    sync.Once
	mu      sync.Mutex
	titles  []GenerateRequest // title requests seen
}

func (g *titler) titleRequests() []GenerateRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]GenerateRequest(nil), g.titles...)
}

func isTitleRequest(req GenerateRequest) bool {
	return req.ConversationID == 0 && len(req.Messages) > 0 && strings.HasPrefix(req.Messages[0].Content, "You write short titles")
}

func (g *titler) Generate(ctx context.Context, req GenerateRequest, emit func(Piece) error) (GenerateStats, error) {
	if !isTitleRequest(req) {
		return g.reply.Generate(ctx, req, emit)
	}
	g.mu.Lock()
	g.titles = append(g.titles, req)
	g.mu.Unlock()
	if g.block {
		g.once.Do(func() { close(g.started) })
		<-ctx.Done()
		return GenerateStats{}, ctx.Err()
	}
	for _, w := range strings.SplitAfter(g.title, " ") {
		if err := emit(Piece{Text: w}); err != nil {
			return GenerateStats{}, err
		}
	}
	return GenerateStats{Stats: engine.Stats{Stats: spec.Stats{Stopped: "stop"}}}, nil
}

// titleEvents returns the conversation's title events so far.
func titleEvents(rec *recorder, id int64) []TitleEvent {
	var out []TitleEvent
	for _, e := range rec.named(EventTitle) {
		if te := e.(TitleEvent); te.ConversationID == id {
			out = append(out, te)
		}
	}
	return out
}

// sendAndWait sends text and waits for its reply's EventDone.
func sendAndWait(t *testing.T, a *App, rec *recorder, id int64, text string) DoneEvent {
	t.Helper()
	before := len(rec.named(EventDone))
	if _, err := a.Chat.Send(id, text); err != nil {
		t.Fatal(err)
	}
	return rec.waitCount(t, EventDone, before+1)[before].(DoneEvent)
}

func TestFirstMessageTitlesTheConversation(t *testing.T) {
	a, rec, dir := start(t, &scripted{pieces: []string{"ok"}})
	withModel(t, a, dir)
	c, _ := a.Chat.CreateConversation(NewConversation{})
	if c.Title != NewChatTitle || c.TitleSource != storage.TitleDefault {
		t.Fatalf("new conversation %q (source %q)", c.Title, c.TitleSource)
	}
	if _, err := a.Chat.Send(c.ID, "  # How do tides work?\nAnd why twice a day?"); err != nil {
		t.Fatal(err)
	}
	// The title is set as the message is stored, before the reply.
	ev := rec.waitFor(t, EventTitle).(TitleEvent)
	if ev != (TitleEvent{ConversationID: c.ID, Title: "How do tides work?", Source: storage.TitleMessage}) {
		t.Fatalf("title event %+v", ev)
	}
	rec.waitFor(t, EventDone)
	sendAndWait(t, a, rec, c.ID, "a second message")
	th, _ := a.Chat.Thread(c.ID)
	if th.Conversation.Title != "How do tides work?" || len(titleEvents(rec, c.ID)) != 1 {
		t.Fatalf("after a second message: title %q, %d title events", th.Conversation.Title, len(titleEvents(rec, c.ID)))
	}
	// A title the user gave is never replaced.
	named, _ := a.Chat.CreateConversation(NewConversation{Title: "Mine"})
	sendAndWait(t, a, rec, named.ID, "something else entirely")
	if th, _ := a.Chat.Thread(named.ID); th.Conversation.Title != "Mine" || th.Conversation.TitleSource != storage.TitleUser {
		t.Fatalf("user-titled conversation became %q (%s)", th.Conversation.Title, th.Conversation.TitleSource)
	}
	r, err := a.Chat.RenameConversation(c.ID, "Tides")
	if err != nil || r.TitleSource != storage.TitleUser {
		t.Fatalf("rename: %+v, %v", r, err)
	}
	if evs := titleEvents(rec, c.ID); evs[len(evs)-1].Title != "Tides" || evs[len(evs)-1].Source != storage.TitleUser {
		t.Fatalf("rename sent %+v", evs[len(evs)-1])
	}
}

func TestModelWritesTitleInTheBackground(t *testing.T) {
	gen := &titler{reply: &scripted{pieces: []string{"The moon pulls the sea."}}, title: "\"Tides and the Moon\".\nExtra"}
	a, rec, dir := start(t, gen)
	mdl := withModel(t, a, dir)
	p, _ := a.Settings.Get()
	p.ModelTitles = true
	if _, err := a.Settings.Update(p); err != nil {
		t.Fatal(err)
	}
	c, _ := a.Chat.CreateConversation(NewConversation{})
	sendAndWait(t, a, rec, c.ID, "why are there tides")
	// message title, then pending, then the model's title.
	evs := rec.waitCount(t, EventTitle, 3)
	want := []TitleEvent{
		{ConversationID: c.ID, Title: "why are there tides", Source: storage.TitleMessage},
		{ConversationID: c.ID, Title: "why are there tides", Source: storage.TitleMessage, Pending: true},
		{ConversationID: c.ID, Title: "Tides and the Moon", Source: storage.TitleModel},
	}
	for i, w := range want {
		if evs[i].(TitleEvent) != w {
			t.Fatalf("title event %d = %+v, want %+v", i, evs[i], w)
		}
	}
	th, _ := a.Chat.Thread(c.ID)
	if th.Conversation.Title != "Tides and the Moon" || th.Conversation.TitleSource != storage.TitleModel {
		t.Fatalf("stored title %q (%s)", th.Conversation.Title, th.Conversation.TitleSource)
	}
	// The title request ran the conversation's model, without speculation,
	// short, and saw the exchange.
	a.Chat.wait()
	trs := gen.titleRequests()
	if len(trs) != 1 {
		t.Fatalf("%d title requests, want 1", len(trs))
	}
	tr := trs[0]
	if tr.Model.ID != mdl.ID || tr.Width != 1 || tr.MaxTokens > 32 || !strings.Contains(tr.Messages[1].Content, "why are there tides") ||
		!strings.Contains(tr.Messages[1].Content, "The moon pulls the sea.") {
		t.Fatalf("title request %+v", tr)
	}
	// A later turn writes no new title.
	sendAndWait(t, a, rec, c.ID, "and the sun?")
	a.Chat.wait()
	if n := len(gen.titleRequests()); n != 1 {
		t.Fatalf("a second turn asked for another title (%d requests)", n)
	}
}

func TestModelTitleGivesWayToAReply(t *testing.T) {
	gen := &titler{reply: &scripted{pieces: []string{"answer"}}, block: true, started: make(chan struct{})}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	p, _ := a.Settings.Get()
	p.ModelTitles = true
	a.Settings.Update(p)
	c1, _ := a.Chat.CreateConversation(NewConversation{})
	sendAndWait(t, a, rec, c1.ID, "first conversation")
	<-gen.started // the title is being written
	// (No title for the next conversation: its job would wait forever.)
	p.ModelTitles = false
	a.Settings.Update(p)
	// A reply in another conversation starts at once: the title gives up.
	c2, _ := a.Chat.CreateConversation(NewConversation{})
	done := sendAndWait(t, a, rec, c2.ID, "second conversation")
	if done.Message == nil || done.Message.Content != "answer" {
		t.Fatalf("reply while a title was being written: %+v", done)
	}
	a.Chat.wait()
	evs := titleEvents(rec, c1.ID)
	last := evs[len(evs)-1]
	if last.Pending || last.Title != "first conversation" || last.Source != storage.TitleMessage {
		t.Fatalf("after giving up the title is %+v, want the first message's", last)
	}
	if a.Chat.CancelTitle(c1.ID) {
		t.Fatal("CancelTitle found a title still being written")
	}
	// CancelTitle stops one by hand.
	p.ModelTitles = true
	a.Settings.Update(p)
	c3, _ := a.Chat.CreateConversation(NewConversation{})
	gen.once, gen.started = sync.Once{}, make(chan struct{})
	sendAndWait(t, a, rec, c3.ID, "third")
	<-gen.started
	if !a.Chat.CancelTitle(c3.ID) {
		t.Fatal("CancelTitle found nothing")
	}
	a.Chat.wait()
	if th, _ := a.Chat.Thread(c3.ID); th.Conversation.Title != "third" {
		t.Fatalf("cancelled title: %q", th.Conversation.Title)
	}
}

func TestConversationRemembersItsModel(t *testing.T) {
	gen := &scripted{pieces: []string{"ok"}}
	a, rec, dir := start(t, gen)
	first := withModel(t, a, dir)
	writeOtherGGUF(t, filepath.Join(storage.ModelsPath(dir), "other.gguf"))
	if _, err := a.Models.Scan(); err != nil {
		t.Fatal(err)
	}
	list, _ := a.Models.List()
	var other storage.Model
	for _, m := range list.Models {
		if m.ID != first.ID {
			other = m
		}
	}
	c, _ := a.Chat.CreateConversation(NewConversation{})
	if c.ModelID != first.ID {
		t.Fatalf("new conversation model %d, want the default %d", c.ModelID, first.ID)
	}
	th, _ := a.Chat.Thread(c.ID)
	if th.Model == nil || th.Model.ID != first.ID {
		t.Fatalf("Thread.Model = %+v, want %d", th.Model, first.ID)
	}
	// Changing the default does not move an existing conversation.
	if err := a.Models.SetDefault(other.ID); err != nil {
		t.Fatal(err)
	}
	done := sendAndWait(t, a, rec, c.ID, "hi")
	if gen.last().Model.ID != first.ID {
		t.Fatalf("reply ran model %d, want the conversation's %d", gen.last().Model.ID, first.ID)
	}
	var st GenerateStats
	if err := json.Unmarshal(done.Message.Stats, &st); err != nil || st.Model != first.Name {
		t.Fatalf("stats model %q (%v), want %q", st.Model, err, first.Name)
	}
	// The picker switches it.
	if _, err := a.Chat.SetModel(c.ID, other.ID); err != nil {
		t.Fatal(err)
	}
	sendAndWait(t, a, rec, c.ID, "again")
	if gen.last().Model.ID != other.ID {
		t.Fatalf("after SetModel the reply ran %d, want %d", gen.last().Model.ID, other.ID)
	}
	// A conversation made before any model remembers the one that answers.
	b, brec, bdir := start(t, gen)
	bc, _ := b.Chat.CreateConversation(NewConversation{})
	bm := withModel(t, b, bdir)
	sendAndWait(t, b, brec, bc.ID, "hello")
	if th, _ := b.Chat.Thread(bc.ID); th.Conversation.ModelID != bm.ID {
		t.Fatalf("conversation model after the first reply: %d, want %d", th.Conversation.ModelID, bm.ID)
	}
}

func TestConversationOptionsOverrideSettings(t *testing.T) {
	gen := &scripted{pieces: []string{"ok"}}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	c, _ := a.Chat.CreateConversation(NewConversation{})
	temp, maxTok, width := 0.7, 33, Width(2)
	if _, err := a.Chat.SetOptions(c.ID, ConversationOptions{Temperature: &temp, MaxTokens: &maxTok, SpeculationWidth: &width}); err != nil {
		t.Fatal(err)
	}
	sendAndWait(t, a, rec, c.ID, "hi")
	if r := gen.last(); r.Temperature != 0.7 || r.MaxTokens != 33 || r.Width != 2 {
		t.Fatalf("request temperature %v, max %d, width %d; want 0.7, 33, 2", r.Temperature, r.MaxTokens, r.Width)
	}
	th, _ := a.Chat.Thread(c.ID)
	if th.Settings != (GenerationSettings{Temperature: 0.7, MaxTokens: 33, SpeculationWidth: 2}) {
		t.Fatalf("Thread.Settings = %+v", th.Settings)
	}
	// Auto, and back to the Settings page's values for the rest.
	auto := WidthAuto
	if _, err := a.Chat.SetOptions(c.ID, ConversationOptions{SpeculationWidth: &auto}); err != nil {
		t.Fatal(err)
	}
	sendAndWait(t, a, rec, c.ID, "again")
	p, _ := a.Settings.Get()
	if r := gen.last(); r.Width != 0 || r.MaxTokens != p.MaxTokens || r.Temperature != p.Temperature {
		t.Fatalf("request %+v, want auto width and the settings' max tokens and temperature", r)
	}
	bad := 3.0
	if _, err := a.Chat.SetOptions(c.ID, ConversationOptions{Temperature: &bad}); err == nil || !strings.Contains(err.Error(), "temperature 3") {
		t.Fatalf("temperature 3: %v", err)
	}
}

func TestPinAndDeleteWithUndo(t *testing.T) {
	clock := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	dir := t.TempDir()
	a := New(Options{DataDir: dir, Generator: &scripted{pieces: []string{"kept text"}}, Now: now})
	rec := newRecorder()
	a.Startup(context.Background(), rec)
	t.Cleanup(a.Shutdown)
	withModel(t, a, dir)
	c1, _ := a.Chat.CreateConversation(NewConversation{Title: "one"})
	c2, _ := a.Chat.CreateConversation(NewConversation{Title: "two"})
	c3, _ := a.Chat.CreateConversation(NewConversation{Title: "three"})
	if p, err := a.Chat.SetPinned(c1.ID, true); err != nil || !p.Pinned {
		t.Fatalf("SetPinned = %+v, %v", p, err)
	}
	list, _ := a.Chat.ListConversations()
	if list[0].ID != c1.ID {
		t.Fatalf("pinned conversation listed at %+v", list)
	}
	sendAndWait(t, a, rec, c2.ID, "searchable words")
	del, err := a.Chat.DeleteConversation(c2.ID)
	if err != nil || del.ConversationID != c2.ID || del.Title != "two" || !del.UndoUntil.Equal(now().Add(UndoWindow)) {
		t.Fatalf("DeleteConversation = %+v, %v", del, err)
	}
	list, _ = a.Chat.ListConversations()
	if len(list) != 2 {
		t.Fatalf("after delete %d conversations listed", len(list))
	}
	if hits, _ := a.Chat.Search("searchable"); len(hits) != 0 {
		t.Fatalf("a deleted conversation is still found: %+v", hits)
	}
	if _, err := a.Chat.Thread(c2.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Thread of a deleted conversation: %v", err)
	}
	advance(UndoWindow - time.Second)
	back, err := a.Chat.UndoDelete(c2.ID)
	if err != nil || back.ID != c2.ID {
		t.Fatalf("UndoDelete within the window = %+v, %v", back, err)
	}
	if th, err := a.Chat.Thread(c2.ID); err != nil || len(th.Messages) != 2 {
		t.Fatalf("restored thread %+v, %v", th, err)
	}
	if hits, _ := a.Chat.Search("searchable"); len(hits) != 1 {
		t.Fatalf("restored conversation not found again: %+v", hits)
	}
	// Past the window: no undo, and the next purge removes it for good.
	if _, err := a.Chat.DeleteConversation(c3.ID); err != nil {
		t.Fatal(err)
	}
	advance(UndoWindow + time.Second)
	if _, err := a.Chat.UndoDelete(c3.ID); !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), "cannot be brought back") {
		t.Fatalf("UndoDelete past the window: %v", err)
	}
	a.Chat.purge()
	d, _ := a.core.db()
	var n int
	if err := d.SQL().QueryRow("SELECT count(*) FROM conversations WHERE id = ?", c3.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("purged conversation rows: %d, %v", n, err)
	}
	if _, err := a.Chat.UndoDelete(c1.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("UndoDelete of a live conversation: %v", err)
	}
}

func TestSearchFoldsRegeneratedBranchesAndOpensTheHit(t *testing.T) {
	gen := &scripted{pieces: []string{"the same lighthouse answer"}}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	c, _ := a.Chat.CreateConversation(NewConversation{})
	first := sendAndWait(t, a, rec, c.ID, "tell me about a lighthouse")
	// Regenerate twice: three identical answers on three branches.
	var last DoneEvent
	for range 2 {
		before := len(rec.named(EventDone))
		if _, err := a.Chat.Regenerate(first.Message.ID); err != nil {
			t.Fatal(err)
		}
		last = rec.waitCount(t, EventDone, before+1)[before].(DoneEvent)
	}
	hits, err := a.Chat.Search("lighthouse answer")
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 {
		t.Fatalf("%d hits for three identical regenerations, want 1: %+v", len(hits), hits)
	}
	h := hits[0]
	if h.MessageID != last.Message.ID || !h.OnActiveBranch || h.Duplicates != 2 || h.Alternative != 3 || h.Alternatives != 3 {
		t.Fatalf("hit %+v: want the answer on screen (%d), 2 duplicates, alternative 3 of 3", h, last.Message.ID)
	}
	// The question matches too: one hit, not one per branch.
	if hits, _ := a.Chat.Search("tell lighthouse"); len(hits) != 1 || hits[0].Role != storage.RoleUser {
		t.Fatalf("question hits %+v", hits)
	}
	// A different answer on another branch is its own hit; opening it
	// selects its branch, opening one on screen changes nothing.
	gen.pieces = []string{"a different lighthouse reply"}
	before := len(rec.named(EventDone))
	if _, err := a.Chat.Regenerate(first.Message.ID); err != nil {
		t.Fatal(err)
	}
	other := rec.waitCount(t, EventDone, before+1)[before].(DoneEvent)
	if _, err := a.Chat.SelectBranch(last.Message.ID); err != nil {
		t.Fatal(err)
	}
	hits, _ = a.Chat.Search("lighthouse")
	var off *storage.SearchHit
	for i := range hits {
		if hits[i].MessageID == other.Message.ID {
			off = &hits[i]
		}
	}
	if off == nil || off.OnActiveBranch || off.Alternative != 4 {
		t.Fatalf("hits %+v: want the different reply, off the branch on screen, alternative 4", hits)
	}
	th, err := a.Chat.OpenMessage(other.Message.ID)
	if err != nil || th.Path[len(th.Path)-1] != other.Message.ID {
		t.Fatalf("OpenMessage(off-branch) path %v, %v", th.Path, err)
	}
	th, err = a.Chat.OpenMessage(first.Message.ParentID)
	if err != nil || th.Path[len(th.Path)-1] != other.Message.ID {
		t.Fatalf("OpenMessage(on the branch) moved the branch: %v, %v", th.Path, err)
	}
}

func TestStartFromPromptFillsVariables(t *testing.T) {
	gen := &scripted{pieces: []string{"ok"}}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	p, err := a.Library.Create(PromptInput{Title: "Explain", SystemPrompt: "You teach {{level}} students.", Body: "Explain {{topic}} simply. Use \\{{braces}}."})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Variables, ","); got != "level,topic" {
		t.Fatalf("variables %q", got)
	}
	if _, err := a.Chat.StartFromPrompt(p.ID, map[string]string{"level": "young"}); err == nil || !strings.Contains(err.Error(), "{{topic}}") {
		t.Fatalf("a missing value: %v", err)
	}
	if list, _ := a.Chat.ListConversations(); len(list) != 0 {
		t.Fatalf("a refused start left %d conversations", len(list))
	}
	turn, err := a.Chat.StartFromPrompt(p.ID, map[string]string{"level": "young", "topic": "tides"})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, EventDone)
	r := gen.last()
	if r.Messages[0].Content != "You teach young students." || r.Messages[1].Content != "Explain tides simply. Use {{braces}}." {
		t.Fatalf("the model saw %+v", r.Messages)
	}
	th, _ := a.Chat.Thread(turn.ConversationID)
	if th.Conversation.Title != "Explain" || th.Conversation.PromptID != p.ID || th.Conversation.TitleSource != storage.TitlePrompt {
		t.Fatalf("conversation %+v", th.Conversation)
	}
}

func TestDefaultSystemPromptStartsNewConversations(t *testing.T) {
	a, _, _ := start(t, nil)
	p, _ := a.Settings.Get()
	p.DefaultSystemPrompt = "Answer in French."
	if _, err := a.Settings.Update(p); err != nil {
		t.Fatal(err)
	}
	c, _ := a.Chat.CreateConversation(NewConversation{})
	if c.SystemPrompt != "Answer in French." {
		t.Fatalf("new conversation system prompt %q", c.SystemPrompt)
	}
	lp, _ := a.Library.Create(PromptInput{Title: "x", SystemPrompt: "Own.", Body: "b"})
	if c, _ := a.Chat.CreateConversation(NewConversation{PromptID: lp.ID}); c.SystemPrompt != "Own." {
		t.Fatalf("a prompt's conversation got %q", c.SystemPrompt)
	}
}
