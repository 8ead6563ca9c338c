package storage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"anechat/internal/fsfault"
)

// chain makes chained block hashes the way engine/kv.BlockHashes does (each
// hash covers the whole prefix), so the tests do not import the engine.
func chain(ids []int32) []string {
	var out []string
	prev := []byte("seed")
	for i := 0; i+BlockSize <= len(ids); i += BlockSize {
		h := sha256.New()
		h.Write(prev)
		for _, id := range ids[i : i+BlockSize] {
			h.Write([]byte(strconv.Itoa(int(id)) + ","))
		}
		prev = h.Sum(nil)
		out = append(out, hex.EncodeToString(prev[:16]))
	}
	return out
}

func seq(n int, base int32) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = base + int32(i)
	}
	return ids
}

func snap(path string, ids []int32, bytes int64) SnapshotInput {
	return SnapshotInput{FilePath: path, ModelFingerprint: "model", TokenizerFingerprint: "tok", TemplateHash: "tpl",
		TokenCount: len(ids), Bytes: bytes, BlockHashes: chain(ids)}
}

func TestSnapshotRoundTripAndLongestPrefix(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	base := seq(64*10, 1)
	// s4: first 4 blocks of base; s7: first 7 blocks + a partial block;
	// s7short: first 7 blocks exactly (fewer tokens: preferred on a tie);
	// other: diverges in block 0.
	in4 := snap("s4.kv", base[:256], 1000)
	in7 := snap("s7.kv", base[:64*7+10], 2000)
	in7short := snap("s7short.kv", base[:64*7], 1900)
	in4.ConversationID = 0
	s4, err := d.InsertSnapshot(ctx, in4)
	if err != nil {
		t.Fatal(err)
	}
	s7, _ := d.InsertSnapshot(ctx, in7)
	s7s, _ := d.InsertSnapshot(ctx, in7short)
	other := append([]int32{999}, base[1:]...)
	d.InsertSnapshot(ctx, snap("other.kv", other, 3000))

	got, err := d.GetSnapshot(ctx, s4.ID)
	if err != nil || got.FilePath != "s4.kv" || got.ModelFingerprint != "model" || got.TokenizerFingerprint != "tok" ||
		got.TemplateHash != "tpl" || got.TokenCount != 256 || got.Bytes != 1000 || got.Pinned || got.CreatedAt.IsZero() ||
		!got.LastUsedAt.Equal(got.CreatedAt) {
		t.Errorf("snapshot round trip: %+v %v", got, err)
	}
	if hs, _ := d.SnapshotBlockHashes(ctx, s7.ID); !slices.Equal(hs, chain(base[:64*7])) {
		t.Errorf("stored block hashes differ")
	}

	cases := []struct {
		name   string
		prompt []int32
		want   int64
		blocks int
	}{
		{"full base: deepest is block 7, shortest snapshot wins", base, s7s.ID, 7},
		{"5 blocks", base[:64*5+3], s7s.ID, 5},
		{"3 blocks", base[:64*3], s4.ID, 3}, // all of s4, s7, s7short share 3; s4 is the shortest
		{"diverges in block 5", append(slices.Clone(base[:64*5]), seq(200, 5000)...), s7s.ID, 5},
		{"diverges in block 4", append(slices.Clone(base[:64*4]), seq(200, 5000)...), s4.ID, 4},
	}
	for _, tc := range cases {
		m, ok, err := d.LongestPrefix(ctx, "model", "tok", chain(tc.prompt))
		if err != nil || !ok || m.Snapshot.ID != tc.want || m.Blocks != tc.blocks || m.Tokens != tc.blocks*BlockSize {
			t.Errorf("%s: %+v ok=%v err=%v; want snapshot %d, %d blocks", tc.name, m, ok, err, tc.want, tc.blocks)
		}
	}
	// No match: different first block, a short prompt, another model or tokenizer.
	for name, f := range map[string]func() (PrefixMatch, bool, error){
		"unrelated":       func() (PrefixMatch, bool, error) { return d.LongestPrefix(ctx, "model", "tok", chain(seq(640, 7000))) },
		"under one block": func() (PrefixMatch, bool, error) { return d.LongestPrefix(ctx, "model", "tok", chain(base[:63])) },
		"other model":     func() (PrefixMatch, bool, error) { return d.LongestPrefix(ctx, "model2", "tok", chain(base)) },
		"other tokenizer": func() (PrefixMatch, bool, error) { return d.LongestPrefix(ctx, "model", "tok2", chain(base)) },
	} {
		if m, ok, err := f(); ok || err != nil {
			t.Errorf("%s: matched %+v, %v", name, m, err)
		}
	}
	// A hash found at the wrong block index does not count.
	shifted := append([]string{"x"}, chain(base)...)
	if m, ok, _ := d.LongestPrefix(ctx, "model", "tok", shifted); ok {
		t.Errorf("shifted hashes matched %+v", m)
	}
	// On equal depth and size, the most recently used wins.
	a, _ := d.InsertSnapshot(ctx, snap("tieA.kv", seq(128, 50000), 10))
	b, _ := d.InsertSnapshot(ctx, snap("tieB.kv", seq(128, 50000), 10))
	d.now = func() time.Time { return time.Now().Add(time.Minute) }
	if err := d.TouchSnapshot(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if m, _, _ := d.LongestPrefix(ctx, "model", "tok", chain(seq(128, 50000))); m.Snapshot.ID != a.ID {
		t.Errorf("tie: got %d, want the touched %d (not %d)", m.Snapshot.ID, a.ID, b.ID)
	}
	if err := d.TouchSnapshot(ctx, 424242); !errors.Is(err, ErrNotFound) {
		t.Errorf("touch of a missing snapshot: %v", err)
	}

	// Bad input.
	for name, in := range map[string]SnapshotInput{
		"too many hashes": {FilePath: "x", ModelFingerprint: "m", TokenizerFingerprint: "t", TokenCount: 63, BlockHashes: []string{"h"}},
		"escaping path":   {FilePath: "../x", ModelFingerprint: "m", TokenizerFingerprint: "t"},
		"absolute path":   {FilePath: "/tmp/x", ModelFingerprint: "m", TokenizerFingerprint: "t"},
		"no fingerprint":  {FilePath: "x"},
		"empty hash":      {FilePath: "x", ModelFingerprint: "m", TokenizerFingerprint: "t", TokenCount: 64, BlockHashes: []string{""}},
	} {
		if _, err := d.InsertSnapshot(ctx, in); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := d.InsertSnapshot(ctx, in4); err == nil {
		t.Error("a second row for the same file was accepted")
	}
}

func TestLongestPrefixLongPrompt(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	// More blocks than one lookup query takes: the match sits in the first chunk.
	long := seq(BlockSize*(maxHashesPerQuery+100), 1)
	in := snap("short.kv", long[:BlockSize*50], 1)
	s, err := d.InsertSnapshot(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	m, ok, err := d.LongestPrefix(ctx, "model", "tok", chain(long))
	if err != nil || !ok || m.Snapshot.ID != s.ID || m.Blocks != 50 {
		t.Errorf("long prompt: %+v %v %v", m, ok, err)
	}
}

func TestEvictionAndPins(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	clock := time.Now()
	d.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	var ids []int64
	for i := range 5 { // 5 snapshots of 100 bytes, used in order 0..4
		s, err := d.InsertSnapshot(ctx, snap("e"+strconv.Itoa(i)+".kv", seq(64, int32(i*1000)), 100))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	if total, err := d.TotalSnapshotBytes(ctx); err != nil || total != 500 {
		t.Errorf("total bytes %d, %v", total, err)
	}
	d.TouchSnapshot(ctx, ids[0]) // 0 becomes the most recent
	if err := d.SetSnapshotPinned(ctx, ids[1], true); err != nil {
		t.Fatal(err)
	}
	p, _ := d.CreatePrompt(ctx, PromptInput{Title: "p"})
	d.SetPromptSnapshot(ctx, p.ID, ids[2]) // pinned by the prompt library
	candidates := func(quota int64) []int64 {
		cs, err := d.EvictionCandidates(ctx, quota)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	if got := candidates(500); len(got) != 0 {
		t.Errorf("within quota: %v", got)
	}
	if got := candidates(350); !slices.Equal(got, []int64{ids[3], ids[4]}) {
		t.Errorf("quota 350: %v, want LRU %v", got, []int64{ids[3], ids[4]})
	}
	if got := candidates(400); !slices.Equal(got, []int64{ids[3]}) {
		t.Errorf("quota 400: %v", got)
	}
	// Quota 0: everything not pinned, pinned ones never.
	if got := candidates(0); !slices.Equal(got, []int64{ids[3], ids[4], ids[0]}) {
		t.Errorf("quota 0: %v", got)
	}
	d.SetSnapshotPinned(ctx, ids[1], false)
	if got := candidates(0); !slices.Contains(got, ids[1]) || slices.Contains(got, ids[2]) {
		t.Errorf("after unpinning: %v", got)
	}
	for _, id := range ids {
		if err := d.DeleteSnapshot(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	var blocks int
	d.SQL().QueryRow("SELECT count(*) FROM kv_snapshot_blocks").Scan(&blocks)
	if total, _ := d.TotalSnapshotBytes(ctx); total != 0 || blocks != 0 {
		t.Errorf("after deleting all: %d bytes, %d block rows", total, blocks)
	}
	if err := d.DeleteSnapshot(ctx, ids[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("double delete: %v", err)
	}
}

func TestReplaceSnapshot(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	c, _ := d.CreateConversation(ctx, ConversationInput{})
	c2, _ := d.CreateConversation(ctx, ConversationInput{})
	first := snap("turn1.kv", seq(128, 1), 10)
	first.ConversationID = c.ID
	s1, old, err := d.ReplaceSnapshot(ctx, first)
	if err != nil || len(old) != 0 {
		t.Fatalf("first: %v %v", old, err)
	}
	keep := snap("other-conv.kv", seq(128, 1), 10)
	keep.ConversationID = c2.ID
	d.ReplaceSnapshot(ctx, keep)
	second := snap("turn2.kv", seq(192, 1), 20)
	second.ConversationID = c.ID
	s2, old, err := d.ReplaceSnapshot(ctx, second)
	if err != nil || len(old) != 1 || old[0].ID != s1.ID || old[0].FilePath != "turn1.kv" {
		t.Fatalf("second: %+v %v", old, err)
	}
	if _, err := d.GetSnapshot(ctx, s1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("old row still there: %v", err)
	}
	// The same file again (same contents): re-pointed, not returned as orphan.
	again := second
	s3, old, err := d.ReplaceSnapshot(ctx, again)
	if err != nil || len(old) != 0 || s3.FilePath != "turn2.kv" {
		t.Errorf("same file: %+v %+v %v", s3, old, err)
	}
	all, _ := d.ListSnapshots(ctx)
	if len(all) != 2 {
		t.Errorf("rows: %+v", all)
	}
	_ = s2
	// Forget by path.
	if err := d.ForgetSnapshotFile(ctx, "turn2.kv"); err != nil {
		t.Fatal(err)
	}
	if err := d.ForgetSnapshotFile(ctx, "turn2.kv"); err != nil {
		t.Errorf("forgetting twice: %v", err)
	}
	if all, _ := d.ListSnapshots(ctx); len(all) != 1 || all[0].ConversationID != c2.ID {
		t.Errorf("after forget: %+v", all)
	}
	// Deleting a conversation keeps its snapshot row, unlinked.
	d.DeleteConversation(ctx, c2.ID)
	if all, _ := d.ListSnapshots(ctx); len(all) != 1 || all[0].ConversationID != 0 {
		t.Errorf("after deleting the conversation: %+v", all)
	}
}

// reconciled lists the paths of entries, sorted.
func reconciled(es []ReconcileEntry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Path)
	}
	slices.Sort(out)
	return out
}

// reason returns the reason given for path in es.
func reason(es []ReconcileEntry, path string) string {
	for _, e := range es {
		if e.Path == path {
			return e.Reason
		}
	}
	return ""
}

// deadPid returns the id of a process that has exited (and been reaped).
func deadPid(t *testing.T) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// filesUnder lists the files (not directories) under dir, relative and sorted.
func filesUnder(dir string) []string {
	var left []string
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			left = append(left, filepath.ToSlash(rel))
		}
		return nil
	})
	slices.Sort(left)
	return left
}

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	// Every file written below is an hour old to Reconcile.
	d.now = func() time.Time { return time.Now().Add(time.Hour) }
	kvDir := filepath.Join(t.TempDir(), KVDir)
	os.MkdirAll(filepath.Join(kvDir, "sub"), 0o755)
	write := func(name string, size int) {
		if err := os.WriteFile(filepath.Join(kvDir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dead, self := strconv.Itoa(deadPid(t)), strconv.Itoa(os.Getpid())
	write("good.kv", 10)
	write("sub/nested.kv", 7)
	write("truncated.kv", 3)                               // its row says 10 bytes
	write("orphan.kv", 5)                                  // no row
	write(".tmp-123.kv", 5)                                // an older version's temp file: no pid
	write(".tmp-"+dead+"-1.kv", 5)                         // a crashed write's temp file
	write(".tmp-"+self+"-2.kv", 5)                         // a write in progress (this process)
	write(".DS_Store", 5)                                  // not ours
	os.Symlink("loop.kv", filepath.Join(kvDir, "loop.kv")) // a row's file replaced by a symlink loop
	d.InsertSnapshot(ctx, snap("good.kv", seq(64, 1), 10))
	d.InsertSnapshot(ctx, snap("sub/nested.kv", seq(64, 2), 7))
	d.InsertSnapshot(ctx, snap("truncated.kv", seq(64, 3), 10))
	d.InsertSnapshot(ctx, snap("missing.kv", seq(64, 4), 10))
	d.InsertSnapshot(ctx, snap("loop.kv", seq(64, 5), 10))

	rep, err := d.Reconcile(ctx, kvDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := reconciled(rep.RowsDeleted); !slices.Equal(got, []string{"loop.kv", "missing.kv", "truncated.kv"}) {
		t.Errorf("rows deleted: %v", rep.RowsDeleted)
	}
	// Sorted like reconciled's list: where the dead pid's name falls
	// depends on its digits (".tmp-12-1.kv" sorts before ".tmp-123.kv").
	wantFiles := []string{".tmp-123.kv", ".tmp-" + dead + "-1.kv", "loop.kv", "orphan.kv", "truncated.kv"}
	slices.Sort(wantFiles)
	if got := reconciled(rep.FilesDeleted); !slices.Equal(got, wantFiles) {
		t.Errorf("files deleted: %v", rep.FilesDeleted)
	}
	if len(rep.Skipped) != 0 {
		t.Errorf("skipped: %v", rep.Skipped)
	}
	for path, want := range map[string]string{"truncated.kv": "file of 3 bytes, the index says 10", "missing.kv": "missing", "loop.kv": "symlink loop"} {
		if r := reason(rep.RowsDeleted, path); !strings.Contains(r, want) {
			t.Errorf("row %s deleted because %q, want %q", path, r, want)
		}
	}
	if r := reason(rep.FilesDeleted, ".tmp-"+dead+"-1.kv"); !strings.Contains(r, "process "+dead+" is not running") {
		t.Errorf("temp file deleted because %q", r)
	}
	if r := reason(rep.FilesDeleted, "orphan.kv"); !strings.Contains(r, "no index row") {
		t.Errorf("orphan deleted because %q", r)
	}
	left := filesUnder(kvDir)
	rows, _ := d.ListSnapshots(ctx)
	var rowPaths []string
	for _, r := range rows {
		rowPaths = append(rowPaths, r.FilePath)
	}
	slices.Sort(rowPaths)
	if !slices.Equal(left, []string{".DS_Store", ".tmp-" + self + "-2.kv", "good.kv", "sub/nested.kv"}) || !slices.Equal(rowPaths, []string{"good.kv", "sub/nested.kv"}) {
		t.Errorf("after reconcile: files %v, rows %v", left, rowPaths)
	}
	// A second run finds nothing to do.
	if rep, err := d.Reconcile(ctx, kvDir); err != nil || len(rep.RowsDeleted)+len(rep.FilesDeleted)+len(rep.Skipped) != 0 {
		t.Errorf("second run: %+v %v", rep, err)
	}
	// A missing kv dir is created and drops every row.
	fresh := filepath.Join(t.TempDir(), "nokv")
	if rep, err := d.Reconcile(ctx, fresh); err != nil || len(rep.RowsDeleted) != 2 {
		t.Errorf("missing dir: %+v %v", rep, err)
	}
	if st, err := os.Stat(fresh); err != nil || !st.IsDir() {
		t.Errorf("kv dir not created: %v", err)
	}
}

// TestReconcileFollowsSymlinks: a kv dir that is a symlink (moved to another
// disk) is cleaned through the link, and neither the link nor a linked
// subdirectory that rows point into is removed.
func TestReconcileFollowsSymlinks(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	d.now = func() time.Time { return time.Now().Add(time.Hour) }
	elsewhere, other := t.TempDir(), t.TempDir()
	kvDir := filepath.Join(t.TempDir(), KVDir)
	if err := os.Symlink(elsewhere, kvDir); err != nil {
		t.Fatal(err)
	}
	os.Symlink(other, filepath.Join(elsewhere, "linked"))
	os.WriteFile(filepath.Join(elsewhere, "good.kv"), make([]byte, 10), 0o644)
	os.WriteFile(filepath.Join(other, "deep.kv"), make([]byte, 4), 0o644)
	os.WriteFile(filepath.Join(elsewhere, "orphan.kv"), make([]byte, 4), 0o644)
	d.InsertSnapshot(ctx, snap("good.kv", seq(64, 1), 10))
	d.InsertSnapshot(ctx, snap("linked/deep.kv", seq(64, 2), 4))
	rep, err := d.Reconcile(ctx, kvDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.RowsDeleted) != 0 || !slices.Equal(reconciled(rep.FilesDeleted), []string{"orphan.kv"}) || len(rep.Skipped) != 0 {
		t.Errorf("report %+v", rep)
	}
	if st, err := os.Lstat(kvDir); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the kv dir symlink: %v, %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(kvDir, "linked", "deep.kv")); err != nil {
		t.Errorf("a snapshot in a linked subdirectory: %v", err)
	}
}

// TestReconcileSkipsWhatItCannotRemove: on a read-only kv dir, files that
// cannot be removed are reported as skipped, and the rest is reconciled.
func TestReconcileSkipsWhatItCannotRemove(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	d.now = func() time.Time { return time.Now().Add(time.Hour) }
	kvDir := filepath.Join(t.TempDir(), KVDir)
	os.MkdirAll(kvDir, 0o755)
	os.WriteFile(filepath.Join(kvDir, "good.kv"), make([]byte, 10), 0o644)
	os.WriteFile(filepath.Join(kvDir, "orphan.kv"), make([]byte, 4), 0o644)
	d.InsertSnapshot(ctx, snap("good.kv", seq(64, 1), 10))
	d.InsertSnapshot(ctx, snap("missing.kv", seq(64, 2), 10))
	fsfault.ReadOnly(t, kvDir)
	rep, err := d.Reconcile(ctx, kvDir)
	if err != nil {
		t.Fatalf("a read-only kv dir: %v", err)
	}
	if !slices.Equal(reconciled(rep.RowsDeleted), []string{"missing.kv"}) || len(rep.FilesDeleted) != 0 ||
		!slices.Equal(reconciled(rep.Skipped), []string{"orphan.kv"}) || !strings.Contains(reason(rep.Skipped, "orphan.kv"), "cannot remove") {
		t.Errorf("report %+v", rep)
	}
	if rows, _ := d.ListSnapshots(ctx); len(rows) != 1 || rows[0].FilePath != "good.kv" {
		t.Errorf("rows %+v", rows)
	}
}

// TestLongestPrefixUsesIndex checks that the prefix lookup is an index
// search on the block hashes, not a scan of the blocks table.
func TestLongestPrefixUsesIndex(t *testing.T) {
	d := openTest(t)
	rows, err := d.SQL().Query(`EXPLAIN QUERY PLAN
		SELECT s.id, b.block_index FROM kv_snapshot_blocks b JOIN kv_snapshots s ON s.id = b.snapshot_id
		WHERE s.model_fingerprint = ? AND s.tokenizer_fingerprint = ? AND b.prefix_hash IN (?, ?, ?)
		ORDER BY b.block_index DESC`, "m", "t", "a", "b", "c")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	joined := strings.Join(plan, "; ")
	if !strings.Contains(joined, "kv_snapshot_blocks_hash (prefix_hash=?)") || strings.Contains(joined, "SCAN b") {
		t.Errorf("prefix lookup plan: %s", joined)
	}
}

func BenchmarkLongestPrefix(b *testing.B) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(b.TempDir(), DBFile))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	// 500 snapshots of 2048 tokens (32 blocks each), all different from block 0.
	for i := range 500 {
		ids := seq(2048, int32(i*10000))
		if _, err := d.InsertSnapshot(ctx, snap("b"+strconv.Itoa(i)+".kv", ids, 1)); err != nil {
			b.Fatal(err)
		}
	}
	prompt := chain(append(seq(64*20, 250*10000), seq(4096, 1<<30)...)) // shares 20 blocks with snapshot 250
	b.ResetTimer()
	for b.Loop() {
		m, ok, err := d.LongestPrefix(ctx, "model", "tok", prompt)
		if err != nil || !ok || m.Blocks != 20 {
			b.Fatalf("%+v %v %v", m, ok, err)
		}
	}
}

// TestReconcileSparesYoungFiles: a file no row points at is removed only
// once it is CleanAge old (another process may be writing it, or about to
// index it); ReconcileMinAge(0) removes it at once.
func TestReconcileSparesYoungFiles(t *testing.T) {
	ctx := context.Background()
	d := openTest(t)
	kvDir := t.TempDir()
	old := filepath.Join(kvDir, "old.kv")
	young := filepath.Join(kvDir, "young.kv")
	youngTemp := filepath.Join(kvDir, ".tmp-"+strconv.Itoa(deadPid(t))+"-1.kv")
	future := filepath.Join(kvDir, "future.kv")
	for _, p := range []string{old, young, youngTemp, future} {
		os.WriteFile(p, []byte("x"), 0o644)
	}
	past := time.Now().Add(-CleanAge - time.Minute)
	os.Chtimes(old, past, past)
	later := time.Now().Add(48 * time.Hour) // a wrong clock must not keep it forever
	os.Chtimes(future, later, later)
	rep, err := d.Reconcile(ctx, kvDir)
	if err != nil || !slices.Equal(reconciled(rep.FilesDeleted), []string{"future.kv", "old.kv"}) {
		t.Errorf("report %+v, %v; want only old.kv and future.kv deleted", rep, err)
	}
	for _, p := range []string{young, youngTemp} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("young file deleted: %v", err)
		}
	}
	if rep, _ := d.ReconcileMinAge(ctx, kvDir, 0); len(rep.FilesDeleted) != 2 {
		t.Errorf("ReconcileMinAge(0): %+v", rep)
	}
}
