package engine

import (
	"context"
	"testing"

	"anechat/engine/kv"
	"anechat/engine/model"
)

// TestSaveRun: reruns through SaveRun keep one snapshot per sequence on a
// full-attention model (nothing saved when the stored one holds the run; a
// stored one the run extends is dropped), while on a sliding-window model
// (the Gemma 4 fixture) the shorter snapshot is kept: a longer one cannot
// serve prompts that end where the shorter one ends.
func TestSaveRun(t *testing.T) {
	prompt := testPrompt(180, 3)
	for _, tc := range []struct {
		name string
		b    model.Backend
		// snapshots left after runs of 150, 150, 120 and 180 tokens
		want []int
	}{
		{"full attention", storiesModel(t), []int{1, 1, 1, 1}},
		{"sliding window", gemma4Fixture(t), []int{1, 1, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newMemStore(t.TempDir())
			r := &Resumer{Store: store, Meta: kv.Meta{Model: tc.b.Config().Fingerprint, Tokenizer: "tok"}}
			for i, n := range []int{150, 150, 120, 180} {
				s, err := NewSession(tc.b, SessionOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Prefill(context.Background(), prompt[:n], nil); err != nil {
					t.Fatal(err)
				}
				if _, err := r.SaveRun(context.Background(), s); err != nil {
					t.Fatal(err)
				}
				if got := len(store.recs); got != tc.want[i] {
					t.Fatalf("run %d (%d tokens): %d snapshots stored, want %d", i, n, got, tc.want[i])
				}
			}
		})
	}
}
