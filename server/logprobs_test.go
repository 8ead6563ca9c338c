package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"anechat/engine"
	"anechat/engine/cpu"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/engine/spec"
	"anechat/internal/sessions"
)

// chatEntry is one token of a chat choice's logprobs.content.
type chatEntry struct {
	Token       string  `json:"token"`
	Logprob     float64 `json:"logprob"`
	Bytes       []int   `json:"bytes"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	} `json:"top_logprobs"`
}

// chatContent reads a chat choice's logprobs: its content entries, raw and
// decoded.
func chatContent(t *testing.T, raw json.RawMessage) ([]json.RawMessage, []chatEntry) {
	t.Helper()
	var lp struct {
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &lp); err != nil || lp.Content == nil {
		t.Fatalf("logprobs %s: want {\"content\": [...]} (%v)", raw, err)
	}
	out := make([]chatEntry, len(lp.Content))
	for i, e := range lp.Content {
		if err := json.Unmarshal(e, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return lp.Content, out
}

func rawEqual(a, b json.RawMessage) bool { return bytes.Equal(a, b) }

func bytesOf(ints []int) []byte {
	b := make([]byte, len(ints))
	for i, v := range ints {
		b[i] = byte(v)
	}
	return b
}

// joinedText is the reply text the tokens' bytes make; the detokenizer
// may drop the first token's leading space.
func sameText(joined []byte, text string) bool {
	return string(joined) == text || strings.TrimPrefix(string(joined), " ") == text
}

// TestLogprobsChatIdenticalAtEveryWidth: chat logprobs, whole and
// streamed, are the same JSON bytes at every width 1..8 and auto, greedy
// and sampled, with drafts accepted; every entry has its 20 alternatives,
// most likely first, "token" is its "bytes", and the tokens' bytes make the
// reply's text.
func TestLogprobsChatIdenticalAtEveryWidth(t *testing.T) {
	s := startServer(t, "", withCosts)
	for _, sampled := range []bool{false, true} {
		var want []json.RawMessage
		accepted := 0
		for _, w := range []any{1, 2, 3, 4, 5, 6, 7, 8, "auto"} {
			body := user("Once upon a time", "max_tokens", 24, "logprobs", true, "top_logprobs", 20, "anechat", map[string]any{"width": w})
			if sampled {
				body["temperature"], body["seed"], body["top_p"] = 0.8, 7, 0.9
			}
			r := s.post(t, "/v1/chat/completions", body, http.StatusOK)
			raw, entries := chatContent(t, r.Choices[0].Logprobs)
			if len(entries) != r.Usage.CompletionTokens {
				t.Fatalf("width %v: %d entries for %d tokens", w, len(entries), r.Usage.CompletionTokens)
			}
			var joined []byte
			for k, e := range entries {
				joined = append(joined, bytesOf(e.Bytes)...)
				if e.Token != string(bytesOf(e.Bytes)) && utf8.Valid(bytesOf(e.Bytes)) || len(e.TopLogprobs) != 20 || e.Logprob > 0 {
					t.Fatalf("width %v: entry %d %s", w, k, raw[k])
				}
				for j := 1; j < len(e.TopLogprobs); j++ {
					if e.TopLogprobs[j].Logprob > e.TopLogprobs[j-1].Logprob {
						t.Fatalf("width %v: entry %d: alternatives out of order: %s", w, k, raw[k])
					}
				}
				if !sampled && (e.TopLogprobs[0].Token != e.Token || e.TopLogprobs[0].Logprob != e.Logprob) {
					t.Fatalf("width %v: greedy entry %d is not its most likely alternative: %s", w, k, raw[k])
				}
			}
			if !sameText(joined, r.text()) {
				t.Fatalf("width %v: tokens make %q, the reply is %q", w, joined, r.text())
			}
			st := s.stream(t, "/v1/chat/completions", body)
			var streamed []json.RawMessage
			for _, c := range st.chunks {
				if len(c.Choices) > 0 && len(c.Choices[0].Logprobs) > 0 && string(c.Choices[0].Logprobs) != "null" {
					part, _ := chatContent(t, c.Choices[0].Logprobs)
					streamed = append(streamed, part...)
				}
			}
			if !slices.EqualFunc(streamed, raw, rawEqual) || st.text() != r.text() {
				t.Fatalf("width %v: streamed logprobs differ from the whole reply's:\n%s\n%s", w, streamed, raw)
			}
			if want == nil {
				want = raw
				continue
			}
			if !slices.EqualFunc(raw, want, rawEqual) {
				t.Fatalf("sampled %v width %v: logprobs differ from width 1:\n%s\n%s", sampled, w, raw, want)
			}
			accepted += r.Anechat.Accepted
		}
		if accepted == 0 {
			t.Fatalf("sampled %v: no draft accepted at any width: speculation was not exercised", sampled)
		}
	}
	// top_logprobs 0 (or left out): the chosen tokens only, an empty list
	// of alternatives each; logprobs left out: null.
	r := s.post(t, "/v1/chat/completions", user("Once upon a time", "max_tokens", 3, "logprobs", true), http.StatusOK)
	if _, e := chatContent(t, r.Choices[0].Logprobs); len(e) != 3 || e[0].TopLogprobs == nil || len(e[0].TopLogprobs) != 0 {
		t.Fatalf("logprobs without top_logprobs: %s", r.Choices[0].Logprobs)
	}
	r = s.post(t, "/v1/chat/completions", user("Once upon a time", "max_tokens", 3), http.StatusOK)
	if string(r.Choices[0].Logprobs) != "null" {
		t.Fatalf("no logprobs asked: %s", r.Choices[0].Logprobs)
	}
}

// textLogprobsReply is a text completion choice's logprobs.
type textLogprobsReply struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// TestLogprobsCompletion: /v1/completions' logprobs N in the legacy shape,
// whole and streamed alike; text_offset points at each token's text in the
// reply; with a stop string, only the tokens that start before it are
// listed.
func TestLogprobsCompletion(t *testing.T) {
	s := startServer(t, "")
	body := func(extra ...any) map[string]any {
		m := map[string]any{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 30, "logprobs": 5}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	read := func(raw json.RawMessage) textLogprobsReply {
		var lp textLogprobsReply
		if err := json.Unmarshal(raw, &lp); err != nil || lp.Tokens == nil {
			t.Fatalf("logprobs %s: want the legacy shape (%v)", raw, err)
		}
		return lp
	}
	// streamedLogprobs joins the lists of a stream's chunks.
	streamedLogprobs := func(st streamed) textLogprobsReply {
		var out textLogprobsReply
		for _, c := range st.chunks {
			if len(c.Choices) == 0 || len(c.Choices[0].Logprobs) == 0 || string(c.Choices[0].Logprobs) == "null" {
				continue
			}
			lp := read(c.Choices[0].Logprobs)
			out.Tokens = append(out.Tokens, lp.Tokens...)
			out.TokenLogprobs = append(out.TokenLogprobs, lp.TokenLogprobs...)
			out.TopLogprobs = append(out.TopLogprobs, lp.TopLogprobs...)
			out.TextOffset = append(out.TextOffset, lp.TextOffset...)
		}
		return out
	}
	r := s.post(t, "/v1/completions", body(), http.StatusOK)
	lp := read(r.Choices[0].Logprobs)
	text := []rune(r.text())
	n := r.Usage.CompletionTokens
	if len(lp.Tokens) != n || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n {
		t.Fatalf("%d tokens: logprobs %+v", n, lp)
	}
	for i, tok := range lp.Tokens {
		if len(lp.TopLogprobs[i]) == 0 || len(lp.TopLogprobs[i]) > 5 || lp.TokenLogprobs[i] > 0 {
			t.Fatalf("token %d %q: logprob %v, alternatives %v", i, tok, lp.TokenLogprobs[i], lp.TopLogprobs[i])
		}
		// Greedy: the chosen token is the most likely alternative.
		best := -1e9
		for _, v := range lp.TopLogprobs[i] {
			best = max(best, v)
		}
		if lp.TopLogprobs[i][tok] != lp.TokenLogprobs[i] || best != lp.TokenLogprobs[i] {
			t.Fatalf("token %d %q: logprob %v, alternatives %v", i, tok, lp.TokenLogprobs[i], lp.TopLogprobs[i])
		}
		at := lp.TextOffset[i]
		if i > 0 && (at < lp.TextOffset[i-1] || at > len(text) || !strings.HasPrefix(string(text[at:]), tok)) {
			t.Fatalf("token %d %q at %d: the text there is %q", i, tok, at, string(text[min(at, len(text)):]))
		}
	}
	if lp.TextOffset[0] != 0 || !sameText([]byte(strings.Join(lp.Tokens, "")), r.text()) {
		t.Fatalf("tokens %q at %v for %q", lp.Tokens, lp.TextOffset, r.text())
	}
	st := s.stream(t, "/v1/completions", body())
	if got := streamedLogprobs(st); fmt.Sprint(got) != fmt.Sprint(lp) {
		t.Fatalf("streamed logprobs %+v\nwhole %+v", got, lp)
	}
	// A stop string that starts inside a token: that token is listed (its
	// text began before the stop), the ones after are not.
	cut := lp.TextOffset[n/2] + 1
	stop := string(text[cut : cut+3])
	wantN := 0
	for wantN < n && lp.TextOffset[wantN] < strings.Index(string(text), stop) {
		wantN++
	}
	// (text offsets count characters; the stories text is ASCII)
	r = s.post(t, "/v1/completions", body("stop", stop), http.StatusOK)
	cutLP := read(r.Choices[0].Logprobs)
	if r.Choices[0].FinishReason != "stop" || len(cutLP.Tokens) != wantN || !slices.Equal(cutLP.Tokens, lp.Tokens[:wantN]) {
		t.Fatalf("stop %q: %q with tokens %q, want the first %d of %q", stop, r.text(), cutLP.Tokens, wantN, lp.Tokens)
	}
	if got := streamedLogprobs(s.stream(t, "/v1/completions", body("stop", stop))); fmt.Sprint(got) != fmt.Sprint(cutLP) {
		t.Fatalf("stop %q streamed: %+v\nwhole %+v", stop, got, cutLP)
	}
	// logprobs 0: the chosen tokens', no alternatives.
	r = s.post(t, "/v1/completions", body("logprobs", 0, "max_tokens", 3), http.StatusOK)
	if z := read(r.Choices[0].Logprobs); len(z.TokenLogprobs) != 3 || len(z.TopLogprobs) != 3 || len(z.TopLogprobs[0]) != 0 {
		t.Fatalf("logprobs 0: %s", r.Choices[0].Logprobs)
	}
}

// TestLogprobsBadInput: each out-of-range or misplaced logprobs field is a
// 400 naming it.
func TestLogprobsBadInput(t *testing.T) {
	s := startServer(t, "")
	comp := func(extra ...any) map[string]any {
		m := map[string]any{"model": "stories260K", "prompt": "Once"}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	for _, c := range []struct {
		path  string
		body  any
		param string
	}{
		{"/v1/chat/completions", user("x", "logprobs", 5), "logprobs"},
		{"/v1/chat/completions", user("x", "logprobs", true, "top_logprobs", 21), "top_logprobs"},
		{"/v1/chat/completions", user("x", "logprobs", true, "top_logprobs", -1), "top_logprobs"},
		{"/v1/chat/completions", user("x", "top_logprobs", 3), "top_logprobs"},
		{"/v1/chat/completions", user("x", "logprobs", false, "top_logprobs", 3), "top_logprobs"},
		{"/v1/chat/completions", user("x", "logprobs", true, "top_logprobs", "all"), "top_logprobs"},
		{"/v1/completions", comp("logprobs", 6), "logprobs"},
		{"/v1/completions", comp("logprobs", -1), "logprobs"},
		{"/v1/completions", comp("logprobs", true), "logprobs"},
		{"/v1/completions", comp("logprobs", 2.5), "logprobs"},
		{"/v1/completions", comp("logprobs", 2, "top_logprobs", 2), "top_logprobs"},
	} {
		resp, b := s.do(t, http.MethodPost, c.path, c.body)
		var r reply
		if err := json.Unmarshal(b, &r); err != nil || r.Error == nil || r.Error.Param == nil {
			t.Fatalf("%s %v: %d %s", c.path, c.body, resp.StatusCode, b)
		}
		if resp.StatusCode != 400 || *r.Error.Param != c.param || !strings.Contains(r.Error.Message, c.param) {
			t.Errorf("%s %v: %d %q %q, want 400 naming %s", c.path, c.body, resp.StatusCode, *r.Error.Param, r.Error.Message, c.param)
		}
	}
	// The neutral values are accepted.
	s.post(t, "/v1/chat/completions", user("Once", "max_tokens", 2, "logprobs", false, "top_logprobs", 0), http.StatusOK)
	s.post(t, "/v1/completions", comp("max_tokens", 2, "logprobs", nil), http.StatusOK)
}

// TestLogprobQueue: each token's logprobs go out with the first text it
// starts: a token that holds part of a character (no text yet) waits for
// it, text a stop string may begin is held back with its tokens, and the
// tokens of the stop string are never released.
func TestLogprobQueue(t *testing.T) {
	f := &stopFilter{stops: []string{"wor"}}
	q := &logprobQueue{f: f}
	var got [][]int32
	for i, piece := range []string{"Hel", "", "é w", "o", "rld"} {
		q.add(engine.Token{Token: spec.Token{ID: int32(i)}})
		f.push(piece)
		var ids []int32
		for _, lp := range q.release(false) {
			ids = append(ids, lp.id)
		}
		got = append(got, ids)
	}
	want := [][]int32{{0}, nil, {1, 2}, nil, nil}
	if fmt.Sprint(got) != fmt.Sprint(want) || !f.stopped {
		t.Fatalf("released %v, want %v (stopped %v)", got, want, f.stopped)
	}
	if rest := q.release(!f.stopped); len(rest) != 0 {
		t.Fatalf("the stop string's tokens %v were released", rest)
	}
	// Offsets count characters: "Helé " is 5.
	f = &stopFilter{}
	q = &logprobQueue{f: f}
	for i, piece := range []string{"Hel", "é ", "x"} {
		q.add(engine.Token{Token: spec.Token{ID: int32(i)}})
		f.push(piece)
	}
	var offs []int
	for _, lp := range q.release(true) {
		offs = append(offs, lp.offset)
	}
	if !slices.Equal(offs, []int{0, 3, 5}) {
		t.Fatalf("offsets %v, want [0 3 5]", offs)
	}
}

// argmaxOnlyLoader opens models as backends that say they return greedy
// ids only (a published Core ML bundle's kind).
type argmaxOnlyLoader struct{ load.Loader }

func (l argmaxOnlyLoader) Open(ctx context.Context, src load.Source, opts load.Options) (model.Backend, error) {
	b, err := l.Loader.Open(ctx, src, opts)
	if err != nil {
		return nil, err
	}
	return argmaxOnlyBackend{b}, nil
}

type argmaxOnlyBackend struct{ model.Backend }

func (argmaxOnlyBackend) ArgmaxOnly() bool { return true }

// TestLogprobsRefusedByGreedyOnlyModel: a model that returns no logits
// answers logprobs with a 400 naming the field and the model, before any
// token; the same request without logprobs is served.
func TestLogprobsRefusedByGreedyOnlyModel(t *testing.T) {
	s := startServer(t, "", func(t *testing.T, c *Config, s *testServer) {
		s.run = sessions.New(nil, load.NewRegistry(argmaxOnlyLoader{cpu.Loader{}}))
		c.Sessions = s.run
	})
	resp, b := s.do(t, http.MethodPost, "/v1/chat/completions", user("Once", "max_tokens", 2, "logprobs", true))
	var r reply
	if err := json.Unmarshal(b, &r); err != nil || resp.StatusCode != 400 || r.Error == nil || r.Error.Param == nil ||
		*r.Error.Param != "logprobs" || !strings.Contains(r.Error.Message, "stories260K") {
		t.Fatalf("logprobs of a greedy-only model: %d %s", resp.StatusCode, b)
	}
	s.post(t, "/v1/chat/completions", user("Once", "max_tokens", 2), http.StatusOK)
}

// FuzzLogprobsFields: whatever a client sends as logprobs and top_logprobs,
// reading them neither panics nor accepts a value out of range, and the
// legacy alternatives object of any token texts (invalid UTF-8 included)
// is valid JSON with each key once.
func FuzzLogprobsFields(f *testing.F) {
	f.Add([]byte("true"), 20, true, "a", "\xff")
	f.Add([]byte("5"), 0, false, "", "")
	f.Add([]byte(`"x"`), -3, true, "\xe6\x97", "\xe6\x97")
	f.Fuzz(func(t *testing.T, raw []byte, top int, hasTop bool, k1, k2 string) {
		var tp *int
		if hasTop {
			tp = &top
		}
		cr := &chatRequest{}
		cr.Logprobs, cr.TopLogprobs = raw, tp
		if on, n, e := cr.chatLogprobs(); e == nil && (n < 0 || n > 20 || (!on && n > 0)) {
			t.Fatalf("chat %q top %v: accepted on %v top %d", raw, tp, on, n)
		}
		tr := &completionRequest{}
		tr.Logprobs, tr.TopLogprobs = raw, tp
		if on, n, e := tr.completionLogprobs(); e == nil && (n < 0 || n > maxTextLogprobs || (!on && n > 0)) {
			t.Fatalf("completions %q: accepted on %v top %d", raw, on, n)
		}
		b, err := json.Marshal(topByKey{{k1, -1}, {k2, -2}})
		var m map[string]float64
		if err != nil || json.Unmarshal(b, &m) != nil || !bytes.HasPrefix(b, []byte("{")) {
			t.Fatalf("alternatives %q %q: %s (%v)", k1, k2, b, err)
		}
		// Count the keys as written (a map would hide a repeated one); the
		// first is the more likely alternative's.
		keys, first, dec := 0, 0.0, json.NewDecoder(bytes.NewReader(b))
		dec.Token()
		for dec.More() {
			dec.Token()
			v, _ := dec.Token()
			if keys == 0 {
				first, _ = v.(float64)
			}
			keys++
		}
		j1, _ := json.Marshal(k1)
		j2, _ := json.Marshal(k2)
		want := 2
		if bytes.Equal(j1, j2) {
			want = 1 // the same text as JSON writes it: the more likely stays
		}
		if keys != len(m) || keys != want || first != -1 {
			t.Fatalf("alternatives %q %q: %s has %d keys, want %d, the first -1", k1, k2, b, keys, want)
		}
	})
}
