package app

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"

	"anechat/engine"
	"anechat/engine/spec"
	"anechat/storage"
)

// scripted is a test Generator: it replies with fixed pieces, records each
// request, and can block after the first piece until cancelled, or fail.
type scripted struct {
	pieces  []string
	drafted []bool // drafted[i]: piece i came from a draft (missing: false)
	block   bool   // after the first piece, wait for ctx
	fail    error  // returned after the pieces
	mu      sync.Mutex
	reqs    []GenerateRequest
	sent    chan struct{} // closed after the first piece when block is set
}

func (s *scripted) Generate(ctx context.Context, req GenerateRequest, emit func(Piece) error) (GenerateStats, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	st := GenerateStats{Stats: engine.Stats{PrefillTokens: 3}}
	if req.Progress != nil {
		req.Progress(2, 3)
		req.Progress(3, 3)
	}
	accepted := 0
	for i, p := range s.pieces {
		d := i < len(s.drafted) && s.drafted[i]
		if d {
			accepted++
		}
		// Counts as a verify loop makes them: a drafted piece costs no call.
		if err := emit(Piece{Token: spec.Token{Drafted: d, Tokens: i + 1, Accepted: accepted, Calls: i + 1 - accepted}, Text: p}); err != nil {
			return st, err
		}
		st.Tokens++
		if s.block && i == 0 {
			close(s.sent)
			<-ctx.Done()
			return st, ctx.Err()
		}
	}
	st.Stopped = "stop"
	return st, s.fail
}

func (s *scripted) last() GenerateRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[len(s.reqs)-1]
}

// withModel registers a model file and makes it the default.
func withModel(t *testing.T, a *App, dir string) storage.Model {
	t.Helper()
	writeGGUF(t, filepath.Join(storage.ModelsPath(dir), "m.gguf"))
	res, err := a.Models.Scan()
	if err != nil || len(res.Registered) != 1 {
		t.Fatalf("Scan = %+v, %v", res, err)
	}
	return res.Registered[0]
}

