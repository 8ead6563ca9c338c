package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// saveDialog is a Dialogs whose save dialog answers path (or err), and
// records what it was asked.
type saveDialog struct {
	path        string
	err         error
	title, name string
}

func (d *saveDialog) ChooseFolder(context.Context, string) (string, error) { return "", nil }
func (d *saveDialog) SaveFile(_ context.Context, title, name string) (string, error) {
	d.title, d.name = title, name
	return d.path, d.err
}

func TestSaveFileWritesTheExportWhereTheUserChose(t *testing.T) {
	dir := t.TempDir()
	dlg := &saveDialog{path: filepath.Join(dir, "chat.md")}
	a := New(Options{DataDir: t.TempDir(), Dialogs: dlg})
	a.Startup(context.Background(), nil)
	t.Cleanup(a.Shutdown)
	c, _ := a.Chat.CreateConversation(NewConversation{Title: "Trip: Lisbon?"})
	f, err := a.Chat.Export(c.ID, ExportMarkdown)
	if err != nil {
		t.Fatal(err)
	}
	// A file already there is replaced whole.
	os.WriteFile(dlg.path, []byte(strings.Repeat("old ", 1000)), 0o600)
	got, err := a.System.SaveFile("Export the conversation", f)
	if err != nil || got != dlg.path {
		t.Fatalf("SaveFile = %q, %v", got, err)
	}
	if dlg.title != "Export the conversation" || dlg.name != "Trip- Lisbon-.md" {
		t.Fatalf("the dialog was asked %q offering %q", dlg.title, dlg.name)
	}
	b, err := os.ReadFile(dlg.path)
	if err != nil || string(b) != f.Text {
		t.Fatalf("saved %q (%v), want %q", b, err, f.Text)
	}
	if fi, _ := os.Stat(dlg.path); fi.Mode().Perm() != 0o644 {
		t.Fatalf("saved with mode %v", fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}

	// Cancelled: nothing written, no error. A file name is never a path.
	dlg.path = ""
	if got, err := a.System.SaveFile("t", ExportFile{FileName: "../../etc/x.json", Text: "{}"}); got != "" || err != nil || dlg.name != "x.json" {
		t.Fatalf("cancelled SaveFile = %q, %v (offered %q)", got, err, dlg.name)
	}
	// An unwritable place is an error naming it.
	dlg.path = filepath.Join(dir, "missing", "x.md")
	if _, err := a.System.SaveFile("t", f); err == nil || !strings.Contains(err.Error(), dlg.path) {
		t.Fatalf("SaveFile into a missing folder: %v", err)
	}
	dlg.err = errors.New("dialog broke")
	if _, err := a.System.SaveFile("t", f); !errors.Is(err, dlg.err) {
		t.Fatalf("SaveFile with a failing dialog: %v", err)
	}
	// No window, no dialog.
	b2 := New(Options{DataDir: t.TempDir()})
	if _, err := b2.System.SaveFile("t", f); err == nil || !strings.Contains(err.Error(), "copy") {
		t.Fatalf("SaveFile without a window: %v", err)
	}
}
