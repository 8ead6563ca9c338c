package engine

import (
	"context"
	"slices"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model"
)

// geoBackend overrides a backend's KV geometry: the CPU llama attends over
// cache.Visible, so sliding windows imposed here are honoured for real.
type geoBackend struct {
	model.Backend
	geo kv.Geometry
}

func (b geoBackend) Config() model.Config {
	c := b.Backend.Config()
	c.KV = b.geo
	return c
}

// TestResumeSessionTurns runs a two-turn conversation with snapshots saved
// after each turn and resumed in a new session (as after a restart), and
// checks each turn against a fresh session on the same prompt: the same ids,
// with the stats reporting what was resumed and what prefilled. With full
// attention, with sliding windows shorter than the conversation, and on the
// Gemma 4 fixture (window 8, KV-shared layers).
func TestResumeSessionTurns(t *testing.T) {
	stories := openStories(t)
	sliding := slidingGeometry(stories.Config().KV)
	for _, tc := range []struct {
		name string
		b    model.Backend
	}{{"full", stories}, {"sliding", geoBackend{stories, sliding}}, {"gemma4", gemma4Fixture(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			meta := kv.Meta{Model: tc.b.Config().Fingerprint, Tokenizer: "stories"}
			store := newMemStore(t.TempDir())
			r := &Resumer{Store: store, Meta: meta}
			opts := GenerateOptions{MaxTokens: 30, Width: 1}
			fresh := func(prompt []int32) []int32 {
				s, err := NewSession(tc.b, SessionOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Prefill(ctx, prompt, nil); err != nil {
					t.Fatal(err)
				}
				out, _ := collect(t, s, opts)
				return out
			}
			turn1 := testPrompt(100, 3)
			s, err := NewSession(tc.b, SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Prefill(ctx, s, turn1, nil); err != nil {
				t.Fatal(err)
			}
			got1, st := collect(t, s, opts)
			if want := fresh(turn1); !slices.Equal(got1, want) {
				t.Fatalf("turn 1: %v, fresh %v", got1, want)
			}
			if st.ResumedTokens != 0 || st.PrefillTokens != len(turn1) {
				t.Errorf("turn 1 with nothing stored: resumed %d prefilled %d", st.ResumedTokens, st.PrefillTokens)
			}
			// Regenerate (the same prompt again) and edit (its last 5
			// tokens changed) in the same session: the cache is truncated
			// in memory, the output is a fresh one's.
			edited := append(slices.Clone(turn1[:len(turn1)-5]), testPrompt(6, 11)[1:]...)
			for _, c := range []struct {
				p       []int32
				reused  int
				variant string
			}{{turn1, len(turn1) - 1, "regenerate"}, {edited, len(turn1) - 5, "edit"}} {
				if err := r.Prefill(ctx, s, c.p, nil); err != nil {
					t.Fatal(err)
				}
				got, st := collect(t, s, opts)
				if want := fresh(c.p); !slices.Equal(got, want) {
					t.Fatalf("%s: %v, fresh %v", c.variant, got, want)
				}
				if st.ResumedTokens < c.reused || st.ResumedTokens+st.PrefillTokens != len(c.p) {
					t.Errorf("%s reused %d and prefilled %d positions, want at least %d reused", c.variant, st.ResumedTokens, st.PrefillTokens, c.reused)
				}
			}
			// Back to turn 1's state before saving it.
			if err := r.Prefill(ctx, s, turn1, nil); err != nil {
				t.Fatal(err)
			}
			collect(t, s, opts)
			if _, err := r.SaveSession(ctx, "conv", s); err != nil {
				t.Fatal(err)
			}
			// Turn 2 in a new session: the conversation so far plus a new
			// message (crossing 2 windows of the sliding layers).
			turn2 := append(append(slices.Clone(turn1), got1...), testPrompt(40, 9)[1:]...)
			s2, err := NewSession(tc.b, SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Prefill(ctx, s2, turn2, nil); err != nil {
				t.Fatal(err)
			}
			got2, st := collect(t, s2, opts)
			if want := fresh(turn2); !slices.Equal(got2, want) {
				t.Fatalf("turn 2 resumed: %v, fresh %v", got2, want)
			}
			stored := len(turn1) + len(got1) - 1 // the last generated token is not in the cache
			if st.ResumedTokens != stored || st.PrefillTokens != len(turn2)-stored {
				t.Errorf("turn 2: resumed %d prefilled %d, want %d and %d", st.ResumedTokens, st.PrefillTokens, stored, len(turn2)-stored)
			}
			// Saving turn 2 replaces turn 1's snapshot.
			if _, err := r.SaveSession(ctx, "conv", s2); err != nil {
				t.Fatal(err)
			}
			if len(store.recs) != 1 {
				t.Errorf("%d snapshots recorded after replacing, want 1", len(store.recs))
			}
			// Turn 3 continues the same session in memory (no load).
			turn3 := append(append(slices.Clone(turn2), got2...), testPrompt(20, 4)[1:]...)
			if err := r.Prefill(ctx, s2, turn3, nil); err != nil {
				t.Fatal(err)
			}
			got3, _ := collect(t, s2, opts)
			if want := fresh(turn3); !slices.Equal(got3, want) {
				t.Fatalf("turn 3 in memory: %v, fresh %v", got3, want)
			}
			// Caching off: a nil Resumer prefills from scratch.
			var none *Resumer
			s3, _ := NewSession(tc.b, SessionOptions{})
			if err := none.Prefill(ctx, s3, turn2, nil); err != nil {
				t.Fatal(err)
			}
			got, st := collect(t, s3, opts)
			if !slices.Equal(got, got2) || st.ResumedTokens != 0 || st.PrefillTokens != len(turn2) {
				t.Errorf("no cache: %v (resumed %d, prefilled %d)", got, st.ResumedTokens, st.PrefillTokens)
			}
			if p, err := none.SaveSession(ctx, "conv", s3); p != "" || err != nil {
				t.Errorf("nil resumer saved %q %v", p, err)
			}
		})
	}
}
