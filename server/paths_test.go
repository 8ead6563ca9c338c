package server

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/model/gguf"
	"anechat/internal/testres"
)

// An error about a model names the model as the API lists it, never the
// server's file system: a file that is not a model, a chat template that
// does not parse (both fail the load), one that refuses the conversation
// (400) and one that fails while rendering (500), each model kept in the
// data directory as the app keeps them. Before, each message carried the
// model file's absolute path.
func TestErrorsNameTheModelNotItsPath(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	if err := os.Mkdir(models, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(models, "garbage.gguf"), []byte("GGUF not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tmpl := range map[string]string{
		"unparsed": "ok\n{% for %}",
		"picky": `{{ bos_token }}{% for m in messages %}{% if m.content == "refuse" %}{{ raise_exception("I refuse") }}{% endif %}` +
			`{% if m.content == "boom" %}{{ nosuch() }}{% endif %}[{{ m.role }}]{{ m.content }}` + "\n{% endfor %}",
	} {
		if err := gguf.EditFile(testres.Stories(t), filepath.Join(models, name+".gguf"), map[string]any{"tokenizer.chat_template": tmpl}); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t, dir, func(_ *testing.T, c *Config, _ *testServer) {
		c.Models = func(context.Context) ([]Model, error) {
			var ms []Model
			for _, n := range []string{"garbage", "unparsed", "picky"} {
				ms = append(ms, Model{ID: n, Path: filepath.Join(models, n+".gguf")})
			}
			return ms, nil
		}
	})
	for _, c := range []struct {
		model, text string
		status      int
	}{
		{"garbage", "x", http.StatusInternalServerError},
		{"unparsed", "x", http.StatusInternalServerError},
		{"picky", "refuse", http.StatusBadRequest},
		{"picky", "boom", http.StatusInternalServerError},
	} {
		for _, stream := range []bool{false, true} {
			resp, b := s.do(t, http.MethodPost, "/v1/chat/completions", user(c.text, "model", c.model, "stream", stream))
			var r reply
			if err := json.Unmarshal(b, &r); err != nil || r.Error == nil {
				t.Fatalf("%s %q: status %d, body %s: not an error (%v)", c.model, c.text, resp.StatusCode, b, err)
			}
			if resp.StatusCode != c.status || !strings.Contains(r.Error.Message, c.model) || strings.Contains(string(b), dir) {
				t.Errorf("%s %q stream %v: status %d, message %q: want %d, naming the model and not the data directory %s",
					c.model, c.text, stream, resp.StatusCode, r.Error.Message, c.status, dir)
			}
		}
	}
}
