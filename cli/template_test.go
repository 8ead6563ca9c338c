package cli

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"anechat/engine/chat"
	"anechat/engine/chat/jinja"
	"anechat/engine/model/gguf"
	"anechat/internal/sessions"
	"anechat/internal/testres"
)

// hostileModel writes stories260K with a chat template that renders a
// short conversation but blows up on a message saying "boom" (issue 21).
func hostileModel(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bomb.gguf")
	tmpl := "{% for m in messages %}{% if 'boom' in m.content %}{% set s = 'x' * 16000000 %}{{ [s] * 2000 }}{% endif %}" +
		"{{ m.role }}: {{ m.content }}\n{% endfor %}"
	if err := gguf.EditFile(testres.Stories(t), p, map[string]any{"tokenizer.chat_template": tmpl}); err != nil {
		t.Fatal(err)
	}
	return p
}

// generate with a prompt that sets the template off ends with an error
// naming the template and the limit, instead of the process dying.
func TestGenerateReportsAHostileTemplate(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"generate", "--model", hostileModel(t), "--prompt", "boom", "--no-cache"}, nil, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "bomb.gguf") || !strings.Contains(errb.String(), "chat template failed") ||
		!strings.Contains(errb.String(), "more than") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// The command's context (cancelled by Ctrl-C or SIGTERM in main.go) reaches
// the template's render: generate's prompt and chat's turns (both
// sessions.Model.Render) stop with the context's error, not the template's.
func TestTemplateRenderStopsWithTheCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	mgr := sessions.New(nil, nil)
	defer mgr.Close()
	err := mgr.Do(t.Context(), hostileModel(t), func(m *sessions.Model) error {
		_, err := m.Render(ctx, []chat.Message{{Role: chat.RoleUser, Content: "boom"}})
		if !errors.Is(err, context.Canceled) || errors.Is(err, chat.ErrTemplate) || errors.Is(err, jinja.ErrLimit) {
			t.Errorf("the prompt's render: %v, want context.Canceled", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// And opening a model under a context already ended stops too.
	if _, err := openModel(ctx, hostileModel(t), ""); !errors.Is(err, context.Canceled) {
		t.Errorf("openModel: %v, want context.Canceled", err)
	}
}
