package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"anechat/internal/testres"
	"anechat/server"
)

// freePort returns a loopback port nothing listens on (just now).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// apiReply is what the tests read of an API reply.
type apiReply struct {
	Choices []struct {
		Message struct{ Content string } `json:"message"`
	} `json:"choices"`
	Anechat struct {
		ResumedTokens int `json:"resumed_tokens"`
	} `json:"anechat"`
}

// apiChat posts a chat completion of one user message to the API at st.
func apiChat(t *testing.T, st APIStatus, model, text string) (int, apiReply) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 8, "anechat": map[string]any{"width": 1},
		"messages": []map[string]any{{"role": "user", "content": text}}})
	req, _ := http.NewRequest(http.MethodPost, st.URL+"/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+st.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out apiReply
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// The API switch is off by default; on, it serves the default model on the
// sessions manager the chat uses (a request resumes from the chat's KV); it is
// stored, so the next start serves again; off, nothing listens.
func TestAPISwitch(t *testing.T) {
	path := testres.Stories(t)
	dir := t.TempDir()
	gen := NewEngineGenerator(nil)
	defer gen.Close()
	a, _, _ := startIn(t, dir, gen)
	st, err := a.API.Status()
	if err != nil || st.Enabled || st.Running || st.Port != server.DefaultPort || len(st.Token) != 64 || st.Model != "" {
		t.Fatalf("a new data dir: %+v, %v; want off, port %d, a token, no model", st, err, server.DefaultPort)
	}
	m, err := a.Models.Register(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Models.SetDefault(m.ID); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	st, err = a.API.Start(port)
	if err != nil || !st.Running || !st.Enabled || st.Port != port || !strings.HasPrefix(st.URL, "http://127.0.0.1:") || st.Model != m.Name {
		t.Fatalf("started: %+v, %v", st, err)
	}
	// A chat reply, then the same question through the API: the same text,
	// resumed from the KV the chat left in the shared session.
	var chat strings.Builder
	if _, err := gen.Generate(context.Background(), GenerateRequest{Model: m, MaxTokens: 8, Width: 1,
		Messages: []ChatMessage{{Role: "user", Content: "Once upon a time"}}}, func(p Piece) error {
		chat.WriteString(p.Text)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	code, r := apiChat(t, st, m.Name, "Once upon a time")
	if code != 200 || len(r.Choices) != 1 || r.Choices[0].Message.Content != chat.String() || r.Anechat.ResumedTokens == 0 {
		t.Fatalf("API reply %d %+v; the chat wrote %q: want the same, resumed", code, r, chat.String())
	}

	// A port in use: the start fails naming it, and Status says why.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	if _, err := a.API.Start(taken); err == nil || !strings.Contains(err.Error(), "port") {
		t.Fatalf("start on a taken port: %v", err)
	}
	if st, _ := a.API.Status(); st.Running || !st.Enabled || st.Error == "" || st.Port != taken {
		t.Fatalf("after the failed start: %+v", st)
	}
	if st, err = a.API.Start(port); err != nil || !st.Running {
		t.Fatalf("start again on %d: %+v, %v", port, st, err)
	}

	// Stored: a restart serves again on the same port.
	a.Shutdown()
	// But not a command-line use of the services (anechat pull): it starts
	// nothing the window owns.
	h := New(Options{DataDir: dir, Version: "test", Generator: gen, Headless: true})
	h.Startup(context.Background(), newRecorder())
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
		c.Close()
		t.Fatalf("a headless start serves the API on %d", port)
	}
	h.Shutdown()
	a, _, _ = startIn(t, dir, gen)
	if st, err = a.API.Status(); err != nil || !st.Running || st.Port != port {
		t.Fatalf("after a restart: %+v, %v", st, err)
	}
	if code, _ := apiChat(t, st, m.Name, "Lily"); code != 200 {
		t.Fatalf("after a restart: status %d", code)
	}
	// Off: nothing listens, and it stays off.
	if st, err = a.API.Stop(); err != nil || st.Running || st.Enabled || st.URL != "" {
		t.Fatalf("stopped: %+v, %v", st, err)
	}
	if _, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
		t.Fatalf("something still listens on %d after Stop", port)
	}
	a.Shutdown()
	a, _, _ = startIn(t, dir, gen)
	if st, _ := a.API.Status(); st.Running || st.Enabled {
		t.Fatalf("after a restart with the switch off: %+v", st)
	}
}

func TestAPIWithoutEngine(t *testing.T) {
	a, _, _ := start(t, nil)
	if _, err := a.API.Start(freePort(t)); !errors.Is(err, ErrNoEngine) {
		t.Fatalf("start without an engine: %v, want ErrNoEngine", err)
	}
}
