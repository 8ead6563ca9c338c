package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/model/gguf"
	"anechat/engine/model/mmap"
	"anechat/engine/spec"
	"anechat/internal/backends"
	"anechat/internal/testres"
)

// copyStories copies stories260K into a temp dir (the copy may be damaged
// at will) and returns its path.
func copyStories(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "stories260K.gguf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// decoders are the ways a reply may decode: width 1 (one token per call),
// and the verify loop with drafts the model accepts (calls of width up to
// 8): the Session's options and the width.
func decoders() map[string]func() (SessionOptions, int) {
	return map[string]func() (SessionOptions, int){
		"plain": func() (SessionOptions, int) { return SessionOptions{}, 1 },
		"speculative": func() (SessionOptions, int) {
			corpus := spec.NewCorpus(0)
			corpus.Add(append(slices.Clone(storiesPrompt), storiesWant...))
			return SessionOptions{Costs: flatCosts(), Corpus: corpus, Ungated: true}, 8
		},
	}
}

// openSession opens the model at path through the build's registry (as the
// app does), makes a Session with so and prefills the stories prompt.
func openSession(t *testing.T, path string, so SessionOptions) (*Session, model.Backend) {
	t.Helper()
	m, err := backends.Registry().Open(context.Background(), path, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b := m.Backend
	s, err := NewSession(b, so)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prefill(context.Background(), storiesPrompt, nil); err != nil {
		t.Fatal(err)
	}
	return s, b
}

// wantChanged fails unless err is the typed error for path changed on disk,
// telling the user to reload.
func wantChanged(t *testing.T, err error, path string) {
	t.Helper()
	var ce *mmap.ChangedError
	if !errors.Is(err, model.ErrModelChanged) || !errors.As(err, &ce) || ce.Path != path ||
		!strings.Contains(err.Error(), "changed on disk") || !strings.Contains(err.Error(), "reload the model") {
		t.Fatalf("err = %v; want a *mmap.ChangedError for %s telling to reload", err, path)
	}
}

// TestModelTruncatedDuringGeneration: the model file is truncated (as a
// re-download over it would) while a reply is being generated. The reply
// fails with the typed error naming the file, the process lives on, and a
// good copy of the model loads and generates the reference text after it.
// Before, reading the truncated mapping raised SIGBUS and killed the
// process.
func TestModelTruncatedDuringGeneration(t *testing.T) {
	for name, mk := range decoders() {
		t.Run(name, func(t *testing.T) {
			path := copyStories(t)
			so, width := mk()
			s, _ := openSession(t, path, so)
			var got []int32
			_, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 60, Width: width}, func(tok Token) error {
				got = append(got, tok.ID)
				if len(got) == 3 {
					// Past the header: every tensor's pages are gone.
					if err := os.Truncate(path, 4096); err != nil {
						t.Fatal(err)
					}
				}
				return nil
			})
			wantChanged(t, err, path)
			// The tokens emitted before the truncation are the reference's;
			// a speculative call may have emitted a few more from the
			// same (intact) call before the next one faulted.
			if len(got) < 3 || len(got) > 3+width || !slices.Equal(got, storiesWant[:len(got)]) {
				t.Fatalf("emitted %v before the error; want a prefix of the reference of 3..%d tokens", got, 3+width)
			}
			if c := s.Cache(); c.Pending() != 0 || c.Len() != len(s.Tokens())-1 {
				t.Fatalf("cache %d committed + %d pending for %d tokens", c.Len(), c.Pending(), len(s.Tokens()))
			}
			// The next reply fails before any model call.
			st, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 5, Width: width}, func(Token) error { return nil })
			wantChanged(t, err, path)
			if st.TargetCalls != 0 {
				t.Fatalf("%d model calls on a changed file", st.TargetCalls)
			}
			// A good model loads and works after it.
			good, _ := openSession(t, copyStories(t), SessionOptions{})
			if out, _ := collect(t, good, GenerateOptions{MaxTokens: 60, Width: 1}); !slices.Equal(out, storiesWant) {
				t.Fatalf("after the failure, a good model gives %v", out)
			}
		})
	}
}

