package app

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine"
	"anechat/engine/cpu"
	"anechat/engine/load"
	"anechat/internal/sessions"
	"anechat/internal/testres"
	"anechat/storage"
)

func collect(t *testing.T, g *EngineGenerator, req GenerateRequest) (string, GenerateStats) {
	t.Helper()
	var b strings.Builder
	st, err := g.Generate(context.Background(), req, func(p Piece) error { b.WriteString(p.Text); return nil })
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return b.String(), st
}

func TestEngineGeneratorRunsStories260K(t *testing.T) {
	path := testres.Stories(t)
	g := NewEngineGenerator(nil)
	defer g.Close()
	req := GenerateRequest{Model: storage.Model{Path: path}, MaxTokens: 24, Width: 1,
		Messages: []ChatMessage{{Role: "user", Content: "Once upon a time"}}}
	plain, st := collect(t, g, req)
	if plain == "" || st.Tokens == 0 || st.Tokens > 24 || st.PrefillTokens == 0 {
		t.Fatalf("width 1: text %q, stats %+v", plain, st)
	}
	// Speculation is lossless: greedy text at width 4 and auto equals width 1.
	// One session serves every width: the same request again (a
	// regenerate) reuses its KV, whatever the width was.
	for _, w := range []int{4, 0} {
		req.Width = w
		got, st := collect(t, g, req)
		if got != plain {
			t.Fatalf("width %d gave %q, width 1 gave %q", w, got, plain)
		}
		if st.ResumedTokens == 0 || st.PrefillTokens != 1 {
			t.Fatalf("width %d after another width: stats %+v, want the prompt reused from the session but its last token", w, st)
		}
	}
	// The next turn of the same conversation reuses the session's KV: only
	// the new tokens are prefilled.
	req.Messages = append(req.Messages, ChatMessage{Role: "assistant", Content: plain}, ChatMessage{Role: "user", Content: "The end."})
	_, st2 := collect(t, g, req)
	if st2.PrefillTokens == 0 {
		t.Fatalf("second turn stats %+v", st2)
	}
	// Cancelling stops generation with the context's error.
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := g.Generate(ctx, GenerateRequest{Model: storage.Model{Path: path}, MaxTokens: 200, Width: 4,
		Messages: []ChatMessage{{Role: "user", Content: "Lily"}}}, func(Piece) error {
		n++
		if n == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n > 10 {
		t.Fatalf("after cancel: err %v, %d pieces", err, n)
	}
}

func TestEngineGeneratorNamesAMissingModel(t *testing.T) {
	g := NewEngineGenerator(nil)
	_, err := g.Generate(context.Background(), GenerateRequest{Model: storage.Model{Path: "/nonexistent/m.gguf"},
		Messages: []ChatMessage{{Role: "user", Content: "x"}}}, func(Piece) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/m.gguf") {
		t.Fatalf("err %v, want one naming the path", err)
	}
}

func TestChatWithTheEngineStoresARealReply(t *testing.T) {
	path := testres.Stories(t)
	g := NewEngineGenerator(nil)
	defer g.Close()
	a, rec, _ := start(t, g)
	m, err := a.Models.Register(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Settings.Update(Preferences{SpeculationWidth: 4, KVQuotaBytes: 1 << 30, DefaultModelID: m.ID, MaxTokens: 16}); err != nil {
		t.Fatal(err)
	}
	c, _ := a.Chat.CreateConversation(NewConversation{})
	if _, err := a.Chat.Send(c.ID, "Once upon a time"); err != nil {
		t.Fatal(err)
	}
	done := rec.waitFor(t, EventDone).(DoneEvent)
	var streamed string
	for _, e := range rec.named(EventToken) {
		streamed += e.(TokenEvent).Text
	}
	if done.Message == nil || done.Message.Content != streamed || done.Stats.Tokens == 0 {
		t.Fatalf("done %+v, streamed %q", done, streamed)
	}
}

func TestChatResumesAConversationFromItsKVSnapshotAfterARestart(t *testing.T) {
	path := testres.Stories(t)
	dir := t.TempDir()
	long := strings.Repeat("Lily went to the park with her mom and they played with a big red ball. ", 8)
	run := func(prep func(a *App, c int64)) (storage.Conversation, DoneEvent) {
		t.Helper()
		g := NewEngineGenerator(nil)
		defer g.Close()
		a := New(Options{DataDir: dir, Generator: g})
		rec := newRecorder()
		a.Startup(t.Context(), rec)
		defer a.Shutdown()
		cs, err := a.Chat.ListConversations()
		if err != nil {
			t.Fatal(err)
		}
		var c storage.Conversation
		if len(cs) == 0 {
			m, err := a.Models.Register(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Settings.Update(Preferences{SpeculationWidth: 4, KVQuotaBytes: 1 << 30, DefaultModelID: m.ID, MaxTokens: 8}); err != nil {
				t.Fatal(err)
			}
			if c, err = a.Chat.CreateConversation(NewConversation{}); err != nil {
				t.Fatal(err)
			}
		} else {
			c = cs[0]
		}
		prep(a, c.ID)
		return c, rec.waitFor(t, EventDone).(DoneEvent)
	}
	_, first := run(func(a *App, id int64) {
		if _, err := a.Chat.Send(id, long); err != nil {
			t.Fatal(err)
		}
	})
	if first.Stats.ResumedTokens != 0 || first.Stats.PrefillTokens < 64 {
		t.Fatalf("first turn %+v: want a full prefill of more than one block", first.Stats)
	}
	ents, err := os.ReadDir(storage.KVPath(dir))
	if err != nil || len(ents) == 0 {
		t.Fatalf("no KV snapshot file in %s after the first reply (%v)", storage.KVPath(dir), err)
	}
	// A new App and a new engine on the same data dir: the follow-up resumes
	// the stored prefix instead of prefilling the whole history again.
	_, second := run(func(a *App, id int64) {
		if _, err := a.Chat.Send(id, "The end."); err != nil {
			t.Fatal(err)
		}
	})
	if second.Message == nil || second.Stats.ResumedTokens < 64 || second.Stats.PrefillTokens >= first.Stats.PrefillTokens {
		t.Fatalf("second turn after restart %+v (first %+v): want most of the history resumed", second.Stats, first.Stats)
	}
}

// The default model of a fresh data dir is the SmolLM2 `make run` fetches:
// the app registers it at start and a chat with no model chosen runs on it.
func TestStartupMakesSmolLM2TheDefaultAndChatsWithIt(t *testing.T) {
	src := testres.SmolLM2GGUF(t)
	dir := t.TempDir()
	mdir := storage.ModelsPath(dir)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(src, filepath.Join(mdir, BundledChatModel)); err != nil {
		t.Fatal(err)
	}
	gen := NewEngineGenerator(nil)
	defer gen.Close()
	a, rec, _ := startIn(t, dir, gen)
	p, _ := a.Settings.Get()
	p.MaxTokens = 12
	if _, err := a.Settings.Update(p); err != nil {
		t.Fatal(err)
	}
	c, err := a.Chat.CreateConversation(NewConversation{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Chat.Send(c.ID, "What is the capital of France?"); err != nil {
		t.Fatal(err)
	}
	done := rec.waitFor(t, EventDone).(DoneEvent)
	if done.Message == nil || strings.TrimSpace(done.Message.Content) == "" || done.Stats.Tokens == 0 {
		t.Fatalf("reply %+v", done)
	}
	list, _ := a.Models.List()
	if len(list.Models) != 1 || list.DefaultID != list.Models[0].ID || list.Models[0].Name == "" {
		t.Fatalf("models %+v, want SmolLM2 registered as the default", list)
	}
	t.Logf("SmolLM2 (%s) replied %q", list.Models[0].Name, done.Message.Content)
}

// Pieces from accepted drafts say so: at width 4 SmolLM2 copying a sentence
// from the prompt is partly drafted, every drafted piece is an accepted draft
// token, and the text is still the width-1 text. (stories260K's drafts do not
// pay for their cost, so the gate turns them off there.)
// fixedCosts is an engine.CostStore holding given tables; it keeps nothing.
type fixedCosts map[string]string

func (f fixedCosts) SettingRaw(_ context.Context, key string) (json.RawMessage, bool, error) {
	v, ok := f[key]
	return json.RawMessage(v), ok, nil
}

func (f fixedCosts) SetSettingRaw(context.Context, string, json.RawMessage) error { return nil }

// smolCosts holds, for the model at path on this CPU's kernels, SmolLM2's
// call costs as measured on an idle machine (BENCHMARKS.md). The tests that
// check drafts were sent use it: costs measured under a shared machine's
// load could make the gate send nothing, or less in one generator than in
// another, and the test would fail for no fault of the code.
func smolCosts(t *testing.T, path string) fixedCosts {
	t.Helper()
	src, err := load.Detect(path)
	if err != nil {
		t.Fatal(err)
	}
	return fixedCosts{engine.CostsKey(src.Fingerprint, cpu.Kernels()): `{"widths":[1,2,3,4,5,6,7,8],"seconds":{"1":0.0109,"2":0.0112,"3":0.0130,"4":0.0148,"5":0.0170,"6":0.0192,"7":0.0213,"8":0.0235}}`}
}

// costedGenerator is a generator that uses costs instead of measuring.
// chatSession is the session the generator's last reply ran on.
func chatSession(t *testing.T, g *EngineGenerator) *engine.Session {
	t.Helper()
	m := g.run.Loaded()
	if m == nil {
		t.Fatal("no model loaded")
	}
	s, err := m.Session(sessions.Chat)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func costedGenerator(costs fixedCosts) *EngineGenerator {
	g := NewEngineGenerator(nil)
	g.UseStorage(nil, costs)
	return g
}

func TestEngineGeneratorMarksDraftedPieces(t *testing.T) {
	path := testres.SmolLM2GGUF(t)
	g := costedGenerator(smolCosts(t, path))
	defer g.Close()
	run := func(width int) (string, int, GenerateStats) {
		var b strings.Builder
		drafted := 0
		st, err := g.Generate(context.Background(), GenerateRequest{Model: storage.Model{Path: path}, MaxTokens: 30, Width: width,
			Messages: []ChatMessage{{Role: "user", Content: "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank."}}},
			func(p Piece) error {
				b.WriteString(p.Text)
				if p.Drafted {
					drafted++
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return b.String(), drafted, st
	}
	plain, d1, _ := run(1)
	if d1 != 0 {
		t.Fatalf("width 1 marked %d pieces drafted", d1)
	}
	spec, d4, st := run(4)
	if n := chatSession(t, g).Measurements(); n != 0 {
		t.Fatalf("width 4 measured the costs %d times instead of using the given table", n)
	}
	if spec != plain {
		t.Fatalf("width 4 gave %q, width 1 %q", spec, plain)
	}
	if d4 == 0 || d4 > st.Accepted || st.Accepted > st.Drafted {
		t.Fatalf("width 4: %d drafted pieces, stats %+v; want 0 < pieces <= accepted <= drafted", d4, st)
	}
}

// TestEngineGeneratorSaysWhyNoDrafts: a reply at width 4 that drafts nothing
// carries the reason in its stats (and so in the stats JSON Chat stores and
// the window's stats line shows): here a cost table in which every width
// costs what that many width-1 calls do, so no draft can pay (issue 23).
func TestEngineGeneratorSaysWhyNoDrafts(t *testing.T) {
	path := testres.Stories(t)
	src, err := load.Detect(path)
	if err != nil {
		t.Fatal(err)
	}
	g := costedGenerator(fixedCosts{engine.CostsKey(src.Fingerprint, cpu.Kernels()): `{"widths":[1,2,3,4,5,6,7,8],"seconds":{"1":0.001,"2":0.002,"3":0.003,"4":0.004,"5":0.005,"6":0.006,"7":0.007,"8":0.008}}`})
	defer g.Close()
	st, err := g.Generate(context.Background(), GenerateRequest{Model: storage.Model{Path: path}, MaxTokens: 40, Width: 4,
		Messages: []ChatMessage{{Role: "user", Content: "Once upon a time"}}}, func(Piece) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if st.Drafted != 0 || !strings.HasPrefix(st.DraftNote, "no drafts: ") {
		t.Fatalf("stats %+v: want no drafts and the reason", st)
	}
	raw, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(raw), `"draftNote":"no drafts: `) {
		t.Fatalf("stats JSON %s (%v): want the draft note", raw, err)
	}
}

func TestEngineGeneratorPiecesCountTokensAndCallsSoFar(t *testing.T) {
	// The window's live τ and drafted share come from each piece's counts:
	// they only grow, and the last piece's equal the reply's stats (but a
	// call that produced only the stop token, which no piece follows).
	path := testres.SmolLM2GGUF(t)
	g := costedGenerator(smolCosts(t, path))
	defer g.Close()
	for _, width := range []int{1, 4} {
		var last Piece
		n := 0
		st, err := g.Generate(context.Background(), GenerateRequest{Model: storage.Model{Path: path}, MaxTokens: 30, Width: width,
			Messages: []ChatMessage{{Role: "user", Content: "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank."}}},
			func(p Piece) error {
				if p.Tokens < last.Tokens || p.Accepted < last.Accepted || p.Calls < last.Calls || p.Tokens < n+1 || p.Accepted > p.Tokens || p.Calls > p.Tokens {
					t.Fatalf("width %d: piece %d counts %+v after %+v", width, n, p, last)
				}
				last = p
				n++
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		// A stop token comes from the call of the last piece, or from one
		// more call of its own.
		callsOK := last.Calls == st.TargetCalls || st.Stopped == "stop" && last.Calls == st.TargetCalls-1
		if last.Tokens != st.Tokens || last.Accepted != st.Accepted || !callsOK {
			t.Fatalf("width %d: last piece %+v, stats tokens %d accepted %d calls %d (%s)", width, last, st.Tokens, st.Accepted, st.TargetCalls, st.Stopped)
		}
		if width == 4 && st.Accepted == 0 {
			t.Fatalf("width 4 accepted no draft: %+v", st)
		}
	}
}

// Suffix matching over history and the library: a reply that repeats an
// earlier reply, or a library text, is drafted from the corpus (more tokens
// accepted than with prompt lookup alone) and stays identical to width 1.
func TestEngineGeneratorDraftsFromHistoryAndLibrary(t *testing.T) {
	path := testres.SmolLM2GGUF(t)
	q := []ChatMessage{{Role: "user", Content: "Write two sentences about the ocean."}}
	req := func(width int, library ...string) GenerateRequest {
		return GenerateRequest{Model: storage.Model{Path: path}, MaxTokens: 40, Width: width, Messages: q, Library: library}
	}
	// Width 1, and width 4 with an empty corpus: the baselines. Every
	// generator starts from the same call costs.
	costs := smolCosts(t, path)
	plainGen := costedGenerator(costs)
	defer plainGen.Close()
	want, _ := collect(t, plainGen, req(1))
	bare := costedGenerator(costs)
	defer bare.Close()
	got, base := collect(t, bare, req(4))
	if got != want {
		t.Fatalf("width 4 gave %q, width 1 %q", got, want)
	}
	// History: the same generator answered the question before, so its
	// corpus holds that reply.
	again, hist := collect(t, bare, req(4))
	if again != want || hist.Accepted <= base.Accepted {
		t.Fatalf("asked again: %q (stats %+v), first time accepted %d; want %q with more accepted", again, hist, base.Accepted, want)
	}
	// Library: a fresh generator whose library holds the reply's text.
	lib := costedGenerator(costs)
	defer lib.Close()
	fromLib, ls := collect(t, lib, req(4, "Some unrelated prompt.", want))
	if fromLib != want || ls.Accepted <= base.Accepted {
		t.Fatalf("with the library: %q (stats %+v), without accepted %d; want %q with more accepted", fromLib, ls, base.Accepted, want)
	}
	t.Logf("accepted: prompt lookup only %d/%d, history %d/%d, library %d/%d (of %d tokens)",
		base.Accepted, base.Drafted, hist.Accepted, hist.Drafted, ls.Accepted, ls.Drafted, base.Tokens)
}

// A long prompt's prefill reports progress per batched call, and cancelling
// during it stops it: no reply, the context's error.
func TestEngineGeneratorPrefillProgressAndCancel(t *testing.T) {
	path := testres.Stories(t)
	g := NewEngineGenerator(nil)
	defer g.Close()
	long := strings.Repeat("Lily and Tom played in the park with a big red ball. ", 12)
	var seen [][2]int
	req := GenerateRequest{Model: storage.Model{Path: path}, MaxTokens: 4, Width: 1,
		Messages: []ChatMessage{{Role: "user", Content: long}},
		Progress: func(done, total int) { seen = append(seen, [2]int{done, total}) }}
	_, st := collect(t, g, req)
	if len(seen) < 3 {
		t.Fatalf("progress %v for %d prefilled tokens, want one report per 64-token call", seen, st.PrefillTokens)
	}
	for i, p := range seen {
		if p[1] != st.PrefillTokens || p[0] <= 0 || (i > 0 && p[0] <= seen[i-1][0]) {
			t.Fatalf("progress %v, want increasing done of total %d", seen, st.PrefillTokens)
		}
	}
	if last := seen[len(seen)-1]; last[0] != last[1] {
		t.Fatalf("progress ends at %v, want done == total", last)
	}
	// Cancelled at the first report: the prefill stops, nothing is emitted.
	g2 := NewEngineGenerator(nil)
	defer g2.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls, pieces := 0, 0
	req.Progress = func(done, total int) { calls++; cancel() }
	_, err := g2.Generate(ctx, req, func(Piece) error { pieces++; return nil })
	if !errors.Is(err, context.Canceled) || calls != 1 || pieces != 0 {
		t.Fatalf("cancelled prefill: err %v, %d progress reports, %d pieces; want Canceled after 1 report, no pieces", err, calls, pieces)
	}
	// The generator still works afterwards.
	if got, _ := collect(t, g2, GenerateRequest{Model: storage.Model{Path: path}, MaxTokens: 4, Width: 1,
		Messages: []ChatMessage{{Role: "user", Content: "Once upon a time"}}}); got == "" {
		t.Fatal("no reply after a cancelled prefill")
	}
}

// A model file replaced on disk while loaded (a re-download) fails at most
// the reply that was running; the next reply loads the new file.
func TestEngineGeneratorReloadsAReplacedModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	data, err := os.ReadFile(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, data, 0o644)
	g := NewEngineGenerator(nil)
	defer g.Close()
	req := GenerateRequest{Model: storage.Model{Path: path}, MaxTokens: 16, Width: 1,
		Messages: []ChatMessage{{Role: "user", Content: "Once upon a time"}}}
	first, _ := collect(t, g, req)
	before := g.run.Loaded()
	// Replace it the way a download does: a new file renamed over the old.
	os.WriteFile(path+".tmp", data, 0o644)
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	again, _ := collect(t, g, req)
	if g.run.Loaded() == before || again != first {
		t.Fatalf("after replacing the file: reloaded %v, text %q, want %q", g.run.Loaded() != before, again, first)
	}
}
