package server

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"anechat/engine"
	"anechat/engine/chat"
	"anechat/engine/cpu"
	"anechat/engine/load"
	"anechat/internal/sessions"
	"anechat/internal/testres"
)

// promptLen is the number of ids the chat template renders msgs to, as the
// server's sessions manager renders them.
func promptLen(t *testing.T, s *testServer, text string) int {
	t.Helper()
	var n int
	err := s.run.Do(context.Background(), testres.Stories(t), func(m *sessions.Model) error {
		ids, err := m.Render(context.Background(), []chat.Message{{Role: chat.RoleUser, Content: text}})
		n = len(ids)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestChatCompletion(t *testing.T) {
	s := startServer(t, "")
	r := s.post(t, "/v1/chat/completions", user("Once upon a time", "max_tokens", 12), http.StatusOK)
	if r.Object != "chat.completion" || r.Model != "stories260K" || !strings.HasPrefix(r.ID, "chatcmpl-") || len(r.Choices) != 1 ||
		r.Choices[0].Message.Role != "assistant" || r.text() == "" || r.Choices[0].FinishReason != "length" {
		t.Fatalf("reply %+v", r)
	}
	if want := promptLen(t, s, "Once upon a time"); r.Usage == nil || r.Usage.PromptTokens != want || r.Usage.CompletionTokens != 12 || r.Usage.TotalTokens != want+12 {
		t.Fatalf("usage %+v, want %d prompt and 12 completion tokens", r.Usage, want)
	}
	if f := r.Anechat; f == nil || f.TargetCalls == 0 || f.Width != 4 || f.PrefilledTokens+f.ResumedTokens != r.Usage.PromptTokens {
		t.Fatalf("anechat figures %+v", f)
	}
	// A reply at width 4 that drafted nothing says why (issue 23).
	if f := r.Anechat; (f.Drafted == 0) != (f.DraftNote != "") && f.Declined == 0 {
		t.Fatalf("anechat figures %+v: drafted %d with draft note %q", f, f.Drafted, f.DraftNote)
	}

	// The same streamed: the same text, the role first, the finish reason
	// with the figures, the usage last (include_usage), then [DONE].
	st := s.stream(t, "/v1/chat/completions", user("Once upon a time", "max_tokens", 12, "stream_options", map[string]any{"include_usage": true}))
	if st.text() != r.text() || st.finish() != "length" {
		t.Fatalf("streamed %q (%s), whole %q", st.text(), st.finish(), r.text())
	}
	first, last := st.chunks[0], st.chunks[len(st.chunks)-1]
	if first.Object != "chat.completion.chunk" || first.Choices[0].Delta.Role == nil || *first.Choices[0].Delta.Role != "assistant" {
		t.Fatalf("first chunk %+v", first)
	}
	if len(last.Choices) != 0 || last.Usage == nil || *last.Usage != *r.Usage {
		t.Fatalf("last chunk %+v, want the usage %+v and no choices", last, r.Usage)
	}
	fin := st.chunks[len(st.chunks)-2]
	if fin.Anechat == nil || fin.Anechat.TargetCalls == 0 || fin.Usage != nil {
		t.Fatalf("finish chunk %+v: want the figures, usage null", fin)
	}
	// Without include_usage no chunk carries usage.
	for _, c := range s.stream(t, "/v1/chat/completions", user("Once upon a time", "max_tokens", 3)).chunks {
		if c.Usage != nil {
			t.Fatalf("usage %+v without include_usage", c.Usage)
		}
	}
}

func TestTextCompletion(t *testing.T) {
	s := startServer(t, "")
	body := map[string]any{"model": "stories260K", "prompt": "Once upon a time", "max_tokens": 10}
	r := s.post(t, "/v1/completions", body, http.StatusOK)
	if r.Object != "text_completion" || r.text() == "" || r.Choices[0].FinishReason != "length" || r.Usage.CompletionTokens != 10 {
		t.Fatalf("reply %+v", r)
	}
	// BOS + the encoded text, as `anechat generate --raw`: stories260K's
	// reference prompt.
	if r.Usage.PromptTokens != len(testres.StoriesPrompt()) {
		t.Fatalf("prompt tokens %d, want %d", r.Usage.PromptTokens, len(testres.StoriesPrompt()))
	}
	st := s.stream(t, "/v1/completions", body)
	if st.text() != r.text() || st.chunks[0].Object != "text_completion" || st.finish() != "length" {
		t.Fatalf("streamed %q (%s), whole %q", st.text(), st.finish(), r.text())
	}
}

// Speculation never changes a stream: the same events, piece by piece, at
// every width, greedy and sampled (seed, temperature, top_p), while drafts
// were accepted.
func TestStreamIdenticalAtEveryWidth(t *testing.T) {
	s := startServer(t, "", withCosts)
	for _, sampled := range []bool{false, true} {
		var want []string
		accepted := 0
		// Width 1 first: its reply joins the drafting corpus, so the wider
		// runs of the same request have something to draft from.
		for _, w := range []any{1, 4, 2, "auto", 8} {
			body := user("Once upon a time", "max_tokens", 40, "anechat", map[string]any{"width": w})
			if sampled {
				body["temperature"], body["seed"], body["top_p"] = 0.8, 7, 0.9
			}
			st := s.stream(t, "/v1/chat/completions", body)
			got := st.pieces()
			if want == nil {
				want = got
				continue
			}
			if !slices.Equal(got, want) {
				t.Fatalf("sampled %v, width %v: pieces\n%q\nwidth 1:\n%q", sampled, w, got, want)
			}
			accepted += st.chunks[len(st.chunks)-1].Anechat.Accepted
		}
		if accepted == 0 {
			t.Fatalf("sampled %v: no draft accepted at any width: speculation was not exercised", sampled)
		}
		t.Logf("sampled %v: %d pieces, %d drafted tokens accepted over the wide runs", sampled, len(want), accepted)
	}
}

// withCosts gives the sessions manager a stored cost table for stories260K, so that
// drafts are sent the same way under load as on an idle machine.
func withCosts(t *testing.T, c *Config, s *testServer) {
	src, err := load.Detect(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	costs := fixedCosts{engine.CostsKey(src.Fingerprint, cpu.Kernels()): `{"widths":[1,2,3,4,5,6,7,8],"seconds":{"1":0.001,"2":0.0011,"3":0.0012,"4":0.0013,"5":0.0014,"6":0.0015,"7":0.0016,"8":0.0017}}`}
	s.costs = costs
}

// A stop string ends the reply before it, also when it spans tokens, and no
// part of it is ever streamed.
func TestStopStrings(t *testing.T) {
	s := startServer(t, "")
	base := func(extra ...any) map[string]any {
		return user("Once upon a time", append([]any{"max_tokens", 40, "anechat", map[string]any{"width": 1}}, extra...)...)
	}
	full := s.stream(t, "/v1/chat/completions", base())
	pieces := full.pieces()
	text := full.text()
	// A stop across the boundary of two pieces with at least 2 bytes each.
	var stop string
	for i := 2; i+1 < len(pieces) && stop == ""; i++ {
		if len(pieces[i]) >= 2 && len(pieces[i+1]) >= 2 {
			stop = pieces[i][len(pieces[i])-2:] + pieces[i+1][:2]
		}
	}
	if stop == "" {
		t.Fatalf("no two neighbouring pieces of 2 bytes in %q", pieces)
	}
	at := strings.Index(text, stop)
	cases := []struct {
		name   string
		stops  any
		want   string
		finish string
	}{
		{"across tokens", stop, text[:at], "stop"},
		{"the earliest of several", []string{"never in it", stop, text[at+1:]}, text[:at], "stop"},
		{"at the start", []string{pieces[0]}, "", "stop"},
		{"absent", []string{"never in it"}, text, "length"},
	}
	for _, c := range cases {
		r := s.post(t, "/v1/chat/completions", base("stop", c.stops), http.StatusOK)
		if r.text() != c.want || r.Choices[0].FinishReason != c.finish {
			t.Errorf("%s (stop %q): %q (%s), want %q (%s)", c.name, c.stops, r.text(), r.Choices[0].FinishReason, c.want, c.finish)
		}
		st := s.stream(t, "/v1/chat/completions", base("stop", c.stops))
		if st.text() != c.want || st.finish() != c.finish {
			t.Errorf("%s streamed (stop %q): %q (%s), want %q (%s)", c.name, c.stops, st.text(), st.finish(), c.want, c.finish)
		}
	}
}

// TestStopFilter splits texts into pieces every possible way and checks
// that the filter lets through exactly the text before the first stop,
// never any part of a stop, and holds back no more than the longest stop
// string's start that the text ends with.
func TestStopFilter(t *testing.T) {
	for _, c := range []struct {
		text  string
		stops []string
	}{
		{"abcabcabd", []string{"abd"}},
		{"hello world", []string{"o w", "xyz"}},
		{"aaaab", []string{"aab", "aaaa"}},
		{"the end.\n\nUser:", []string{"\n\nUser:"}},
		{"crème brûlée", []string{"brû", "èm"}},
		{"no stop here", []string{"stop!", "z"}},
		{"stop", []string{"stop"}},
	} {
		want := c.text
		for _, s := range c.stops {
			if i := strings.Index(c.text, s); i >= 0 && i < len(want) {
				want = c.text[:i]
			}
		}
		longest := 0
		for _, s := range c.stops {
			longest = max(longest, len(s))
		}
		n := len(c.text)
		for mask := 0; mask < 1<<(n-1); mask++ {
			f := &stopFilter{stops: c.stops}
			var sent strings.Builder
			prev, stopped := 0, false
			for i := 1; i <= n && !stopped; i++ {
				if i < n && mask&(1<<(i-1)) == 0 {
					continue
				}
				out, st := f.push(c.text[prev:i])
				sent.WriteString(out)
				stopped = st
				if held := i - sent.Len(); !stopped && held > longest-1 {
					t.Fatalf("%q stops %q split %b: holds back %d bytes after %q", c.text, c.stops, mask, held, c.text[:i])
				}
				prev = i
			}
			if !stopped {
				sent.WriteString(f.flush())
			}
			if sent.String() != want {
				t.Fatalf("%q stops %q split %b: sent %q, want %q", c.text, c.stops, mask, sent.String(), want)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	s := startServer(t, "")
	// More words than the context has positions: more tokens too.
	var ctxLen int
	s.run.Do(context.Background(), testres.Stories(t), func(m *sessions.Model) error {
		ctxLen = m.Backend().Config().ContextLen
		return nil
	})
	long := strings.Repeat("dog ", ctxLen+1)
	for _, c := range []struct {
		path   string
		body   any
		status int
		param  string
		code   string
	}{
		{"/v1/chat/completions", `{"model": `, 400, "", "invalid_json"},
		{"/v1/chat/completions", `[1, 2]`, 400, "", "invalid_json"},
		{"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}}}, 400, "model", ""},
		{"/v1/chat/completions", user("x", "model", "gpt-4o"), 404, "model", "model_not_found"},
		{"/v1/chat/completions", user("x", "max_tokens", "ten"), 400, "max_tokens", ""},
		{"/v1/chat/completions", user("x", "max_tokens", 0), 400, "max_tokens", ""},
		{"/v1/chat/completions", user("x", "max_completion_tokens", -1), 400, "max_completion_tokens", ""},
		{"/v1/chat/completions", user("x", "temperature", 3), 400, "temperature", ""},
		{"/v1/chat/completions", user("x", "top_p", 0), 400, "top_p", ""},
		{"/v1/chat/completions", user("x", "seed", "s"), 400, "seed", ""},
		{"/v1/chat/completions", user("x", "n", 2), 400, "n", ""},
		{"/v1/chat/completions", user("x", "stop", []string{"a", "b", "c", "d", "e"}), 400, "stop", ""},
		{"/v1/chat/completions", user("x", "stop", []string{""}), 400, "stop[0]", ""},
		{"/v1/chat/completions", user("x", "stop", 7), 400, "stop", ""},
		{"/v1/chat/completions", user("x", "stream_options", map[string]any{"include_usage": true}), 400, "stream_options", ""},
		{"/v1/chat/completions", user("x", "anechat", map[string]any{"width": 9}), 400, "anechat.width", ""},
		{"/v1/chat/completions", user("x", "tools", []any{map[string]any{"type": "function"}}), 400, "tools[0].function", ""},
		{"/v1/chat/completions", user("x", "logprobs", "yes"), 400, "logprobs", ""},
		{"/v1/chat/completions", user("x", "frequency_penalty", 0.5), 400, "frequency_penalty", ""},
		{"/v1/chat/completions", map[string]any{"model": "stories260K", "messages": []any{}}, 400, "messages", ""},
		{"/v1/chat/completions", map[string]any{"model": "stories260K", "messages": []any{map[string]any{"role": "function", "content": "x"}}}, 400, "messages[0].role", ""},
		{"/v1/chat/completions", map[string]any{"model": "stories260K", "messages": []any{map[string]any{"role": "user"}}}, 400, "messages[0].content", ""},
		{"/v1/chat/completions", map[string]any{"model": "stories260K", "messages": []any{map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "http://x/y.png"}}}}}}, 400, "messages[0].content[0]", ""},
		{"/v1/chat/completions", user(long), 413, "messages", "context_length_exceeded"},
		{"/v1/chat/completions", `{"model": "stories260K", "messages": "` + strings.Repeat("x", maxBody) + `"}`, 413, "", "body_too_large"},
		{"/v1/completions", map[string]any{"model": "stories260K"}, 400, "prompt", ""},
		{"/v1/completions", map[string]any{"model": "stories260K", "prompt": long}, 413, "prompt", "context_length_exceeded"},
		{"/v1/embeddings", map[string]any{"model": "stories260K"}, 404, "", "not_found"},
	} {
		resp, b := s.do(t, http.MethodPost, c.path, c.body)
		var r reply
		if err := json.Unmarshal(b, &r); err != nil || r.Error == nil || r.Error.Message == "" || r.Error.Type == "" {
			t.Errorf("%s %.80v: body %.200s is not an OpenAI error (%v)", c.path, c.body, b, err)
			continue
		}
		param, code := "", ""
		if r.Error.Param != nil {
			param = *r.Error.Param
		}
		if r.Error.Code != nil {
			code = *r.Error.Code
		}
		if resp.StatusCode != c.status || param != c.param || (c.code != "" && code != c.code) {
			t.Errorf("%s %.80v: status %d param %q code %q (%s), want %d %q %q", c.path, c.body, resp.StatusCode, param, code, r.Error.Message, c.status, c.param, c.code)
		}
		if c.param != "" && !strings.Contains(r.Error.Message, c.param) {
			t.Errorf("%s %.80v: message %q does not name %s", c.path, c.body, r.Error.Message, c.param)
		}
	}
	// Errors leave the server working.
	s.post(t, "/v1/chat/completions", user("Once upon a time", "max_tokens", 3), http.StatusOK)
}

func TestModels(t *testing.T) {
	s := startServer(t, "")
	resp, b := s.do(t, http.MethodGet, "/v1/models", nil)
	var list struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}
	if err := json.Unmarshal(b, &list); err != nil || resp.StatusCode != 200 || list.Object != "list" || len(list.Data) != 1 ||
		list.Data[0].ID != "stories260K" || list.Data[0].Object != "model" {
		t.Fatalf("GET /v1/models: %d %s (%v)", resp.StatusCode, b, err)
	}
	if resp, b := s.do(t, http.MethodGet, "/v1/models/stories260K", nil); resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"stories260K"`) {
		t.Fatalf("GET /v1/models/stories260K: %d %s", resp.StatusCode, b)
	}
	if resp, _ := s.do(t, http.MethodGet, "/v1/models/llama", nil); resp.StatusCode != 404 {
		t.Fatalf("GET an unknown model: %d", resp.StatusCode)
	}
}

func TestToken(t *testing.T) {
	s := startServer(t, "")
	for _, c := range []struct {
		auth string
		want int
	}{
		{"", 401},
		{"Bearer wrong-token-0123456789abcdef", 401},
		{"Bearer " + testToken[:len(testToken)-1], 401},
		{"Basic " + testToken, 401},
		{testToken, 401},
		{"bearer " + testToken, 200},
	} {
		resp, b := s.do(t, http.MethodGet, "/v1/models", nil, "Authorization", c.auth)
		if resp.StatusCode != c.want {
			t.Errorf("Authorization %q: %d, want %d", c.auth, resp.StatusCode, c.want)
		}
		if c.want == 401 && (resp.Header.Get("WWW-Authenticate") == "" || !strings.Contains(string(b), `"authentication_error"`)) {
			t.Errorf("Authorization %q: 401 without WWW-Authenticate or error shape: %s", c.auth, b)
		}
	}
	// Generation needs it too.
	resp, _ := s.do(t, http.MethodPost, "/v1/chat/completions", user("x"), "Authorization", "")
	if resp.StatusCode != 401 {
		t.Fatalf("chat without a token: %d", resp.StatusCode)
	}
}

// A page that rebinds its own domain to 127.0.0.1 sends its domain as the
// Host: refused, token or not.
func TestHostHeader(t *testing.T) {
	s := startServer(t, "")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.url, "http://"))
	for host, want := range map[string]int{
		"127.0.0.1:" + port:              200,
		"localhost:" + port:              200,
		"LOCALHOST.:" + port:             200,
		"attacker.example:" + port:       403,
		"localhost.attacker.com:" + port: 403,
		"127.0.0.1":                      403, // port 80
		"localhost:1":                    403,
		"[::1]:" + port:                  403, // not an address it listens on
	} {
		resp, b := s.do(t, http.MethodGet, "/v1/models", nil, "Host", host)
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d, want %d: %s", host, resp.StatusCode, want, b)
		}
	}
}

func TestHostCheckNames(t *testing.T) {
	any4 := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	h, _ := newHostCheck("0.0.0.0", any4)
	for host, want := range map[string]bool{"192.168.1.9:8080": true, "localhost:8080": true, "[fe80::1]:8080": true,
		"myhost.lan:8080": false, "192.168.1.9:80": false} {
		if h.allowed(host) != want {
			t.Errorf("listening on 0.0.0.0: Host %q allowed %v, want %v", host, !want, want)
		}
	}
	named, _ := newHostCheck("myhost.lan", &net.TCPAddr{IP: net.IPv4(192, 168, 1, 9), Port: 8080})
	for host, want := range map[string]bool{"myhost.lan:8080": true, "192.168.1.9:8080": true, "localhost:8080": false, "10.0.0.1:8080": false} {
		if named.allowed(host) != want {
			t.Errorf("listening as myhost.lan: Host %q allowed %v, want %v", host, !want, want)
		}
	}
}

func TestCORS(t *testing.T) {
	preflight := func(s *testServer, origin string) *http.Response {
		resp, _ := s.do(t, http.MethodOptions, "/v1/chat/completions", nil, "Authorization", "", "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type")
		return resp
	}
	// Off by default: no CORS header, and a preflight is not answered.
	s := startServer(t, "")
	if resp := preflight(s, "http://localhost:5173"); resp.StatusCode == 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight without --cors: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := s.do(t, http.MethodGet, "/v1/models", nil, "Origin", "http://localhost:5173"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("CORS header without --cors: %v", resp.Header)
	}
	s.stop()

	s = startServer(t, "", func(_ *testing.T, c *Config, _ *testServer) { c.CORS = "http://localhost:5173" })
	resp := preflight(s, "http://localhost:5173")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight from the origin: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := preflight(s, "http://evil.example"); resp.StatusCode == 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight from another origin: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = s.do(t, http.MethodGet, "/v1/models", nil, "Origin", "http://localhost:5173")
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Fatalf("GET from the origin: %d %v", resp.StatusCode, resp.Header)
	}
}

// Requests wait their turn in a bounded queue; past it they are refused
// with 503 and Retry-After, and the queued ones are answered once the model
// is free.
func TestQueueFull(t *testing.T) {
	s := startServer(t, "", withGate, func(_ *testing.T, c *Config, _ *testServer) { c.Queue = 2 })
	s.gate.arm(0) // the first request's prefill blocks
	results := make(chan int, 3)
	send := func() {
		go func() {
			resp, _ := s.do(t, http.MethodPost, "/v1/chat/completions", user("Once upon a time", "max_tokens", 4, "anechat", map[string]any{"width": 1}))
			results <- resp.StatusCode
		}()
	}
	send()
	<-s.gate.blocked
	send()
	send()
	for s.srv.queue.waitingN() < 2 {
		time.Sleep(time.Millisecond)
	}
	resp, b := s.do(t, http.MethodPost, "/v1/chat/completions", user("Once upon a time", "max_tokens", 4))
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != 503 || err != nil || ra < 1 || !strings.Contains(string(b), `"queue_full"`) {
		t.Fatalf("a request past the queue: %d, Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	s.gate.open()
	for range 3 {
		if code := <-results; code != 200 {
			t.Fatalf("a queued request got %d", code)
		}
	}
}

func TestFIFOOrderAndCancel(t *testing.T) {
	q := newFIFO(8)
	first, err := q.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 4)
	ctxGone, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	for i := range 4 {
		ctx := context.Background()
		if i == 1 {
			ctx = ctxGone
		}
		go func() {
			rel, err := q.acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			order <- i
			rel()
		}()
		for q.waitingN() < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	cancel() // the second waiter leaves the queue
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	first()
	var got []int
	for range 3 {
		got = append(got, <-order)
	}
	if !slices.Equal(got, []int{0, 2, 3}) {
		t.Fatalf("served in order %v, want [0 2 3]", got)
	}
	if rel, err := q.acquire(context.Background()); err != nil || q.waitingN() != 0 {
		t.Fatalf("after the queue emptied: %v", err)
	} else {
		rel()
	}
}

// A client that goes away cancels its generation at once (the model call
// in flight sees its context end) and frees the model for the next one.
func TestDisconnectCancels(t *testing.T) {
	s := startServer(t, "", withGate)
	for _, stream := range []bool{true, false} {
		s.gate.arm(1) // the prefill passes; the first decode call blocks
		ctx, cancel := context.WithCancel(context.Background())
		body := user("Once upon a time", "max_tokens", 50, "stream", stream, "anechat", map[string]any{"width": 1})
		got := make(chan string, 1)
		go func() {
			resp, err := http.DefaultClient.Do(s.request(t, ctx, http.MethodPost, "/v1/chat/completions", body))
			if err != nil {
				got <- "request: " + err.Error()
				return
			}
			defer resp.Body.Close()
			// Read up to the first piece of text, then keep the connection
			// until the test hangs up (cancel).
			st, _ := readStream(t, resp.Body, func(c chunk) bool { return c.piece() == "" })
			got <- st.text()
			<-ctx.Done()
		}()
		if stream {
			// The first piece arrives, the next model call blocks (in
			// either order); then the client hangs up.
			if first := <-got; first == "" || strings.HasPrefix(first, "request:") {
				t.Fatalf("streamed: first piece %q", first)
			}
			<-s.gate.blocked
		} else {
			select {
			case <-s.gate.blocked:
			case g := <-got:
				t.Fatalf("the request ended (%q) before a model call blocked", g)
			}
		}
		cancel()
		select {
		case err := <-s.gate.ended:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("stream %v: the blocked model call ended with %v, want the request's cancellation", stream, err)
			}
		case <-time.After(2 * time.Minute): // a hang guard, not a measurement
			t.Fatalf("stream %v: the generation was not cancelled when its client left", stream)
		}
		s.gate.open()
		r := s.post(t, "/v1/chat/completions", user("Once upon a time", "max_tokens", 5), http.StatusOK)
		if r.Usage.CompletionTokens != 5 {
			t.Fatalf("the next request after a disconnect: %+v", r)
		}
	}
}

// The next turn of a conversation resumes from the session (in memory);
// after a restart, from the KV snapshot the previous reply saved; the
// replies are those of a server that resumes nothing.
func TestResumeAcrossRequestsAndRestart(t *testing.T) {
	dir := t.TempDir()
	system := strings.Repeat("Lily and Tom played in the park with a big red ball. ", 6)
	msgs := []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": "Once upon a time"}}
	body := func() map[string]any {
		return map[string]any{"model": "stories260K", "messages": slices.Clone(msgs), "max_tokens": 16}
	}
	s := startServer(t, dir)
	r1 := s.post(t, "/v1/chat/completions", body(), http.StatusOK)
	if r1.Anechat.ResumedTokens != 0 || r1.Usage.PromptTokens <= 64 {
		t.Fatalf("first turn %+v %+v: want a prompt of more than a block, nothing resumed", r1.Usage, r1.Anechat)
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": r1.text()}, map[string]any{"role": "user", "content": "The end."})
	r2 := s.post(t, "/v1/chat/completions", body(), http.StatusOK)
	if r2.Anechat.ResumedTokens < r1.Usage.PromptTokens || r2.Anechat.PrefilledTokens >= r2.Usage.PromptTokens-r1.Usage.PromptTokens+1 {
		t.Fatalf("second turn %+v %+v (first prompt %d tokens): want the first prompt resumed from memory", r2.Usage, r2.Anechat, r1.Usage.PromptTokens)
	}
	s.stop()

	msgs = append(msgs, map[string]any{"role": "assistant", "content": r2.text()}, map[string]any{"role": "user", "content": "Again."})
	s = startServer(t, dir)
	r3 := s.post(t, "/v1/chat/completions", body(), http.StatusOK)
	if r3.Anechat.ResumedTokens < 64 {
		t.Fatalf("third turn after a restart %+v %+v: want the stored prefix resumed", r3.Usage, r3.Anechat)
	}
	// A server with no snapshots and a fresh session writes the same.
	fresh := startServer(t, "", func(_ *testing.T, _ *Config, s *testServer) { s.noStore = true })
	if again := fresh.post(t, "/v1/chat/completions", body(), http.StatusOK); again.text() != r3.text() || again.Anechat.ResumedTokens != 0 {
		t.Fatalf("from scratch %q (%+v), resumed %q", again.text(), again.Anechat, r3.text())
	}
}

// Drafts come from earlier requests too: asked again, a question's reply
// is drafted from the first answer (more accepted), and stays the same.
func TestDraftsFromEarlierRequests(t *testing.T) {
	s := startServer(t, "", withCosts)
	q := user("Lily", "max_tokens", 40, "anechat", map[string]any{"width": 4})
	first := s.post(t, "/v1/chat/completions", q, http.StatusOK)
	second := s.post(t, "/v1/chat/completions", q, http.StatusOK)
	if second.text() != first.text() || second.Anechat.Accepted <= first.Anechat.Accepted {
		t.Fatalf("asked again: %q accepted %d/%d; first %q accepted %d/%d: want the same text with more accepted",
			second.text(), second.Anechat.Accepted, second.Anechat.Drafted, first.text(), first.Anechat.Accepted, first.Anechat.Drafted)
	}
	t.Logf("accepted: first %d/%d, asked again %d/%d of %d tokens", first.Anechat.Accepted, first.Anechat.Drafted,
		second.Anechat.Accepted, second.Anechat.Drafted, second.Usage.CompletionTokens)
}

func TestNewChecksConfig(t *testing.T) {
	run := sessions.New(nil, nil)
	models := func(context.Context) ([]Model, error) { return nil, nil }
	for _, c := range []Config{{Models: models, Token: testToken}, {Sessions: run, Token: testToken}, {Sessions: run, Models: models, Token: "short"}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted", c)
		}
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadToken(dir)
	if err != nil || len(a) != 64 {
		t.Fatalf("first token %q, %v", a, err)
	}
	b, err := LoadToken(dir)
	if err != nil || b != a {
		t.Fatalf("second load %q, %v; want %q", b, err, a)
	}
	st, err := os.Stat(filepath.Join(dir, TokenFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, %v; want 0600", st.Mode(), err)
	}
	if err := os.WriteFile(filepath.Join(dir, TokenFile), []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadToken(dir); err == nil || !strings.Contains(err.Error(), TokenFile) {
		t.Fatalf("a short token: %v, want an error naming the file", err)
	}
}