func TestSendWithoutEngineOrModelStoresNothing(t *testing.T) {
	a, _, dir := start(t, nil)
	c, err := a.Chat.CreateConversation(NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Chat.Send(c.ID, "hello"); !errors.Is(err, ErrNoEngine) {
		t.Fatalf("Send without an engine: %v, want ErrNoEngine", err)
	}
	b, _, dir2 := start(t, &scripted{pieces: []string{"x"}})
	c2, _ := b.Chat.CreateConversation(NewConversation{})
	if _, err := b.Chat.Send(c2.ID, "hello"); !errors.Is(err, ErrNoModel) {
		t.Fatalf("Send without a model: %v, want ErrNoModel", err)
	}
	for _, x := range []struct {
		a  *App
		id int64
	}{{a, c.ID}, {b, c2.ID}} {
		th, err := x.a.Chat.Thread(x.id)
		if err != nil || len(th.Messages) != 0 {
			t.Fatalf("after a refused send the thread holds %+v (%v), want nothing", th.Messages, err)
		}
	}
	_, _ = dir, dir2
}

func TestSendStreamsTokensAndStoresTheReply(t *testing.T) {
	gen := &scripted{pieces: []string{"Hel", "lo", " there"}}
	a, rec, dir := start(t, gen)
	mdl := withModel(t, a, dir)
	p, _ := a.Library.Create(PromptInput{Title: "Pirate", SystemPrompt: "Talk like a pirate."})
	c, err := a.Chat.CreateConversation(NewConversation{PromptID: p.ID})
	if err != nil || c.Title != "Pirate" || c.SystemPrompt != "Talk like a pirate." {
		t.Fatalf("CreateConversation from a prompt = %+v, %v", c, err)
	}
	if _, err := a.Settings.Update(Preferences{SpeculationWidth: 6, KVQuotaBytes: 1 << 30, DefaultModelID: mdl.ID, MaxTokens: 50}); err != nil {
		t.Fatal(err)
	}
	turn, err := a.Chat.Send(c.ID, "Hi!")
	if err != nil {
		t.Fatal(err)
	}
	if turn.User.Role != storage.RoleUser || turn.User.Content != "Hi!" || turn.User.ParentID != 0 {
		t.Fatalf("turn %+v", turn)
	}
	done := rec.waitFor(t, EventDone).(DoneEvent)
	var text string
	for i, e := range rec.named(EventToken) {
		te := e.(TokenEvent)
		if te.ConversationID != c.ID || te.ParentID != turn.User.ID || te.Seq != i {
			t.Fatalf("token event %+v for the wrong stream", te)
		}
		text += te.Text
	}
	if text != "Hello there" {
		t.Fatalf("streamed %q, want %q", text, "Hello there")
	}
	var prog []ProgressEvent
	for _, e := range rec.named(EventProgress) {
		prog = append(prog, e.(ProgressEvent))
	}
	if wantProg := []ProgressEvent{{c.ID, turn.User.ID, 2, 3}, {c.ID, turn.User.ID, 3, 3}}; !slices.Equal(prog, wantProg) {
		t.Fatalf("progress events %+v, want %+v", prog, wantProg)
	}
	if done.Message == nil || done.Message.Content != "Hello there" || done.Message.ParentID != turn.User.ID || done.Message.Role != storage.RoleAssistant {
		t.Fatalf("done %+v", done)
	}
	var st GenerateStats
	if err := json.Unmarshal(done.Message.Stats, &st); err != nil || st.Tokens != 3 || st.Width != 6 || st.Stopped != "stop" {
		t.Fatalf("stored stats %s (%v)", done.Message.Stats, err)
	}
	req := gen.last()
	if req.Model.ID != mdl.ID || req.Width != 6 || req.MaxTokens != 50 || len(req.Messages) != 2 ||
		req.Messages[0] != (ChatMessage{"system", "Talk like a pirate."}) || req.Messages[1] != (ChatMessage{"user", "Hi!"}) {
		t.Fatalf("generator got %+v", req)
	}
	th, err := a.Chat.Thread(c.ID)
	if err != nil || len(th.Path) != 2 || th.Path[1] != done.Message.ID || th.Generating != 0 {
		t.Fatalf("thread %+v, %v", th, err)
	}
	hits, err := a.Chat.Search("there")
	if err != nil || len(hits) != 1 || hits[0].MessageID != done.Message.ID {
		t.Fatalf("Search = %+v, %v", hits, err)
	}
}

func TestEditAndRegenerateMakeBranches(t *testing.T) {
	gen := &scripted{pieces: []string{"answer"}}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	c, _ := a.Chat.CreateConversation(NewConversation{Title: "branches"})
	send := func(f func() (Turn, error)) (Turn, storage.Message) {
		t.Helper()
		before := len(rec.named(EventDone))
		turn, err := f()
		if err != nil {
			t.Fatal(err)
		}
		rec.waitCount(t, EventDone, before+1)
		return turn, *rec.named(EventDone)[before].(DoneEvent).Message
	}
	q1, a1 := send(func() (Turn, error) { return a.Chat.Send(c.ID, "first question") })
	q2, a2 := send(func() (Turn, error) { return a.Chat.Send(c.ID, "follow-up") })
	if q2.User.ParentID != a1.ID {
		t.Fatalf("follow-up parent %d, want the first answer %d", q2.User.ParentID, a1.ID)
	}
	// Edit the first question: a sibling of q1, and the model sees only it.
	e1, ea := send(func() (Turn, error) { return a.Chat.Edit(q1.User.ID, "first question, edited") })
	if e1.User.ParentID != q1.User.ParentID || e1.User.ID == q1.User.ID {
		t.Fatalf("edit %+v is not a sibling of %+v", e1.User, q1.User)
	}
	if msgs := gen.last().Messages; len(msgs) != 1 || msgs[0].Content != "first question, edited" {
		t.Fatalf("after the edit the model saw %+v", msgs)
	}
	th, _ := a.Chat.Thread(c.ID)
	if len(th.Messages) != 6 || len(th.Path) != 2 || th.Path[0] != e1.User.ID || th.Path[1] != ea.ID {
		t.Fatalf("thread after edit: %d messages, path %v", len(th.Messages), th.Path)
	}
	// Back to the original branch: its newest leaf is the follow-up's answer.
	th, err := a.Chat.SelectBranch(q1.User.ID)
	if err != nil || len(th.Path) != 4 || th.Path[3] != a2.ID {
		t.Fatalf("SelectBranch(q1) path %v, %v; want it to end at %d", th.Path, err, a2.ID)
	}
	// Regenerate the follow-up's answer: a sibling of a2 under q2.
	_, r2 := send(func() (Turn, error) { return a.Chat.Regenerate(a2.ID) })
	if r2.ParentID != q2.User.ID || r2.ID == a2.ID {
		t.Fatalf("regenerated %+v, want a new child of %d", r2, q2.User.ID)
	}
	if msgs := gen.last().Messages; len(msgs) != 3 || msgs[2].Content != "follow-up" {
		t.Fatalf("regenerate sent %+v, want the branch up to the follow-up", msgs)
	}
	th, _ = a.Chat.Thread(c.ID)
	if th.Path[len(th.Path)-1] != r2.ID {
		t.Fatalf("active leaf %v, want the regenerated answer %d", th.Path, r2.ID)
	}
	if _, err := a.Chat.Edit(a2.ID, "x"); err == nil {
		t.Fatal("Edit of an assistant message succeeded")
	}
	if _, err := a.Chat.Regenerate(q2.User.ID); err == nil {
		t.Fatal("Regenerate of a user message succeeded")
	}
}

func TestCancelKeepsPartialReplyAndBusyIsRefused(t *testing.T) {
	gen := &scripted{pieces: []string{"partial", " never"}, block: true, sent: make(chan struct{})}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	c, _ := a.Chat.CreateConversation(NewConversation{})
	turn, err := a.Chat.Send(c.ID, "tell me a long story")
	if err != nil {
		t.Fatal(err)
	}
	<-gen.sent
	if _, err := a.Chat.Send(c.ID, "again"); !errors.Is(err, ErrBusy) {
		t.Fatalf("second Send while generating: %v, want ErrBusy", err)
	}
	if th, _ := a.Chat.Thread(c.ID); th.Generating != turn.User.ID {
		t.Fatalf("Thread.Generating = %d, want %d", th.Generating, turn.User.ID)
	}
	if !a.Chat.Cancel(c.ID) {
		t.Fatal("Cancel found nothing running")
	}
	done := rec.waitFor(t, EventDone).(DoneEvent)
	if done.Stats.Stopped != "cancelled" || done.Message == nil || done.Message.Content != "partial" {
		t.Fatalf("done after cancel %+v", done)
	}
	if len(rec.named(EventError)) != 0 {
		t.Fatalf("cancel also sent errors %v", rec.named(EventError))
	}
	if a.Chat.Cancel(c.ID) {
		t.Fatal("second Cancel found something running")
	}
}

func TestDeleteConversationStopsItsGeneration(t *testing.T) {
	gen := &scripted{pieces: []string{"partial", " never"}, block: true, sent: make(chan struct{})}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	c, _ := a.Chat.CreateConversation(NewConversation{})
	if _, err := a.Chat.Send(c.ID, "go on"); err != nil {
		t.Fatal(err)
	}
	<-gen.sent
	if _, err := a.Chat.DeleteConversation(c.ID); err != nil {
		t.Fatal(err)
	}
	// The stream ended (its partial reply was written, then deleted with the rest).
	rec.waitFor(t, EventDone)
	if a.Chat.Cancel(c.ID) {
		t.Fatal("a generation still runs for the deleted conversation")
	}
	if _, err := a.Chat.Thread(c.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Thread after delete: %v", err)
	}
}

func TestGeneratorErrorIsAnEventAndStoresNoReply(t *testing.T) {
	gen := &scripted{pieces: []string{"half"}, fail: errors.New("backend exploded")}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	c, _ := a.Chat.CreateConversation(NewConversation{})
	turn, err := a.Chat.Send(c.ID, "q")
	if err != nil {
		t.Fatal(err)
	}
	ev := rec.waitFor(t, EventError).(ErrorEvent)
	if ev.ParentID != turn.User.ID || ev.Error != "backend exploded" {
		t.Fatalf("error event %+v", ev)
	}
	th, _ := a.Chat.Thread(c.ID)
	if len(th.Messages) != 1 {
		t.Fatalf("after a failed generation the thread holds %d messages, want the question only", len(th.Messages))
	}
}

func TestConversationCRUD(t *testing.T) {
	a, _, _ := start(t, nil)
	c1, _ := a.Chat.CreateConversation(NewConversation{Title: "one"})
	c2, _ := a.Chat.CreateConversation(NewConversation{})
	if c2.Title != "New chat" {
		t.Fatalf("untitled conversation is called %q", c2.Title)
	}
	if _, err := a.Chat.CreateConversation(NewConversation{ModelID: 5}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("create with an unknown model: %v", err)
	}
	r, err := a.Chat.RenameConversation(c1.ID, "  renamed ")
	if err != nil || r.Title != "renamed" {
		t.Fatalf("Rename = %+v, %v", r, err)
	}
	if _, err := a.Chat.RenameConversation(c1.ID, " "); err == nil {
		t.Fatal("rename to blank succeeded")
	}
	s, err := a.Chat.SetSystemPrompt(c1.ID, "Be brief.")
	if err != nil || s.SystemPrompt != "Be brief." || s.Title != "renamed" {
		t.Fatalf("SetSystemPrompt = %+v, %v", s, err)
	}
	// Both listed (the order is by update time, which ties within a millisecond here).
	list, err := a.Chat.ListConversations()
	if err != nil || len(list) != 2 || list[0].ID+list[1].ID != c1.ID+c2.ID {
		t.Fatalf("List = %+v, %v; want both conversations", list, err)
	}
	if _, err := a.Chat.DeleteConversation(c1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Chat.Thread(c1.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Thread of a deleted conversation: %v", err)
	}
	if list, _ := a.Chat.ListConversations(); len(list) != 1 || list[0].ID != c2.ID {
		t.Fatalf("after delete: %+v", list)
	}
}

func TestDraftedPiecesAreMarkedAndTheirSpansStored(t *testing.T) {
	// "é" and "😀" are 1 and 2 UTF-16 units: spans count what JavaScript counts.
	gen := &scripted{pieces: []string{"A", "é", "😀", "b", "c", "d"}, drafted: []bool{false, true, true, false, true, true}}
	a, rec, dir := start(t, gen)
	withModel(t, a, dir)
	c, _ := a.Chat.CreateConversation(NewConversation{})
	if _, err := a.Chat.Send(c.ID, "go"); err != nil {
		t.Fatal(err)
	}
	done := rec.waitFor(t, EventDone).(DoneEvent)
	var flags []bool
	var counts [][3]int
	for _, e := range rec.named(EventToken) {
		te := e.(TokenEvent)
		flags = append(flags, te.Drafted)
		counts = append(counts, [3]int{te.Tokens, te.Accepted, te.Calls})
	}
	if !slices.Equal(flags, gen.drafted) {
		t.Fatalf("token events drafted %v, want %v", flags, gen.drafted)
	}
	// The generator's counts so far reach the window with each piece.
	if want := [][3]int{{1, 0, 1}, {2, 1, 1}, {3, 2, 1}, {4, 2, 2}, {5, 3, 2}, {6, 4, 2}}; !slices.Equal(counts, want) {
		t.Fatalf("token events' tokens/accepted/calls %v, want %v", counts, want)
	}
	want := [][2]int{{1, 4}, {5, 7}}
	var st GenerateStats
	if err := json.Unmarshal(done.Message.Stats, &st); err != nil || !reflect.DeepEqual(st.DraftedSpans, want) {
		t.Fatalf("stored stats %s (%v), want drafted spans %v", done.Message.Stats, err, want)
	}
	// The spans survive a reload of the thread.
	th, _ := a.Chat.Thread(c.ID)
	last := th.Messages[len(th.Messages)-1]
	if err := json.Unmarshal(last.Stats, &st); err != nil || !reflect.DeepEqual(st.DraftedSpans, want) {
		t.Fatalf("reloaded stats %s (%v)", last.Stats, err)
	}
}
