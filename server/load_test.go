package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestLoad: 50 clients at once, 3 requests each (whole, streamed, and
// streams that hang up halfway), on a queue of 8. Every request is
// answered or refused with 503; every answer is exactly the reply its
// prompt gets alone (no tokens of another request in it, the hung-up ones
// a prefix of it); the server still answers afterwards and the database
// passes integrity_check.
func TestLoad(t *testing.T) {
	s := startServer(t, "", func(_ *testing.T, c *Config, _ *testServer) { c.Queue = 8 })
	// A shared system prompt of more than a block, so every reply saves a
	// KV snapshot and later ones resume from the store or the session.
	system := strings.Repeat("Lily and Tom played in the park with a big red ball. ", 6)
	names := []string{"Lily", "Tom", "Sue", "Ben", "Max", "Anna", "Sam", "Mia", "Tim", "Kim"}
	body := func(name string) map[string]any {
		return map[string]any{"model": "stories260K", "max_tokens": 12, "messages": []map[string]any{
			{"role": "system", "content": system}, {"role": "user", "content": "Once upon a time, " + name}}}
	}
	want := map[string]string{}
	distinct := map[string]bool{}
	for _, n := range names {
		want[n] = s.post(t, "/v1/chat/completions", body(n), http.StatusOK).text()
		distinct[want[n]] = true
	}
	if len(distinct) < len(names)/2 {
		t.Fatalf("only %d distinct replies for %d prompts: a mixed reply could go unseen", len(distinct), len(names))
	}

	const clients, each = 50, 3
	results := make(chan loadOutcome, clients*each)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for k := range each {
				name := names[(c+k)%len(names)]
				mode := []string{"whole", "stream", "halfway"}[(c+k)%3]
				results <- loadRequest(t, s, body(name), mode, len(want[name]))
			}
		})
	}
	wg.Wait()
	close(results)

	counts := map[string]int{}
	for r := range results {
		counts[fmt.Sprint(r.status)]++
		switch {
		case r.err != nil:
			t.Errorf("%s %s: %v", r.mode, r.name, r.err)
		case r.status == http.StatusServiceUnavailable:
			if r.retryAfter == "" {
				t.Errorf("%s %s: 503 without Retry-After", r.mode, r.name)
			}
		case r.status != http.StatusOK:
			t.Errorf("%s %s: status %d: %s", r.mode, r.name, r.status, r.text)
		case r.mode == "halfway":
			if !strings.HasPrefix(want[r.name], r.text) {
				t.Errorf("halfway %s: got %q, not a prefix of its reply %q", r.name, r.text, want[r.name])
			}
		case r.text != want[r.name]:
			t.Errorf("%s %s: got %q, want %q (its reply alone)", r.mode, r.name, r.text, want[r.name])
		}
	}
	t.Logf("statuses of %d requests: %v", clients*each, counts)
	if counts["200"] == 0 {
		t.Fatal("no request was answered")
	}
	// Still serving, still exact.
	if got := s.post(t, "/v1/chat/completions", body("Lily"), http.StatusOK).text(); got != want["Lily"] {
		t.Fatalf("after the load: %q, want %q", got, want["Lily"])
	}
	var check string
	if err := s.index.DB().SQL().QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Fatalf("integrity_check %q, %v", check, err)
	}
}

// loadOutcome is what a client of the load test saw.
type loadOutcome struct {
	name, mode, text string
	status           int
	retryAfter       string
	err              error
}

// loadRequest sends one request of the load test: whole, streamed, or a
// stream that hangs up once it has about half the reply's bytes.
func loadRequest(t *testing.T, s *testServer, body map[string]any, mode string, replyLen int) (out loadOutcome) {
	msgs := body["messages"].([]map[string]any)
	out.name = strings.TrimPrefix(msgs[len(msgs)-1]["content"].(string), "Once upon a time, ")
	out.mode = mode
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if mode != "whole" {
		body["stream"] = true
	}
	resp, err := http.DefaultClient.Do(s.request(t, ctx, http.MethodPost, "/v1/chat/completions", body))
	if err != nil {
		out.err = err
		return out
	}
	defer resp.Body.Close()
	out.status, out.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	if resp.StatusCode != http.StatusOK || mode == "whole" {
		b, err := io.ReadAll(resp.Body)
		out.err = err
		if resp.StatusCode == http.StatusOK {
			var r reply
			if out.err = json.Unmarshal(b, &r); out.err == nil {
				out.text = r.text()
			}
		} else {
			out.text = string(b)
		}
		return out
	}
	var text strings.Builder
	st, err := readStream(t, resp.Body, func(c chunk) bool {
		text.WriteString(c.piece())
		return mode != "halfway" || text.Len() < replyLen/2
	})
	out.text = text.String()
	switch {
	case err != nil:
		out.err = err
	case mode == "stream" && !st.done:
		out.err = fmt.Errorf("stream ended without [DONE]")
	}
	return out
}
