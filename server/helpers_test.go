package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"anechat/engine"
	"anechat/engine/cpu"
	"anechat/engine/kv"
	"anechat/engine/load"
	"anechat/engine/model"
	"anechat/internal/kvindex"
	"anechat/internal/sessions"
	"anechat/internal/testres"
)

const testToken = "test-token-0123456789abcdef"

// testServer is a Server on stories260K, listening on a free loopback port,
// with a data directory of its own.
type testServer struct {
	url   string // http://127.0.0.1:PORT
	srv   *Server
	run   *sessions.Manager
	index *kvindex.Index
	dir   string
	gate  *gate // nil unless withGate
	// costs, when set, is the sessions manager's cost store instead of the
	// database; noStore runs it without snapshots or stored costs.
	costs   engine.CostStore
	noStore bool
	stop    func()
}

type serverOption func(*testing.T, *Config, *testServer)

// withGate opens the model through a backend whose Forward calls a gate
// controls.
func withGate(ts *testing.T, c *Config, s *testServer) {
	s.gate = newGate()
	reg := load.NewRegistry(gatedLoader{Loader: cpu.Loader{}, g: s.gate})
	s.run = sessions.New(nil, reg)
	c.Sessions = s.run
}

// startServer starts a server in dir ("" = a fresh temporary directory).
func startServer(t *testing.T, dir string, opts ...serverOption) *testServer {
	t.Helper()
	path := testres.Stories(t)
	if dir == "" {
		dir = t.TempDir()
	}
	x, err := kvindex.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{index: x, dir: dir, run: sessions.New(nil, nil)}
	cfg := Config{Token: testToken, Sessions: s.run,
		Models: func(context.Context) ([]Model, error) { return []Model{{ID: "stories260K", Path: path}}, nil }}
	for _, o := range opts {
		o(t, &cfg, s)
	}
	switch {
	case s.noStore:
	case s.costs != nil:
		s.run.UseStorage(x, s.costs)
	default:
		s.run.UseStorage(x, x.DB())
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.url = "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
			s.run.Close()
			s.run.UseStorage(nil, nil)
			x.Close()
		})
	}
	t.Cleanup(s.stop)
	return s
}

// do sends a request with the token and returns the response and its body.
func (s *testServer) do(t *testing.T, method, path string, body any, header ...string) (*http.Response, []byte) {
	t.Helper()
	req := s.request(t, context.Background(), method, path, body, header...)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// request builds a request with the token; header pairs replace headers
// ("Authorization", "" removes it).
func (s *testServer) request(t testing.TB, ctx context.Context, method, path string, body any, header ...string) *http.Request {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// reply is a non-streamed completion as a client reads it.
type reply struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Text         string          `json:"text"`
		FinishReason string          `json:"finish_reason"`
		Logprobs     json.RawMessage `json:"logprobs"`
	} `json:"choices"`
	Usage   *usage   `json:"usage"`
	Anechat *figures `json:"anechat"`
	Error   *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// text is the reply's text (a chat message's content or a completion's).
func (r reply) text() string {
	if len(r.Choices) == 0 {
		return ""
	}
	return r.Choices[0].Message.Content + r.Choices[0].Text
}

// post sends body to path and decodes the reply, failing unless the status
// is want.
func (s *testServer) post(t *testing.T, path string, body any, want int) reply {
	t.Helper()
	resp, b := s.do(t, http.MethodPost, path, body)
	var r reply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: status %d, body %q: %v", path, resp.StatusCode, b, err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s: status %d, want %d: %s", path, resp.StatusCode, want, b)
	}
	return r
}