// TestModelChangedBetweenReplies: the file changes between two replies (in
// place, or replaced by another file, as a download renames its result
// over it). The next prefill or generation fails cleanly, naming the file,
// before it reads any weight.
func TestModelChangedBetweenReplies(t *testing.T) {
	cases := map[string]func(t *testing.T, path string){
		"truncated": func(t *testing.T, path string) {
			if err := os.Truncate(path, 4096); err != nil {
				t.Fatal(err)
			}
		},
		"replaced": func(t *testing.T, path string) {
			data, _ := os.ReadFile(path)
			tmp := path + ".download"
			if err := os.WriteFile(tmp, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			path := copyStories(t)
			s, _ := openSession(t, path, SessionOptions{})
			if out, _ := collect(t, s, GenerateOptions{MaxTokens: 5, Width: 1}); !slices.Equal(out, storiesWant[:5]) {
				t.Fatalf("first reply %v", out)
			}
			change(t, path)
			st, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 5, Width: 1}, func(Token) error { return nil })
			wantChanged(t, err, path)
			if st.TargetCalls != 0 {
				t.Fatalf("%d model calls on a changed file", st.TargetCalls)
			}
			wantChanged(t, s.Prefill(context.Background(), storiesWant[5:8], nil), path)
		})
	}
}

// nanOutputNorm damages the copy of stories260K at path: its final norm's
// weights become NaN, so every logit of every position is NaN.
func nanOutputNorm(t *testing.T, path string) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor("output_norm.weight")
	f.Close()
	if !ok || ti.Type != gguf.F32 {
		t.Fatalf("stories260K has no F32 output_norm.weight (%v)", ti)
	}
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	nan := make([]byte, ti.Size)
	for i := 0; i < len(nan); i += 4 {
		binary.LittleEndian.PutUint32(nan[i:], math.Float32bits(float32(math.NaN())))
	}
	if _, err := w.WriteAt(nan, ti.Offset); err != nil {
		t.Fatal(err)
	}
}

// TestNaNLogitsFailTheReply: a model file whose weights compute only NaN
// logits fails the reply with a message saying the file is damaged, greedy
// (backend argmax, or the prefill's logits) or sampled, plain or
// speculative. Before, the CPU argmax picked token 0 for a NaN row (it
// started from x[0] and NaN never compares greater), sampling drew a
// uniformly random token, and the reply was silent garbage.
func TestNaNLogitsFailTheReply(t *testing.T) {
	for name, mk := range decoders() {
		for _, temp := range []float64{0, 0.8} {
			t.Run(fmt.Sprintf("%s/temperature=%g", name, temp), func(t *testing.T) {
				path := copyStories(t)
				nanOutputNorm(t, path)
				so, width := mk()
				s, _ := openSession(t, path, so)
				var got []int32
				_, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 10, Width: width, Temperature: temp, Seed: 1},
					func(tok Token) error {
						got = append(got, tok.ID)
						return nil
					})
				if !errors.Is(err, model.ErrDamaged) || !strings.Contains(err.Error(), "model file is damaged") {
					t.Fatalf("temperature %g: err = %v; want model.ErrDamaged", temp, err)
				}
				if len(got) != 0 {
					t.Fatalf("temperature %g: emitted %v from NaN logits", temp, got)
				}
				// The next reply feeds the last token again: a model call,
				// whose row (argmax, when greedy) must fail the same way.
				st, err := s.Generate(context.Background(), GenerateOptions{MaxTokens: 10, Width: width, Temperature: temp, Seed: 1},
					func(tok Token) error {
						got = append(got, tok.ID)
						return nil
					})
				if !errors.Is(err, model.ErrDamaged) || st.TargetCalls != 1 || len(got) != 0 {
					t.Fatalf("temperature %g, second reply: err = %v after %d calls, emitted %v; want model.ErrDamaged from the first call", temp, err, st.TargetCalls, got)
				}
			})
		}
	}
}
