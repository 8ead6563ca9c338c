package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"anechat/internal/testres"
	"anechat/storage"
)

// copyStories puts a copy of stories260K at path.
func copyStories(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(testres.Stories(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestChatAloneUsesTheDataDirsModel: with no --model, chat and generate run
// the data directory's default model (ANECHAT_HOME here, as a user's
// environment would say), else the model in its models folder.
func TestChatAloneUsesTheDataDirsModel(t *testing.T) {
	home := t.TempDir()
	t.Setenv("ANECHAT_HOME", home)
	copyStories(t, filepath.Join(storage.ModelsPath(home), "tiny.gguf"))
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"chat"}, strings.NewReader("/quit\n"), &out, &errb); code != 0 {
		t.Fatalf("chat alone: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "chat with "+filepath.Join(storage.ModelsPath(home), "tiny.gguf")) {
		t.Fatalf("chat alone printed %q", out.String())
	}
	// The default chosen in the app wins over the folder's contents.
	chosen := filepath.Join(t.TempDir(), "chosen.gguf")
	copyStories(t, chosen)
	d, err := storage.Open(context.Background(), storage.DBPath(home))
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.RegisterModel(context.Background(), storage.ModelInput{Path: chosen, Kind: "gguf", Name: "chosen", Fingerprint: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetSetting(context.Background(), storage.SettingDefaultModelID, m.ID); err != nil {
		t.Fatal(err)
	}
	d.Close()
	g := genJSON(t, "--prompt-ids", "1 403 407", "--max-tokens", "3", "--no-cache")
	if len(g.IDs) != 3 {
		t.Fatalf("generate with the default model: %+v", g)
	}
	out.Reset()
	errb.Reset()
	if code := Run(context.Background(), []string{"chat"}, strings.NewReader(""), &out, &errb); code != 0 || !strings.Contains(out.String(), "chat with "+chosen) {
		t.Fatalf("chat with a chosen default: exit %d, %q %q", code, out.String(), errb.String())
	}
	// No model anywhere: an error that says what to do.
	empty := t.TempDir()
	out.Reset()
	errb.Reset()
	code := Run(context.Background(), []string{"chat", "--data-dir", empty}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "pass --model PATH") || !strings.Contains(errb.String(), filepath.Join(empty, "models")) {
		t.Fatalf("chat without any model: exit %d, %q", code, errb.String())
	}
}
