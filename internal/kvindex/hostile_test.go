package kvindex

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"anechat/engine"
	"anechat/engine/kv"
	"anechat/internal/fsfault"
	"anechat/storage"
)

// savedSnapshot is a snapshot saved for a test, with the prompt that resumes it.
type savedSnapshot struct {
	path   string
	prompt []int32
}

// saveSnapshots saves snapshots of n, n+64, ... tokens in a new data dir and
// closes the index.
func saveSnapshots(t *testing.T, home string, sizes ...int) []savedSnapshot {
	t.Helper()
	ctx := context.Background()
	x, err := Open(ctx, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	r := &engine.Resumer{Store: x, Meta: killMeta}
	var out []savedSnapshot
	for i, n := range sizes {
		c, ids := killCache(t, n, uint64(100+i))
		p, err := r.Save(ctx, "", ids, c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, savedSnapshot{p, append(slices.Clone(ids), 1)})
	}
	return out
}

// warnLines returns the lines of a text-handler log at level WARN.
func warnLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=WARN") {
			out = append(out, l)
		}
	}
	return out
}

// resumes reports whether the index resumes s's prompt from s.
func resumes(t *testing.T, x *Index, s savedSnapshot) bool {
	t.Helper()
	var logBuf bytes.Buffer
	r := &engine.Resumer{Store: x, Meta: killMeta, Log: slog.New(slog.NewTextHandler(&logBuf, nil))}
	c, _ := kv.New(killGeometry(), 64)
	n := r.Restore(context.Background(), s.prompt, c)
	if n != len(s.prompt)-1 {
		t.Logf("resumed %d of %d: %s", n, len(s.prompt)-1, logBuf.String())
	}
	return n == len(s.prompt)-1
}

// TestSymlinkLoopInKV: a snapshot file replaced by a symlink loop drops that
// snapshot (one Warn naming it and why) and nothing else: the index opens,
// the other snapshot resumes, new saves work. Symlink loops that are not a
// snapshot's file (one of its own, one through a directory) are ignored.
func TestSymlinkLoopInKV(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	snaps := saveSnapshots(t, home, 200, 300)
	bad, good := snaps[0], snaps[1]
	if err := os.Remove(bad.path); err != nil {
		t.Fatal(err)
	}
	kvDir := storage.KVPath(home)
	for _, link := range [][2]string{{filepath.Base(bad.path), bad.path}, {"loop", filepath.Join(kvDir, "loop")}, {"..", filepath.Join(kvDir, "d", "up")}} {
		os.MkdirAll(filepath.Join(kvDir, "d"), 0o755)
		if err := os.Symlink(link[0], link[1]); err != nil {
			t.Fatal(err)
		}
	}
	var logBuf bytes.Buffer
	x, err := Open(ctx, home, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatalf("a symlink loop in kv/ turned the cache off: %v", err)
	}
	defer x.Close()
	warns := warnLines(logBuf.String())
	if len(warns) != 1 || !strings.Contains(warns[0], bad.path) || !strings.Contains(warns[0], "symlink loop") {
		t.Errorf("warnings %q: want one naming %s as a symlink loop", warns, bad.path)
	}
	if !resumes(t, x, good) {
		t.Error("the intact snapshot does not resume")
	}
	r := &engine.Resumer{Store: x, Meta: killMeta}
	c, ids := killCache(t, 250, 7)
	if _, err := r.Save(ctx, "", ids, c); err != nil {
		t.Errorf("saving beside a symlink loop: %v", err)
	}
	if rows, _ := x.db.ListSnapshots(ctx); len(rows) != 2 {
		t.Errorf("%d rows, want the intact and the new snapshot", len(rows))
	}
}

