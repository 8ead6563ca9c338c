package engine

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"anechat/engine/model"
	"anechat/engine/model/mmap"
	"anechat/engine/spec"
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

// decoders are the decode loops a reply may run: plain, and the verify
// loop with drafts the model accepts (calls of width up to 8).
func decoders() map[string]func() (Decoder, int) {
	return map[string]func() (Decoder, int){
		"plain": func() (Decoder, int) { return PlainDecoder{}, 1 },
		"speculative": func() (Decoder, int) {
			corpus := spec.NewCorpus(0)
			corpus.Add(append(slices.Clone(storiesPrompt), storiesWant...))
			d := NewSpecDecoder(flatCosts(), corpus)
			d.Ungated = true
			return d, 8
		},
	}
}

// openSession opens the model at path and prefills the stories prompt.
func openSession(t *testing.T, path string, dec Decoder) (*Session, model.Backend) {
	t.Helper()
	b, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(io.Closer).Close() })
	s, err := NewSession(b, SessionOptions{Decoder: dec})
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
			dec, width := mk()
			s, _ := openSession(t, path, dec)
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
			good, _ := openSession(t, copyStories(t), PlainDecoder{})
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
			s, _ := openSession(t, path, PlainDecoder{})
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
