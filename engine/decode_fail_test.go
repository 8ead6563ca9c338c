package engine

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model"
	"anechat/engine/spec"
)

// failingBackend runs the real backend, so the call writes its pending K/V
// rows, and then fails the call numbered failAt (counting from 1): with an
// error, or by cancelling the context it was given (as a Ctrl-C in the
// middle of a Forward would).
type failingBackend struct {
	model.Backend
	calls, failAt int
	cancel        context.CancelFunc // nil: fail with errBoom
}

var errBoom = errors.New("boom")

func (b *failingBackend) Forward(ctx context.Context, tokens []int32, start int, c *kv.Cache, want model.Output) (model.Result, error) {
	res, err := b.Backend.Forward(ctx, tokens, start, c, want)
	b.calls++
	if err != nil || b.calls != b.failAt {
		return res, err
	}
	if b.cancel != nil {
		b.cancel()
		return model.Result{}, ctx.Err()
	}
	return model.Result{}, errBoom
}

// flatCosts makes every width cost the same, so the gate never stands in
// the way of a draft (the tests here force drafts with Ungated anyway).
func flatCosts() *spec.Costs {
	return spec.FixedCosts(map[int]float64{1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1})
}

// TestGenerateFailureLeavesCommittedOnly (DESIGN.md invariant 3): a decode
// call that fails or is cancelled after writing its pending rows, plain or
// speculative (drafts that would be accepted in flight), leaves the cache
// holding exactly the committed rows of the sequence but its last token, no
// pending row; the next Generate continues to the same ids as an
// uninterrupted run.
func TestGenerateFailureLeavesCommittedOnly(t *testing.T) {
	stories := openStories(t)
	corpus := spec.NewCorpus(0)
	corpus.Add(append(slices.Clone(storiesPrompt), storiesWant...)) // drafts that the model accepts
	for _, w := range []int{1, 4, 8} {
		for _, failAt := range []int{1, 2, 5} {
			for _, cancel := range []bool{false, true} {
				ctx, stop := context.WithCancel(context.Background())
				b := &failingBackend{Backend: stories}
				s, err := NewSession(b, SessionOptions{Costs: flatCosts(), Corpus: corpus, Ungated: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Prefill(ctx, storiesPrompt, nil); err != nil {
					t.Fatal(err)
				}
				// Fail the failAt-th decode call.
				b.calls, b.failAt = 0, failAt
				if cancel {
					b.cancel = stop
				}
				var got []int32
				_, err = s.Generate(ctx, GenerateOptions{MaxTokens: 60, Width: w}, func(tk Token) error {
					got = append(got, tk.ID)
					return nil
				})
				if cancel && !errors.Is(err, context.Canceled) || !cancel && !errors.Is(err, errBoom) {
					t.Fatalf("width %d fail at %d cancel=%v: err %v", w, failAt, cancel, err)
				}
				c := s.Cache()
				seq := s.Tokens()
				if c.Pending() != 0 || c.Len() != len(seq)-1 {
					t.Fatalf("width %d fail at %d cancel=%v: cache %d committed + %d pending for a sequence of %d", w, failAt, cancel, c.Len(), c.Pending(), len(seq))
				}
				if !slices.Equal(got, storiesWant[:len(got)]) || !slices.Equal(seq, append(slices.Clone(storiesPrompt), got...)) {
					t.Fatalf("width %d fail at %d: emitted %v before the failure", w, failAt, got)
				}
				// The session is usable as is: the rest comes out exactly.
				stop()
				b.failAt = 0
				rest, _ := collect(t, s, GenerateOptions{MaxTokens: 60 - len(got), Width: w})
				if all := append(got, rest...); !slices.Equal(all, storiesWant) {
					t.Fatalf("width %d fail at %d cancel=%v: after the failure\n got %v\nwant %v", w, failAt, cancel, all, storiesWant)
				}
			}
		}
	}
}

// TestResumedSpeculative: a session resumed from a snapshot and decoding
// speculatively (drafts accepted and rejected) gives the ids of a fresh
// width-1 session, over full attention, sliding windows shorter than the
// sequence, and the Gemma 4 fixture (window 8, KV-shared layers); its stats
// report the resumed positions.
func TestResumedSpeculative(t *testing.T) {
	stories := openStories(t)
	for _, tc := range []struct {
		name string
		b    model.Backend
	}{{"full", stories}, {"sliding", geoBackend{stories, slidingGeometry(stories.Config().KV)}}, {"gemma4", gemma4Fixture(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			prompt := testPrompt(150, 7)
			plain, err := NewSession(tc.b, SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := plain.Prefill(ctx, prompt, nil); err != nil {
				t.Fatal(err)
			}
			want, _ := collect(t, plain, GenerateOptions{MaxTokens: 40, Width: 1})

			// A snapshot of the prompt's first 130 tokens.
			r := &Resumer{Store: newMemStore(t.TempDir()), Meta: kv.Meta{Model: tc.b.Config().Fingerprint, Tokenizer: "t"}}
			s0, _ := NewSession(tc.b, SessionOptions{})
			if err := s0.Prefill(ctx, prompt[:130], nil); err != nil {
				t.Fatal(err)
			}
			if _, err := r.SaveSession(ctx, "k", s0); err != nil {
				t.Fatal(err)
			}
			// Drafts from a corpus holding the right continuation with
			// every fourth token wrong: some accepted, some rejected.
			bent := slices.Clone(want)
			for i := 3; i < len(bent); i += 4 {
				bent[i] = (bent[i] + 1) % int32(tc.b.Config().VocabSize)
			}
			corpus := spec.NewCorpus(0)
			corpus.Add(append(slices.Clone(prompt), bent...))
			for _, w := range []int{4, 8, 0} {
				rec := &recordingBackend{Backend: tc.b}
				s, _ := NewSession(rec, SessionOptions{Costs: flatCosts(), Corpus: corpus, Ungated: true})
				if err := r.Prefill(ctx, s, prompt, nil); err != nil {
					t.Fatal(err)
				}
				// DESIGN.md invariant 5: the remainder in one batched call
				// from the restored offset.
				if !slices.Equal(rec.calls, [][2]int{{130, 20}}) {
					t.Fatalf("width %d: resume prefill calls (start, width) %v, want [[130 20]]", w, rec.calls)
				}
				got, st := collect(t, s, GenerateOptions{MaxTokens: 40, Width: w})
				if !slices.Equal(got, want) {
					t.Fatalf("width %d resumed:\n got %v\nwant %v", w, got, want)
				}
				if st.ResumedTokens != 130 || st.PrefillTokens != 20 || st.Accepted == 0 || st.Accepted == st.Drafted {
					t.Fatalf("width %d: stats %+v (want 130 resumed, 20 prefilled, some drafts accepted and some not)", w, st)
				}
				if c := s.Cache(); c.Len() != len(s.Tokens())-1 || c.Pending() != 0 {
					t.Fatalf("width %d: cache %d+%d for %d tokens", w, c.Len(), c.Pending(), len(s.Tokens()))
				}
			}
		})
	}
}

// TestSpecStopInsideDraft: on stories260K with drafts that run through the
// stop id (a corpus holding the reference continuation), the session stops
// exactly where width 1 stops, keeps the stop id pending in the sequence, and
// counts as accepted only the drafted tokens it emitted.
func TestSpecStopInsideDraft(t *testing.T) {
	b := openStories(t)
	corpus := spec.NewCorpus(0)
	corpus.Add(append(slices.Clone(storiesPrompt), storiesWant...))
	for at := 2; at < 20; at += 3 {
		stop := storiesWant[at]
		first := slices.Index(storiesWant, stop)
		for _, w := range []int{2, 4, 8} {
			s, _ := NewSession(b, SessionOptions{Costs: flatCosts(), Corpus: corpus, Ungated: true})
			if err := s.Prefill(context.Background(), storiesPrompt, nil); err != nil {
				t.Fatal(err)
			}
			var got []Token
			st, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 60, Width: w, Stop: []int32{stop}}, func(tk Token) error {
				got = append(got, tk)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tokenIDs(got), storiesWant[:first]) || st.Stopped != "stop" {
				t.Fatalf("stop %d width %d: got %v (%+v), want %v", stop, w, tokenIDs(got), st, storiesWant[:first])
			}
			seq := s.Tokens()
			if seq[len(seq)-1] != stop || s.Cache().Len() != len(seq)-1 || s.Cache().Pending() != 0 {
				t.Fatalf("stop %d width %d: sequence ends %v, cache %d+%d", stop, w, seq[len(seq)-3:], s.Cache().Len(), s.Cache().Pending())
			}
			nd := 0
			for _, tk := range got {
				if tk.Drafted {
					nd++
				}
			}
			if st.Accepted != nd || st.Tokens != len(got) {
				t.Fatalf("stop %d width %d: %d drafted tokens emitted, stats %+v", stop, w, nd, st)
			}
		}
	}
}

// recordingBackend records the start and width of every Forward.
type recordingBackend struct {
	model.Backend
	calls [][2]int
}

func (b *recordingBackend) Forward(ctx context.Context, tokens []int32, start int, c *kv.Cache, want model.Output) (model.Result, error) {
	b.calls = append(b.calls, [2]int{start, len(tokens)})
	return b.Backend.Forward(ctx, tokens, start, c, want)
}

// TestResumeCancelledKeepsSnapshot (DESIGN.md invariants 4 and 7): a resume
// cancelled before or while it loads returns the cancellation and leaves
// the snapshot and its record alone (only a snapshot that is bad is
// forgotten); the next resume uses it.
func TestResumeCancelledKeepsSnapshot(t *testing.T) {
	b := openStories(t)
	ctx := context.Background()
	prompt := testPrompt(150, 2)
	store := newMemStore(t.TempDir())
	r := &Resumer{Store: store, Meta: kv.Meta{Model: b.Config().Fingerprint, Tokenizer: "t"}}
	s0, _ := NewSession(b, SessionOptions{})
	if err := s0.Prefill(ctx, prompt[:140], nil); err != nil {
		t.Fatal(err)
	}
	path, err := r.SaveSession(ctx, "k", s0)
	if err != nil || path == "" {
		t.Fatalf("save: %q %v", path, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s, _ := NewSession(b, SessionOptions{})
	if err := r.Prefill(cancelled, s, prompt, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled resume: %v", err)
	}
	if _, err := os.Stat(path); err != nil || len(store.forgotten) != 0 || len(store.recs) != 1 {
		t.Fatalf("a cancelled resume dropped the snapshot: stat %v, forgotten %v, %d records", err, store.forgotten, len(store.recs))
	}
	if err := r.Prefill(ctx, s, prompt, nil); err != nil {
		t.Fatal(err)
	}
	if _, st := collect(t, s, GenerateOptions{MaxTokens: 3}); st.ResumedTokens != 140 {
		t.Fatalf("resume after the cancelled one: %+v", st)
	}
}

// TestResumeStatsAfterCancelledPrefill: positions prefilled by a cancelled
// Prefill and then reused by Resumer.Prefill count as prefilled, not as
// resumed: the stats add up to the prompt.
func TestResumeStatsAfterCancelledPrefill(t *testing.T) {
	s, _ := NewSession(openStories(t), SessionOptions{MaxBatch: 8})
	ctx, cancel := context.WithCancel(context.Background())
	prompt := append(slices.Clone(storiesPrompt), storiesWant[:30]...)
	err := s.Prefill(ctx, prompt, func(done, total int) {
		if done >= 16 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || s.Cache().Len() != 16 {
		t.Fatalf("cancelled prefill: %v, cache %d", err, s.Cache().Len())
	}
	var none *Resumer
	if err := none.Prefill(context.Background(), s, prompt, nil); err != nil {
		t.Fatal(err)
	}
	got, st := collect(t, s, GenerateOptions{MaxTokens: 5})
	if !slices.Equal(got, storiesWant[30:35]) || st.PrefillTokens != len(prompt) || st.ResumedTokens != 0 {
		t.Fatalf("got %v, stats %+v: want %d prefilled, 0 resumed", got, st, len(prompt))
	}
	// The next turn reuses the cache: resumed, and only the new part
	// prefilled.
	next := append(s.Tokens(), storiesWant[35:40]...)
	if err := none.Prefill(context.Background(), s, next, nil); err != nil {
		t.Fatal(err)
	}
	if _, st = collect(t, s, GenerateOptions{MaxTokens: 2}); st.ResumedTokens+st.PrefillTokens != len(next) || st.PrefillTokens != 6 {
		t.Fatalf("next turn: stats %+v for %d tokens (6 not cached)", st, len(next))
	}
}

// noEOS is a backend whose model has no EOS id, so that generation runs to
// the end of the context.
type noEOS struct{ model.Backend }

func (b noEOS) Config() model.Config {
	c := b.Backend.Config()
	c.EOS = nil
	return c
}

// TestContextEndExact: with no stop id, generation ends at the end of the
// context after exactly ContextLen-len(prompt)+1 tokens (the last one from
// the logits of the last position, never in the cache), plain or
// speculative with drafts running into the end, and the ids agree.
func TestContextEndExact(t *testing.T) {
	m := tinyLlama(t, 40, 5)
	b := noEOS{m}
	prompt := []int32{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	want, _ := plainTurns(t, b, [][]int32{prompt}, GenerateOptions{})
	if len(want[0]) != 40-len(prompt)+1 {
		t.Fatalf("plain: %d tokens, want %d", len(want[0]), 40-len(prompt)+1)
	}
	corpus := spec.NewCorpus(0)
	corpus.Add(append(slices.Clone(prompt), want[0]...))
	for _, w := range []int{1, 2, 4, 8, 0} {
		s, _ := NewSession(b, SessionOptions{Costs: flatCosts(), Corpus: corpus, Ungated: true})
		if err := s.Prefill(context.Background(), prompt, nil); err != nil {
			t.Fatal(err)
		}
		got, st := collect(t, s, GenerateOptions{Width: w})
		if !slices.Equal(got, want[0]) || st.Stopped != "context" || s.Cache().Len() != 40 || (st.Accepted == 0) != (w == 1) {
			t.Fatalf("width %d: got %v (%+v, cache %d), want %v", w, got, st, s.Cache().Len(), want[0])
		}
		// A further Generate has no room: nothing, no call, no error.
		got, st = collect(t, s, GenerateOptions{Width: w})
		if len(got) != 0 || st.TargetCalls != 0 || st.Stopped != "context" {
			t.Fatalf("width %d, full context: %v %+v", w, got, st)
		}
	}
}