// chunk is a streamed event as a client reads it.
type chunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string         `json:"text"`
		FinishReason *string         `json:"finish_reason"`
		Logprobs     json.RawMessage `json:"logprobs"`
	} `json:"choices"`
	Usage   *usage   `json:"usage"`
	Anechat *figures `json:"anechat"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// piece is the text the chunk carries.
func (c chunk) piece() string {
	if len(c.Choices) == 0 {
		return ""
	}
	ch := c.Choices[0]
	switch {
	case ch.Delta.Content != nil:
		return *ch.Delta.Content
	case ch.Text != nil:
		return *ch.Text
	}
	return ""
}

// streamed is a whole stream: its events, and whether it ended in [DONE].
type streamed struct {
	chunks []chunk
	done   bool
}

// pieces are the non-empty texts of the stream's events, in order.
func (s streamed) pieces() []string {
	var out []string
	for _, c := range s.chunks {
		if p := c.piece(); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s streamed) text() string { return strings.Join(s.pieces(), "") }

// finish is the finish reason of the stream's last choice.
func (s streamed) finish() string {
	for i := len(s.chunks) - 1; i >= 0; i-- {
		if cs := s.chunks[i].Choices; len(cs) > 0 && cs[0].FinishReason != nil {
			return *cs[0].FinishReason
		}
	}
	return ""
}

// readStream reads server-sent events until [DONE] or the end of the body,
// calling each (when not nil) per event; each returning false stops
// reading.
func readStream(t testing.TB, body io.Reader, each func(chunk) bool) (streamed, error) {
	var out streamed
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return out, errors.New("not an SSE data line: " + line)
		}
		if data == "[DONE]" {
			out.done = true
			return out, nil
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return out, err
		}
		out.chunks = append(out.chunks, c)
		if each != nil && !each(c) {
			return out, nil
		}
	}
	return out, sc.Err()
}

// stream posts a streamed request and reads the whole stream.
func (s *testServer) stream(t *testing.T, path string, body map[string]any) streamed {
	t.Helper()
	body["stream"] = true
	req := s.request(t, context.Background(), http.MethodPost, path, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	st, err := readStream(t, resp.Body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !st.done {
		t.Fatalf("stream ended without [DONE]: %+v", st.chunks)
	}
	return st
}

// user is a chat request of one user message.
func user(text string, extra ...any) map[string]any {
	m := map[string]any{"model": "stories260K", "messages": []map[string]any{{"role": "user", "content": text}}}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// gate holds back the Forward calls of a gated backend: once armed, the
// calls past the first pass block until released or until their context
// ends, and say which on ended.
type gate struct {
	mu      sync.Mutex
	armed   bool
	pass    int
	release chan struct{}
	blocked chan struct{} // a call is blocked (buffered)
	ended   chan error    // how a blocked call ended: nil released, else its ctx error
}

func newGate() *gate {
	return &gate{blocked: make(chan struct{}, 64), ended: make(chan error, 64)}
}

// arm makes the calls after the next pass ones block.
func (g *gate) arm(pass int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.pass, g.release = true, pass, make(chan struct{})
}

// open lets every blocked and later call through.
func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed {
		g.armed = false
		close(g.release)
	}
}

// wait blocks the caller if the gate says so.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	if !g.armed {
		g.mu.Unlock()
		return nil
	}
	if g.pass > 0 {
		g.pass--
		g.mu.Unlock()
		return nil
	}
	rel := g.release
	g.mu.Unlock()
	g.blocked <- struct{}{}
	select {
	case <-rel:
		g.ended <- nil
		return nil
	case <-ctx.Done():
		g.ended <- ctx.Err()
		return ctx.Err()
	}
}

type gatedLoader struct {
	load.Loader
	g *gate
}

func (l gatedLoader) Open(ctx context.Context, src load.Source, opts load.Options) (model.Backend, error) {
	b, err := l.Loader.Open(ctx, src, opts)
	if err != nil {
		return nil, err
	}
	return &gatedBackend{Backend: b, g: l.g}, nil
}

type gatedBackend struct {
	model.Backend
	g *gate
}

func (b *gatedBackend) Forward(ctx context.Context, tokens []int32, start int, c *kv.Cache, want model.Output) (model.Result, error) {
	if err := b.g.wait(ctx); err != nil {
		return model.Result{}, err
	}
	return b.Backend.Forward(ctx, tokens, start, c, want)
}

func (b *gatedBackend) Close() error {
	if c, ok := b.Backend.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// fixedCosts is an engine.CostStore holding one stored cost table: the
// gate then sends drafts the same way on a loaded machine as on an idle one.
type fixedCosts map[string]string

func (f fixedCosts) SettingRaw(_ context.Context, key string) (json.RawMessage, bool, error) {
	v, ok := f[key]
	return json.RawMessage(v), ok, nil
}

func (f fixedCosts) SetSettingRaw(context.Context, string, json.RawMessage) error { return nil }

var _ engine.CostStore = fixedCosts{}
