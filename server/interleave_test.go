package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"anechat/internal/sessions"
)

// conversation is one client's chat: its messages so far.
type conversation []map[string]any

// turn sends c's messages (greedy, n tokens) and returns the reply; it may
// run on any goroutine (it reports errors, it does not fail the test).
func (s *testServer) turn(t *testing.T, c conversation, n int) (reply, error) {
	body := map[string]any{"model": "stories260K", "messages": slices.Clone(c), "max_tokens": n, "temperature": 0}
	resp, err := http.DefaultClient.Do(s.request(t, context.Background(), http.MethodPost, "/v1/chat/completions", body))
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	var r reply
	if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != http.StatusOK || r.Usage == nil || r.Anechat == nil {
		return r, fmt.Errorf("status %d: %s (%v)", resp.StatusCode, b, err)
	}
	return r, nil
}

// next is c with r's answer and the user's next message.
func (c conversation) next(r reply, user string) conversation {
	return append(slices.Clone(c), map[string]any{"role": "assistant", "content": r.text()}, map[string]any{"role": "user", "content": user})
}

// openings are the first messages of three clients' conversations: long
// enough that a next turn (stories260K's plain template puts a newline
// after the reply) shares most of its prompt with the last one, short
// enough (under a 64-token block) that no snapshot on disk could serve it.
var openings = []string{
	"Lily and Tom played in the park with a big red ball all day long",
	"The little dog ran to the tree and barked at the bird in the sun",
	"Mom gave Sue a cake and a cup of milk and they sat in the garden",
}

// TestInterleavedConversations: three clients talk to one server at once,
// each waiting for its reply before its next turn, so their requests
// interleave in whatever order the queue takes them; with nothing on disk
// every next turn resumes its conversation's last prompt from memory, and
// every reply is the one a server that resumes nothing writes.
func TestInterleavedConversations(t *testing.T) {
	noStore := func(_ *testing.T, _ *Config, s *testServer) { s.noStore = true }
	s := startServer(t, "", noStore)
	const turns = 3
	got := make([][]string, len(openings))
	convs := make([]conversation, len(openings))
	var wg sync.WaitGroup
	errs := make(chan error, len(openings)*turns)
	for i, o := range openings {
		convs[i] = conversation{{"role": "user", "content": o}}
		wg.Go(func() {
			prev := 0
			for k := range turns {
				r, err := s.turn(t, convs[i], 8)
				if err != nil {
					errs <- fmt.Errorf("conversation %d, turn %d: %w", i, k+1, err)
					return
				}
				if k > 0 && r.Anechat.ResumedTokens < prev {
					errs <- fmt.Errorf("conversation %d, turn %d: resumed %d, prefilled %d; want its last prompt's %d resumed",
						i, k+1, r.Anechat.ResumedTokens, r.Anechat.PrefilledTokens, prev)
				}
				prev = r.Usage.PromptTokens
				got[i] = append(got[i], r.text())
				if k+1 < turns {
					convs[i] = convs[i].next(r, "And then?")
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The same conversations, one request at a time, each from scratch.
	fresh := startServer(t, "", noStore)
	fresh.run.NoResume()
	for i := range openings {
		c := conversation{{"role": "user", "content": openings[i]}}
		for k := range turns {
			r, err := fresh.turn(t, c, 8)
			if err != nil {
				t.Fatal(err)
			}
			if k < len(got[i]) && r.text() != got[i][k] {
				t.Errorf("conversation %d, turn %d: %q interleaved, %q from scratch", i, k+1, got[i][k], r.text())
			}
			c = c.next(r, "And then?")
		}
	}
}

// TestInterleavedFallsBackToSnapshots: with one warm session, a
// conversation's next turn after another client's request resumes from the
// snapshot its last reply saved on disk, and writes the same.
func TestInterleavedFallsBackToSnapshots(t *testing.T) {
	s := startServer(t, "")
	if err := s.run.KeepWarm(sessions.Warm{Sessions: 1, Bytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	system := strings.Repeat("Lily and Tom played in the park with a big red ball. ", 6) // over a block
	a := conversation{{"role": "system", "content": system}, {"role": "user", "content": "Once upon a time"}}
	b := conversation{{"role": "user", "content": "The little dog ran to the tree and barked at the bird in the sun"}}
	ra, err := s.turn(t, a, 8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.turn(t, b, 8); err != nil {
		t.Fatal(err)
	}
	a = a.next(ra, "The end.")
	ra2, err := s.turn(t, a, 8)
	if err != nil {
		t.Fatal(err)
	}
	if ra2.Anechat.ResumedTokens < 64 {
		t.Errorf("the next turn after another client's request, its session dropped: %+v; want its snapshot resumed", ra2.Anechat)
	}
	fresh := startServer(t, "", func(_ *testing.T, _ *Config, s *testServer) { s.noStore = true })
	if want, err := fresh.turn(t, a, 8); err != nil || want.text() != ra2.text() {
		t.Errorf("resumed from disk %q; from scratch %q (%v)", ra2.text(), want.text(), err)
	}
}