// TestReadOnlyKV: on a read-only kv/ holding a leftover file the cleaning
// cannot remove, the index still opens (one Warn for the leftover), stored
// snapshots resume, a damaged one is dropped from the index with one Warn
// that says its file could not be deleted, and a save fails with an error
// naming the directory instead of crashing.
func TestReadOnlyKV(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	snaps := saveSnapshots(t, home, 200, 300)
	good, damaged := snaps[0], snaps[1]
	b, err := os.ReadFile(damaged.path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-10] ^= 1
	os.WriteFile(damaged.path, b, 0o644)
	kvDir := storage.KVPath(home)
	leftover := filepath.Join(kvDir, "0123456789abcdef0123456789abcdef.kv")
	os.WriteFile(leftover, []byte("a save interrupted before indexing"), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(leftover, old, old)
	fsfault.ReadOnly(t, kvDir)

	var logBuf bytes.Buffer
	x, err := Open(ctx, home, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatalf("a read-only kv/ turned the cache off: %v", err)
	}
	defer x.Close()
	warns := warnLines(logBuf.String())
	if len(warns) != 1 || !strings.Contains(warns[0], leftover) || !strings.Contains(warns[0], "cannot remove") {
		t.Errorf("warnings %q: want one saying %s cannot be removed", warns, leftover)
	}
	if !resumes(t, x, good) {
		t.Error("a snapshot on a read-only kv/ does not resume")
	}
	logBuf.Reset()
	r := &engine.Resumer{Store: x, Meta: killMeta, Log: slog.New(slog.NewTextHandler(&logBuf, nil))}
	c, _ := kv.New(killGeometry(), 64)
	if n := r.Restore(ctx, damaged.prompt, c); n != 0 {
		t.Errorf("resumed %d positions from a damaged snapshot", n)
	}
	warns = warnLines(logBuf.String())
	if len(warns) != 1 || !strings.Contains(warns[0], damaged.path) || !strings.Contains(warns[0], "checksum") || !strings.Contains(warns[0], "deleting the file failed") {
		t.Errorf("warnings %q: want one naming %s, its checksum and the failed delete", warns, damaged.path)
	}
	if rows, _ := x.db.ListSnapshots(ctx); len(rows) != 1 || filepath.Join(kvDir, rows[0].FilePath) != good.path {
		t.Errorf("rows %+v: want only the intact snapshot", rows)
	}
	c, ids := killCache(t, 250, 7)
	if _, err := r.Save(ctx, "", ids, c); err == nil || !strings.Contains(err.Error(), kvDir) {
		t.Errorf("saving into a read-only kv/: %v, want an error naming %s", err, kvDir)
	}
}

// TestFailedRecordLeavesNoFile: when the snapshot file is written but its
// row cannot be (the database refuses the insert, as on a full disk), the
// save fails and leaves no file behind, so the next start finds the disk as
// it was; re-saving a snapshot that is already indexed keeps its file.
func TestFailedRecordLeavesNoFile(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	snaps := saveSnapshots(t, home, 200)
	x, err := Open(ctx, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := x.db.SQL().ExecContext(ctx, `CREATE TRIGGER full_disk BEFORE INSERT ON kv_snapshots
		BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`); err != nil {
		t.Fatal(err)
	}
	r := &engine.Resumer{Store: x, Meta: killMeta}
	c, ids := killCache(t, 300, 8)
	if _, err := r.Save(ctx, "", ids, c); err == nil || !strings.Contains(err.Error(), "disk is full") {
		t.Errorf("saving with a failing row: %v", err)
	}
	again, idsAgain := killCache(t, 200, 100) // the snapshot saveSnapshots made
	if _, err := r.Save(ctx, "", idsAgain, again); err == nil {
		t.Error("re-saving with a failing row succeeded")
	}
	ents, _ := os.ReadDir(x.dir)
	if len(ents) != 1 || filepath.Join(x.dir, ents[0].Name()) != snaps[0].path {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("kv/ holds %v after the failed saves, want only the indexed %s", names, filepath.Base(snaps[0].path))
	}
	if !resumes(t, x, snaps[0]) {
		t.Error("the indexed snapshot no longer resumes")
	}
}
