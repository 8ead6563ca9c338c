package load_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/chat"
	"anechat/engine/chat/jinja"
	"anechat/engine/load"
	"anechat/engine/model/gguf"
	"anechat/internal/backends"
	"anechat/internal/testres"
)

// The loader reads a model's own chat template: a GGUF's
// tokenizer.chat_template, a directory's chat_template.jinja; one that does
// not parse fails Inspect with its file and line.
func TestChatTemplateIsRead(t *testing.T) {
	reg := backends.Registry()
	dir := t.TempDir()
	tmpl := "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}\n{% endfor %}"
	good := filepath.Join(dir, "good.gguf")
	if err := gguf.EditFile(testres.Stories(t), good, map[string]any{"tokenizer.chat_template": tmpl}); err != nil {
		t.Fatal(err)
	}
	m, err := reg.Open(context.Background(), good, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Chat.Template != tmpl || !strings.Contains(m.Chat.Source, "good.gguf") || m.Chat.Tokens["bos_token"] != "<s>" {
		t.Errorf("Chat = %+v", m.Chat)
	}
	ct, err := chat.ForModel(context.Background(), m.Backend.Config().Arch, m.Tokenizer, m.Chat)
	if err != nil || ct.Name() != "jinja" {
		t.Fatalf("ForModel = %v, %v", ct, err)
	}
	ids, err := ct.Render(context.Background(), []chat.Message{{Role: chat.RoleUser, Content: "Once"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]int32{1}, m.Tokenizer.Encode("[user]Once\n")...); !equalIDs(ids, want) {
		t.Errorf("Render = %v, want %v", ids, want)
	}
	if _, err := reg.Inspect(context.Background(), good); err != nil {
		t.Errorf("Inspect: %v", err)
	}

	bad := filepath.Join(dir, "bad.gguf")
	if err := gguf.EditFile(testres.Stories(t), bad, map[string]any{"tokenizer.chat_template": "ok\n{% for %}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Inspect(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "bad.gguf") || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Inspect of a broken template: %v", err)
	}

	// A model directory's chat_template.jinja.
	md := filepath.Join(dir, "gemma")
	os.Mkdir(md, 0o755)
	for _, f := range []string{"model.safetensors", "tokenizer.json", "config.json"} {
		b, err := os.ReadFile(filepath.Join(gemmaFixture(t, "model"), f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(md, f), b, 0o644)
	}
	os.WriteFile(filepath.Join(md, "chat_template.jinja"), []byte(tmpl), 0o644)
	dm, err := reg.Open(context.Background(), md, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	if dm.Chat.Template != tmpl || dm.Chat.Source != filepath.Join(md, "chat_template.jinja") {
		t.Errorf("directory Chat = %+v", dm.Chat)
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A chat template that a limit stops on a short conversation (issue 21) is
// an Inspect error naming the file, that wraps jinja.ErrLimit; Inspect's
// context stops the template's trial render too.
func TestInspectRefusesAHostileTemplate(t *testing.T) {
	reg := backends.Registry()
	bomb := filepath.Join(t.TempDir(), "bomb.gguf")
	tmpl := "{% set s = 'x' * 16000000 %}{{ [s] * 2000 }}"
	if err := gguf.EditFile(testres.Stories(t), bomb, map[string]any{"tokenizer.chat_template": tmpl}); err != nil {
		t.Fatal(err)
	}
	_, err := reg.Inspect(context.Background(), bomb)
	if !errors.Is(err, jinja.ErrLimit) || !errors.Is(err, chat.ErrTemplate) || !strings.Contains(err.Error(), "bomb.gguf") {
		t.Errorf("Inspect: %v, want a template limit error naming the file", err)
	}
	// A template that only loops: the caller's context ends the render.
	loop := filepath.Join(t.TempDir(), "loop.gguf")
	tmpl = "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}{% endfor %}"
	if err := gguf.EditFile(testres.Stories(t), loop, map[string]any{"tokenizer.chat_template": tmpl}); err != nil {
		t.Fatal(err)
	}
	m, err := reg.Open(context.Background(), loop, load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := chat.ForModel(ctx, m.Backend.Config().Arch, m.Tokenizer, m.Chat); !errors.Is(err, context.Canceled) || errors.Is(err, chat.ErrTemplate) {
		t.Errorf("ForModel with a cancelled context: %v, want context.Canceled (not the template's fault)", err)
	}
}
