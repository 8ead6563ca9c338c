package sessions

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"weak"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/spec"
	"anechat/internal/backends"
	"anechat/internal/testres"
)

// reply runs one Reply of up to n tokens; stopAfter > 0 ends it with emit's
// error after that many tokens.
func reply(t *testing.T, r *Manager, mode Mode, prompt func(*Model) []int32, n, stopAfter int, stopErr error) (engine.Stats, []int32, *Model, error) {
	t.Helper()
	var got []int32
	var st engine.Stats
	var m *Model
	err := r.Do(context.Background(), testres.Stories(t), func(mm *Model) error {
		m = mm
		var err error
		st, err = mm.Reply(context.Background(), Request{Mode: mode, Prompt: prompt(mm),
			Options: engine.GenerateOptions{MaxTokens: n, Width: 1},
			Emit: func(tk engine.Token) error {
				if tk.ID >= 0 {
					got = append(got, tk.ID)
				}
				if stopAfter > 0 && len(got) == stopAfter {
					return stopErr
				}
				return nil
			}})
		return err
	})
	return st, got, m, err
}

func TestModesKeepTheirOwnSessions(t *testing.T) {
	r := New(nil, nil)
	defer r.Close()
	raw := func(m *Model) []int32 { return engine.RawPrompt(m.Tokenizer(), "Once upon a time") }
	// stories260K's reference run: BOS + the text, greedy.
	_, got, m, err := reply(t, r, Raw, raw, 20, 0, nil)
	if err != nil || !slices.Equal(got, testres.StoriesGreedy()[:20]) {
		t.Fatalf("raw reply %v, %v; want the reference's first 20 ids", got, err)
	}
	rawSession, _ := m.Session(Raw)
	chatPrompt := func(m *Model) []int32 {
		ids, err := m.Render(context.Background(), []chat.Message{{Role: chat.RoleUser, Content: "Lily"}})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if _, _, _, err := reply(t, r, Chat, chatPrompt, 5, 0, nil); err != nil {
		t.Fatal(err)
	}
	chatSession, _ := m.Session(Chat)
	if rawSession == chatSession || !slices.Equal(rawSession.Tokens()[:len(testres.StoriesPrompt())], testres.StoriesPrompt()) {
		t.Fatal("the chat reply did not run on a session of its own")
	}
	// The raw prompt again resumes from its session: only the last token
	// is fed again.
	st, again, _, err := reply(t, r, Raw, raw, 20, 0, nil)
	if err != nil || !slices.Equal(again, got) || st.PrefillTokens != 1 {
		t.Fatalf("raw again: %v (%+v), %v", again, st, err)
	}
	// NoResume: the whole prompt, every time.
	r.NoResume()
	st, again, _, err = reply(t, r, Raw, raw, 20, 0, nil)
	if err != nil || !slices.Equal(again, got) || st.PrefillTokens != len(testres.StoriesPrompt()) || st.ResumedTokens != 0 {
		t.Fatalf("raw again without resume: %v (%+v), %v", again, st, err)
	}
}

// ErrEnough ends a reply as complete and keeps the session; another error
// from emit ends it with that error and starts the session over.
func TestReplyEndings(t *testing.T) {
	r := New(nil, nil)
	defer r.Close()
	raw := func(m *Model) []int32 { return engine.RawPrompt(m.Tokenizer(), "Once upon a time") }
	st, got, m, err := reply(t, r, Raw, raw, 40, 3, ErrEnough)
	s, _ := m.Session(Raw)
	if err != nil || st.Stopped != "stop" || len(got) != 3 || len(s.Tokens()) != len(testres.StoriesPrompt())+3 {
		t.Fatalf("ErrEnough: %v, stopped %q, %d ids, session of %d", err, st.Stopped, len(got), len(s.Tokens()))
	}
	gone := errors.New("client gone")
	_, _, _, err = reply(t, r, Raw, raw, 40, 3, gone)
	if !errors.Is(err, gone) || len(s.Tokens()) != 0 {
		t.Fatalf("another error: %v, session of %d; want the error and an empty session", err, len(s.Tokens()))
	}
}

// A caller waiting for the manager gives up when its context ends; fn does
// not run.
func TestDoGivesUpWaiting(t *testing.T) {
	r := New(nil, nil)
	defer r.Close()
	inside, release := make(chan struct{}), make(chan struct{})
	go r.Do(context.Background(), testres.Stories(t), func(*Model) error {
		close(inside)
		<-release
		return nil
	})
	<-inside
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	done := make(chan error)
	go func() { done <- r.Do(ctx, testres.Stories(t), func(*Model) error { ran = true; return nil }) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("waiting caller: %v, ran %v; want Canceled without running", err, ran)
	}
	close(release)
	if err := r.Do(context.Background(), testres.Stories(t), func(*Model) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// Preload loads the model once (a second Preload finds it loaded and
// reports it done) and a later Do runs on that same load; UseRegistry unloads the loaded model only when
// reload says so of its backend, and the next Do loads it through the new
// registry.
func TestPreloadAndUseRegistry(t *testing.T) {
	r := New(nil, nil)
	defer r.Close()
	if err := r.Preload(context.Background(), testres.Stories(t), nil); err != nil {
		t.Fatal(err)
	}
	first := r.Loaded()
	var last [2]int
	if err := r.Preload(context.Background(), testres.Stories(t), func(done, total int) { last = [2]int{done, total} }); err != nil {
		t.Fatal(err)
	}
	if first == nil || r.Loaded() != first || last != [2]int{1, 1} {
		t.Fatalf("Preload twice: loaded %v, the same %v, last progress %v; want one load reported done", first != nil, r.Loaded() == first, last)
	}
	if err := r.Do(context.Background(), testres.Stories(t), func(m *Model) error {
		if m != first {
			t.Error("Do loaded the preloaded model again")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.UseRegistry(backends.Registry(), func(model.Backend) bool { return false })
	if r.Loaded() != first {
		t.Fatal("UseRegistry unloaded a model reload did not ask for")
	}
	r.UseRegistry(backends.Registry(), func(model.Backend) bool { return true })
	if r.Loaded() != nil {
		t.Fatal("UseRegistry kept a model reload asked to unload")
	}
	if err := r.Do(context.Background(), testres.Stories(t), func(m *Model) error {
		if m == first {
			t.Error("Do ran on the unloaded model")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.UseRegistry(backends.Registry(), func(model.Backend) bool { return true })
	if err := r.Preload(ctx, testres.Stories(t), nil); err == nil || r.Loaded() != nil {
		t.Fatalf("a cancelled Preload: %v, loaded %v; want an error and no model", err, r.Loaded() != nil)
	}
}

// TestSnapshotMeta: snapshots of chat, raw and ids prompts are bound apart,
// to the model, and to the tokenizer and template that made the ids, with
// the values the CLI bound them with before it ran on a Manager (so the
// snapshots already in a data directory still serve).
func TestSnapshotMeta(t *testing.T) {
	r := New(nil, nil)
	defer r.Close()
	err := r.Do(context.Background(), testres.Stories(t), func(m *Model) error {
		c, raw, ids := m.SnapshotMeta(Chat), m.SnapshotMeta(Raw), m.SnapshotMeta(IDs)
		fp, tok := m.Backend().Config().Fingerprint, m.Tokenizer().Fingerprint()
		if fp == "" || c.Model != fp || raw.Model != fp || ids.Model != fp {
			t.Errorf("model fingerprints %q %q %q, want %q", c.Model, raw.Model, ids.Model, fp)
		}
		if tok == "" || c.Tokenizer != tok || raw.Tokenizer != tok || ids.Tokenizer != "none" {
			t.Errorf("tokenizer bindings %q %q %q", c.Tokenizer, raw.Tokenizer, ids.Tokenizer)
		}
		if c.Template != "chat:"+m.Template().Hash() || raw.Template != "raw" || ids.Template != "ids" {
			t.Errorf("template bindings %q %q %q", c.Template, raw.Template, ids.Template)
		}
		for _, mode := range []Mode{Chat, Raw, IDs} {
			if s, err := m.Session(mode); err != nil || s == nil {
				t.Errorf("mode %d: session %v, %v", mode, s, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// chatTurn answers msgs on r as a client of the API would (greedy, width 1,
// n tokens) and returns the reply's ids and stats.
func chatTurn(t *testing.T, r *Manager, msgs []chat.Message, n int) ([]int32, engine.Stats) {
	t.Helper()
	st, got, _, err := reply(t, r, Chat, func(m *Model) []int32 {
		ids, err := m.Render(context.Background(), msgs)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}, n, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got, st
}

// TestInterleavedConversationsResume: three conversations take turns on one
// manager (an editor, an agent and the app on one server), with no
// snapshots on disk to fall back on; each next turn still resumes the whole
// prompt of its conversation's last turn from memory, and writes what a
// fresh manager writes.
func TestInterleavedConversationsResume(t *testing.T) {
	r := New(nil, nil)
	defer r.Close()
	// Openings long enough that the next turn, which stories260K's plain
	// template renders with a newline after the reply, shares most of its
	// prompt with what the session holds.
	convs := [][]chat.Message{
		{{Role: chat.RoleUser, Content: "Lily and Tom played in the park with a big red ball all day long"}},
		{{Role: chat.RoleUser, Content: "The little dog ran to the tree and barked at the bird in the sun"}},
		{{Role: chat.RoleUser, Content: "Mom gave Sue a cake and a cup of milk and they sat in the garden"}},
	}
	prev := make([]int, len(convs)) // the prompt of each one's last turn
	for round := range 3 {
		for i := range convs {
			got, st := chatTurn(t, r, convs[i], 8)
			if round > 0 && st.ResumedTokens < prev[i] {
				t.Errorf("conversation %d, turn %d after the others' turns: resumed %d, prefilled %d; want at least its last prompt's %d resumed",
					i, round+1, st.ResumedTokens, st.PrefillTokens, prev[i])
			}
			prev[i] = st.ResumedTokens + st.PrefillTokens
			fresh := New(nil, nil)
			want, fst := chatTurn(t, fresh, convs[i], 8)
			fresh.Close()
			if !slices.Equal(got, want) || fst.ResumedTokens != 0 {
				t.Errorf("conversation %d, turn %d: %v; a fresh manager wrote %v", i, round+1, got, want)
			}
			var text string
			_ = r.Do(context.Background(), testres.Stories(t), func(m *Model) error { text = m.Tokenizer().Decode(got); return nil })
			convs[i] = append(convs[i], chat.Message{Role: chat.RoleAssistant, Content: text}, chat.Message{Role: chat.RoleUser, Content: "And then?"})
		}
	}
}

// warm returns what r keeps warm.
func warm(t *testing.T, r *Manager) Warm {
	t.Helper()
	var w Warm
	if err := r.Do(context.Background(), testres.Stories(t), func(m *Model) error { w = m.Warm(); return nil }); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestWarmBound: past Warm's count or bytes the least recently used
// sessions go, their KV caches with them (garbage once dropped); a dropped
// conversation's next turn prefills again and writes the same, a kept one
// resumes; KeepWarm drops sessions at once and refuses a bound of nothing.
func TestWarmBound(t *testing.T) {
	r := New(nil, nil)
	defer r.Close()
	for _, w := range []Warm{{Sessions: 0, Bytes: 1 << 20}, {Sessions: 2, Bytes: 0}} {
		if err := r.KeepWarm(w); err == nil {
			t.Errorf("KeepWarm(%+v) accepted", w)
		}
	}
	if err := r.KeepWarm(Warm{Sessions: 2, Bytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	convs := [][]chat.Message{
		{{Role: chat.RoleUser, Content: "Lily and Tom played in the park with a big red ball all day long"}},
		{{Role: chat.RoleUser, Content: "The little dog ran to the tree and barked at the bird in the sun"}},
		{{Role: chat.RoleUser, Content: "Mom gave Sue a cake and a cup of milk and they sat in the garden"}},
	}
	next := func(i int, got []int32) {
		var text string
		_ = r.Do(context.Background(), testres.Stories(t), func(m *Model) error { text = m.Tokenizer().Decode(got); return nil })
		convs[i] = append(convs[i], chat.Message{Role: chat.RoleAssistant, Content: text}, chat.Message{Role: chat.RoleUser, Content: "And then?"})
	}
	var first weak.Pointer[kv.Cache]
	for i := range convs {
		got, _ := chatTurn(t, r, convs[i], 8)
		if i == 0 {
			_ = r.Do(context.Background(), testres.Stories(t), func(m *Model) error {
				s, _ := m.Session(Chat)
				first = weak.Make(s.Cache())
				return nil
			})
		}
		next(i, got)
	}
	if w := warm(t, r); w.Sessions != 2 {
		t.Fatalf("three conversations with a bound of 2 sessions: %+v kept", w)
	}
	runtime.GC()
	if first.Value() != nil {
		t.Fatal("the dropped session's KV cache is still reachable")
	}
	// The last one is warm; the first was dropped and starts over.
	got, st := chatTurn(t, r, convs[2], 8)
	if st.ResumedTokens == 0 {
		t.Errorf("the kept conversation's next turn: %+v; want it resumed", st)
	}
	_ = got
	got, st = chatTurn(t, r, convs[0], 8)
	fresh := New(nil, nil)
	want, _ := chatTurn(t, fresh, convs[0], 8)
	fresh.Close()
	if st.ResumedTokens != 0 || !slices.Equal(got, want) {
		t.Errorf("the dropped conversation's next turn: %v resumed %d; want %v from scratch", got, st.ResumedTokens, want)
	}

	// Bytes: every session here holds the same first allocation, so a
	// bound of two sessions' bytes keeps two, whatever the count allows.
	if err := r.KeepWarm(Warm{Sessions: 1, Bytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	one := warm(t, r)
	if one.Sessions != 1 || one.Bytes <= 0 {
		t.Fatalf("KeepWarm(1 session): %+v kept", one)
	}
	if err := r.KeepWarm(Warm{Sessions: 8, Bytes: 2 * one.Bytes}); err != nil {
		t.Fatal(err)
	}
	for i := range convs {
		chatTurn(t, r, convs[i], 8)
	}
	if w := warm(t, r); w.Sessions != 2 || w.Bytes > 2*one.Bytes {
		t.Fatalf("a bound of %d bytes (two sessions'): %+v kept", 2*one.Bytes, w)
	}
}

// TestNewSessionsShareMeasuredCosts: the call costs one session measured
// serve the sessions built after it (the backend's costs, not a
// conversation's), so another conversation does not measure again in its
// time to first token.
func TestNewSessionsShareMeasuredCosts(t *testing.T) {
	r := New(nil, nil)
	defer r.Close()
	var firstCosts *spec.Costs
	for i, text := range []string{"Lily and Tom", "The little dog ran"} {
		err := r.Do(context.Background(), testres.Stories(t), func(m *Model) error {
			ids, err := m.Render(context.Background(), []chat.Message{{Role: chat.RoleUser, Content: text}})
			if err != nil {
				return err
			}
			if _, err := m.Reply(context.Background(), Request{Mode: Chat, Prompt: ids,
				Options: engine.GenerateOptions{MaxTokens: 8, Width: 4}, Emit: func(engine.Token) error { return nil }}); err != nil {
				return err
			}
			s, _ := m.Session(Chat)
			switch {
			case i == 0 && s.Measurements() != 1:
				t.Errorf("the first session measured %d times, want 1", s.Measurements())
			case i == 0:
				firstCosts = s.Costs()
			case s.Measurements() != 0 || s.Costs() != firstCosts || m.Warm().Sessions != 2:
				t.Errorf("the second conversation's session (of %d): measured %d times, costs shared %v", m.Warm().Sessions, s.Measurements(), s.Costs() == firstCosts)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestSharedOpeningKeepsTheOtherConversation: a conversation whose prompt
// shares only an opening with what another's session holds gets a session
// of its own instead of cutting that one back, so the other's next turn
// still resumes from memory.
func TestSharedOpeningKeepsTheOtherConversation(t *testing.T) {
	// A reply of 16 tokens: the opening is less than half of what the
	// other session holds; of 4: more.
	for _, n := range []int{16, 4} {
		r := New(nil, nil)
		a := []chat.Message{{Role: chat.RoleUser, Content: "Lily and Tom played in the park with a big red ball all day long"}}
		b := []chat.Message{{Role: chat.RoleUser, Content: "Lily and Tom played in the park with a big dog"}}
		got, st := chatTurn(t, r, a, n)
		var text string
		_ = r.Do(context.Background(), testres.Stories(t), func(m *Model) error { text = m.Tokenizer().Decode(got); return nil })
		first := st.PrefillTokens
		chatTurn(t, r, b, 8)
		a = append(a, chat.Message{Role: chat.RoleAssistant, Content: text}, chat.Message{Role: chat.RoleUser, Content: "And then?"})
		if _, st := chatTurn(t, r, a, 8); st.ResumedTokens < first {
			t.Errorf("reply of %d: the first conversation's next turn after one sharing its opening: resumed %d, want its first prompt's %d", n, st.ResumedTokens, first)
		}
		if w := warm(t, r); w.Sessions != 2 {
			t.Errorf("reply of %d: %d sessions warm, want one per conversation", n, w.Sessions)
		}
		r.Close()
	}
}
