package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"anechat/engine/model/gguf"
	"anechat/internal/backends"
	"anechat/internal/testres"
	"anechat/storage"
)

func doctor(t *testing.T, args ...string) (code int, out, errOut string) {
	t.Helper()
	var o, e bytes.Buffer
	code = Run(context.Background(), append([]string{"doctor"}, args...), nil, &o, &e)
	return code, o.String(), e.String()
}

func TestDoctorOnAFreshDataDir(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := doctor(t, "--data-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{
		"data dir:  " + dir,
		"cpu      available",
		"coreml   " + backends.CoreMLStatus(runtime.GOOS, runtime.GOARCH),
		"not created yet",
		"models:    " + filepath.Join(dir, "models") + ": 0 found",
		"no problems found",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDoctorReportsDatabaseAndModels(t *testing.T) {
	dir := t.TempDir()
	d, err := storage.Open(context.Background(), storage.DBPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := d.CreateConversation(context.Background(), storage.ConversationInput{Title: "t"})
	d.AppendMessage(context.Background(), storage.MessageInput{ConversationID: c.ID, Role: "user", Content: "hi"})
	// The version the migrations reach: each new migration moves it.
	schema := fmt.Sprintf("schema version %d, integrity ok", d.SchemaVersion())
	d.Close()
	os.MkdirAll(filepath.Join(dir, "models"), 0o755)
	b, _ := os.ReadFile(testres.Stories(t))
	os.WriteFile(filepath.Join(dir, "models", "tiny.gguf"), b, 0o644)

	code, out, errOut := doctor(t, "--data-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	for _, want := range []string{schema, "1 conversations, 1 messages, 0 prompts", "1 found", "tiny.gguf  (gguf F32, llama, 1.1 MiB, context 2048, runs on cpu"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A broken model file is a problem: exit 1, and the file is named.
	os.WriteFile(filepath.Join(dir, "models", "bad.gguf"), []byte("nope"), 0o644)
	code, out, _ = doctor(t, "--data-dir", dir)
	if code != 1 || !strings.Contains(out, "PROBLEM: "+filepath.Join(dir, "models", "bad.gguf")) {
		t.Fatalf("exit %d with a broken model file:\n%s", code, out)
	}
	// So is one whose header parses but that the loader refuses (issue 11
	// item 8): an unknown architecture, a zero context, zero heads.
	os.Remove(filepath.Join(dir, "models", "bad.gguf"))
	for name, set := range map[string]map[string]any{
		"llamb.gguf":    {"general.architecture": "llamb"},
		"context0.gguf": {"llama.context_length": uint32(0)},
		"heads0.gguf":   {"llama.attention.head_count": uint32(0)},
	} {
		p := filepath.Join(dir, "models", name)
		if err := gguf.EditFile(testres.Stories(t), p, set); err != nil {
			t.Fatal(err)
		}
		code, out, _ = doctor(t, "--data-dir", dir)
		if code != 1 || !strings.Contains(out, "PROBLEM: "+p) {
			t.Errorf("exit %d with %s:\n%s", code, name, out)
		}
		os.Remove(p)
	}
}

func TestDoctorNamesACorruptDatabase(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(storage.DBPath(dir), []byte("definitely not sqlite, but long enough to have a header"), 0o644)
	code, out, errOut := doctor(t, "--data-dir", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, "database:  PROBLEM: ") || !strings.Contains(out, storage.DBPath(dir)+": database file is corrupt") || !strings.Contains(out, "move") {
		t.Fatalf("the report should name the file and what to do:\n%s", out)
	}
	if !strings.Contains(errOut, "found 1 problem") {
		t.Fatalf("stderr %q", errOut)
	}
}

func TestDoctorNamesAnUnusableDataDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)
	code, out, _ := doctor(t, "--data-dir", filepath.Join(file, "sub"))
	if code != 1 || !strings.Contains(out, "data dir:  PROBLEM") || !strings.Contains(out, file) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// A model whose chat template is a bomb (issue 21) made doctor die or hang;
// now it is a problem naming the file and the limit, and the good model is
// listed.
func TestDoctorReportsAHostileTemplate(t *testing.T) {
	dir := t.TempDir()
	models := filepath.Join(dir, "models")
	os.MkdirAll(models, 0o755)
	b, _ := os.ReadFile(testres.Stories(t))
	os.WriteFile(filepath.Join(models, "tiny.gguf"), b, 0o644)
	bomb := filepath.Join(models, "bomb.gguf")
	tmpl := "{% set s = 'x' * 16000000 %}{% set d = {(s,) * 2000: 1} %}" // a 32 GB dict key
	if err := gguf.EditFile(testres.Stories(t), bomb, map[string]any{"tokenizer.chat_template": tmpl}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := doctor(t, "--data-dir", dir)
	if code != 1 || !strings.Contains(out, "1 found") || !strings.Contains(out, "tiny.gguf  (gguf") ||
		!strings.Contains(out, "PROBLEM: "+bomb+": ") || !strings.Contains(out, "more than") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
}
