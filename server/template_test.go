package server

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/model/gguf"
	"anechat/internal/testres"
)

// A model whose chat template blows up on one message (issue 21: the repr
// of [s] * 2000 asked for ~32 GB and the process died) fails that request
// with an error response naming the model (not its file: part 7), the
// template and the limit; the server goes on and answers the next request
// on the same model.
func TestHostileTemplateFailsOnlyItsRequest(t *testing.T) {
	dir := t.TempDir()
	bomb := filepath.Join(dir, "bomb.gguf")
	tmpl := "{% for m in messages %}{% if 'boom' in m.content %}{% set s = 'x' * 16000000 %}{{ [s] * 2000 }}{% endif %}" +
		"{{ m.role }}: {{ m.content }}\n{% endfor %}"
	if err := gguf.EditFile(testres.Stories(t), bomb, map[string]any{"tokenizer.chat_template": tmpl}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", func(_ *testing.T, c *Config, _ *testServer) {
		c.Models = func(context.Context) ([]Model, error) { return []Model{{ID: "stories260K", Path: bomb}}, nil }
	})
	r := s.post(t, "/v1/chat/completions", user("boom", "max_tokens", 4), http.StatusInternalServerError)
	if r.Error == nil || r.Error.Code == nil || *r.Error.Code != "chat_template_failed" ||
		!strings.Contains(r.Error.Message, "stories260K") || !strings.Contains(r.Error.Message, "more than") ||
		strings.Contains(r.Error.Message, dir) {
		t.Fatalf("error %+v, want chat_template_failed naming the model (not its path) and the limit", r.Error)
	}
	r = s.post(t, "/v1/chat/completions", user("Once upon a time", "max_tokens", 4), http.StatusOK)
	if r.text() == "" {
		t.Errorf("the next request got no text: %+v", r)
	}
}
