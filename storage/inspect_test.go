package storage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestInspect(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, DBFile)
	info, err := Inspect(ctx, path)
	if err != nil || info.Exists || info.KnownVersion < 1 {
		t.Fatalf("missing file: %+v %v", info, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("Inspect created the database")
	}
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := d.CreateConversation(ctx, ConversationInput{})
	d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleUser, Content: "a"})
	d.AppendMessage(ctx, MessageInput{ConversationID: c.ID, Role: RoleUser, Content: "b"})
	d.InsertSnapshot(ctx, SnapshotInput{FilePath: "x", ModelFingerprint: "m", TokenizerFingerprint: "t", Bytes: 77})
	own, err := d.Info(ctx)
	if err != nil || own.Conversations != 1 || own.Messages != 2 || own.Snapshots != 1 || own.SnapshotBytes != 77 {
		t.Errorf("DB.Info: %+v %v", own, err)
	}
	d.Close()
	before, _ := os.ReadFile(path)
	info, err = Inspect(ctx, path)
	if err != nil || !info.Exists || info.NeedsMigration || info.SchemaVersion != info.KnownVersion ||
		info.Conversations != 1 || info.Messages != 2 || info.Snapshots != 1 || info.SnapshotBytes != 77 || info.SizeBytes == 0 {
		t.Errorf("Inspect: %+v %v", info, err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("Inspect changed the file")
	}
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o644)
	if info, err := Inspect(ctx, empty); err != nil || !info.NeedsMigration {
		t.Errorf("empty file: %+v %v", info, err)
	}
	junk := filepath.Join(dir, "junk.db")
	os.WriteFile(junk, bytes.Repeat([]byte("junk"), 1000), 0o644)
	if _, err := Inspect(ctx, junk); !errors.Is(err, ErrCorrupt) {
		t.Errorf("junk: %v, want ErrCorrupt", err)
	}
}
