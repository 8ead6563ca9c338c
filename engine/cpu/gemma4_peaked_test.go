package cpu_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"anechat/engine"
	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
)

// updatePeaked rewrites testdata/gemma4-peaked/reference.json from the code
// as it is: go test ./engine/cpu -run TestGemma4Peaked -update-peaked. Only
// on purpose (after regenerating the fixture with its gen.py): the file is
// what the Core ML converter's tests hold a bundle to.
var updatePeaked = flag.Bool("update-peaked", false, "rewrite testdata/gemma4-peaked/reference.json from the current code")

// peakedPrompts are the Core ML converter's test prompts
// (engine/coreml/convert/tests/test_agreement.py PROMPTS, which checks that
// reference.json holds these texts).
var peakedPrompts = []string{
	"Once upon a time, there was a little girl named Lily.",
	"The quick brown fox jumps over the lazy dog.",
	"Tom and Sam went to the store to buy some milk.",
	"Hello, world! How are you doing today?",
	"The sun is hot. The moon is cold.",
	"Why is the sky blue?",
	"One day, a big dog found a red ball in the park.",
	"She liked to play with her friends every day.",
	"It was the best of times, it was the worst of times.",
	"There was a cat and a bird who were friends.",
	"The little boy was sad because his toy was broken.",
	"Mom said it was time to go to bed.",
}

const (
	peakedGreedy = 32 // ids recorded per prompt
	peakedDelta  = 4  // gen.py's DELTA: next token = the token DELTA positions back
	// peakedMinMargin is the smallest top-1/top-2 logit gap the fixture must
	// keep at every recorded step: far above what fp16 arithmetic moves a
	// logit of about 20 (measured: 3.57; the random ../gemma4 fixture: 0.003).
	peakedMinMargin = 1.0
)

type peakedCase struct {
	Text      string  `json:"text"`
	Prompt    []int32 `json:"prompt_ids"`
	Greedy    []int32 `json:"greedy_ids"`
	MinMargin float64 `json:"min_margin"`
}

type peakedReference struct {
	Note  string       `json:"note"`
	Cases []peakedCase `json:"cases"`
}

// TestGemma4Peaked runs the peaked fixture (testdata/gemma4-peaked, made by
// its gen.py: an induction-copy model with wide logit margins) on the CPU
// backend, as the app opens it (loader + tokenizer.json): the prompt ids
// and the greedy ids, one token per call, equal reference.json's; every
// step's top-1/top-2 logit gap is at least peakedMinMargin; and the ids
// follow the copy rule gen.py builds in, so the fixture computes what it
// says it does.
func TestGemma4Peaked(t *testing.T) {
	dir := filepath.Join("testdata", "gemma4-peaked")
	ctx := context.Background()
	m, err := load.NewRegistry(cpu.Loader{}).Open(ctx, filepath.Join(dir, "model"), load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b, tok := m.Backend, m.Tokenizer
	refPath := filepath.Join(dir, "reference.json")
	var want peakedReference
	if data, err := os.ReadFile(refPath); err == nil {
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%s: %v", refPath, err)
		}
	} else if !*updatePeaked {
		t.Fatalf("%v (run go test ./engine/cpu -run TestGemma4Peaked -update-peaked to record it)", err)
	}
	got := peakedReference{Note: "written by go test ./engine/cpu -run TestGemma4Peaked -update-peaked; see gemma4_peaked_test.go"}
	for _, text := range peakedPrompts {
		prompt := engine.RawPrompt(tok, text)
		cache, err := kv.New(b.Config().KV, len(prompt))
		if err != nil {
			t.Fatal(err)
		}
		r, err := b.Forward(ctx, prompt, 0, cache, model.Logits|model.Last)
		if err != nil {
			t.Fatal(err)
		}
		if err := cache.Commit(len(prompt)); err != nil {
			t.Fatal(err)
		}
		c := peakedCase{Text: text, Prompt: prompt, MinMargin: math.Inf(1)}
		for {
			id, margin := top2(r.Logits[0])
			c.Greedy = append(c.Greedy, id)
			c.MinMargin = math.Min(c.MinMargin, margin)
			if len(c.Greedy) == peakedGreedy {
				break
			}
			if r, err = b.Forward(ctx, []int32{id}, cache.Len(), cache, model.Logits); err != nil {
				t.Fatal(err)
			}
			if err := cache.Commit(1); err != nil {
				t.Fatal(err)
			}
		}
		seq := append(slices.Clone(prompt), c.Greedy...)
		for n := len(prompt); n < len(seq); n++ {
			if seq[n] != seq[n-1-peakedDelta] {
				t.Errorf("%q: id %d at position %d is not the copy of position %d (%d)", text, seq[n], n, n-1-peakedDelta, seq[n-1-peakedDelta])
				break
			}
		}
		if c.MinMargin < peakedMinMargin {
			t.Errorf("%q: smallest top-1/top-2 logit gap %.4g < %g: the fixture is not peaked", text, c.MinMargin, peakedMinMargin)
		}
		got.Cases = append(got.Cases, c)
	}
	if *updatePeaked {
		data, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(refPath, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if len(want.Cases) != len(got.Cases) {
		t.Fatalf("%s holds %d cases, want %d", refPath, len(want.Cases), len(got.Cases))
	}
	for i, c := range got.Cases {
		w := want.Cases[i]
		if w.Text != c.Text || fmt.Sprint(w.Prompt) != fmt.Sprint(c.Prompt) || fmt.Sprint(w.Greedy) != fmt.Sprint(c.Greedy) {
			t.Errorf("case %d %q: prompt %v greedy %v\nrecorded %q: prompt %v greedy %v", i, c.Text, c.Prompt, c.Greedy, w.Text, w.Prompt, w.Greedy)
		}
		// The margin is recorded for the reader; float32 sums may move it
		// in the last bits across kernel sets, so compare loosely.
		if math.Abs(w.MinMargin-c.MinMargin) > 1e-3 {
			t.Errorf("case %d: min margin %.6g, recorded %.6g", i, c.MinMargin, w.MinMargin)
		}
	}
}

// top2 returns the largest logit's index and its gap to the second largest.
func top2(row []float32) (int32, float64) {
	best, second := -1, -1
	for i, v := range row {
		switch {
		case best < 0 || v > row[best]:
			best, second = i, best
		case second < 0 || v > row[second]:
			second = i
		}
	}
	return int32(best), float64(row[best]) - float64(row[second])
}
