package kvindex

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"anechat/engine"
	"anechat/engine/kv"
	"anechat/internal/crashtest"
	"anechat/storage"
)

var killMeta = kv.Meta{Model: "fp1:test-model", Tokenizer: "tok:test", Template: "chat:x"}

func killGeometry() kv.Geometry {
	return kv.Geometry{Context: 1024, Layers: []kv.LayerSpec{
		{KVHeads: 2, HeadDim: 32, Source: 0},
		{KVHeads: 2, HeadDim: 32, Window: 128, Source: 1},
		{KVHeads: 2, HeadDim: 32, Source: 0},
	}}
}

// killCache returns a cache with n committed positions of deterministic rows
// and their ids.
func killCache(t testing.TB, n int, seed uint64) (*kv.Cache, []int32) {
	rng := rand.New(rand.NewPCG(seed, 3))
	c, err := kv.New(killGeometry(), 64)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, n)
	for p := 0; p < n; p += 64 {
		w := min(64, n-p)
		if err := c.Reserve(p, w); err != nil {
			t.Fatal(err)
		}
		for q := p; q < p+w; q++ {
			ids[q] = int32(rng.IntN(1000))
			for l := range killGeometry().Layers {
				if c.Owns(l) {
					for _, row := range [][]float32{c.K(l, q), c.V(l, q)} {
						for j := range row {
							row[j] = rng.Float32()
						}
					}
				}
			}
		}
		if err := c.Commit(w); err != nil {
			t.Fatal(err)
		}
	}
	return c, ids
}

const killHomeEnv = "ANECHAT_TEST_KILL_HOME"

// TestSnapshotWriterHelper is the process TestSnapshotWriterKilled kills: it
// saves snapshots for two conversations and unowned ones, with a quota small
// enough that saves also evict, until it is killed.
func TestSnapshotWriterHelper(t *testing.T) {
	home := os.Getenv(killHomeEnv)
	if home == "" {
		t.Skip("helper process of TestSnapshotWriterKilled; runs only as its subprocess")
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	x, err := Open(ctx, home, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.db.SetSetting(ctx, storage.SettingKVQuotaBytes, 1<<20); err != nil {
		t.Fatal(err)
	}
	var convs []int64
	for range 2 {
		c, err := x.db.CreateConversation(ctx, storage.ConversationInput{Title: "kill"})
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, c.ID)
	}
	r := &engine.Resumer{Store: x, Meta: killMeta, Log: log}
	for i := 0; ; i++ {
		c, ids := killCache(t, 64+(i*37)%400, uint64(i))
		key := ""
		if i%3 != 2 {
			key = ConversationKey(convs[i%2])
		}
		if _, err := r.Save(ctx, key, ids, c); err != nil {
			t.Fatal(err)
		}
		crashtest.Progress()
	}
}

// TestSnapshotWriterKilled SIGKILLs a process saving snapshots (file write,
// row swap, old file delete, eviction) at random points, 50 times. After
// each kill: the database passes PRAGMA integrity_check, every row points at
// a complete snapshot file that loads, and the next start (open, reconcile,
// resume from the longest prefix) works.
func TestSnapshotWriterKilled(t *testing.T) {
	if os.Getenv(killHomeEnv) != "" {
		t.Skip("inside the helper")
	}
	home := t.TempDir()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	rowsChecked, leftovers := 0, 0
	for run := 0; run < 50; run++ {
		cmd := crashtest.Command(t, "TestSnapshotWriterHelper", killHomeEnv+"="+home)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		// Kill after 0-3 completed saves plus up to a few ms: during
		// start-up (open, migrate, reconcile), inside a file write, between
		// the rename and the row swap, during the old file's delete or an
		// eviction.
		crashtest.KillAnywhere(t, rng, cmd, 4, 5*time.Millisecond)
		if strings.Contains(stderr.String(), "FAIL") {
			t.Fatalf("run %d: helper failed: %s", run, stderr.String())
		}

		db, err := storage.Open(ctx, storage.DBPath(home))
		if err != nil {
			t.Fatalf("run %d: database does not open after the kill: %v", run, err)
		}
		var check string
		if err := db.SQL().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
			t.Fatalf("run %d: integrity_check %q, %v", run, check, err)
		}
		rows, err := db.ListSnapshots(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range rows {
			path := filepath.Join(storage.KVPath(home), row.FilePath)
			c, err := kv.New(killGeometry(), 64)
			if err != nil {
				t.Fatal(err)
			}
			h, err := kv.Load(ctx, path, killMeta, c)
			if err != nil {
				t.Fatalf("run %d: row %d points at an incomplete file: %v", run, row.ID, err)
			}
			if len(h.Tokens) != row.TokenCount || h.FileSize() != row.Bytes {
				t.Fatalf("run %d: row %d says %d tokens %d bytes, file %d tokens %d bytes", run, row.ID, row.TokenCount, row.Bytes, len(h.Tokens), h.FileSize())
			}
			rowsChecked++
		}
		ents, _ := os.ReadDir(storage.KVPath(home))
		leftovers += len(ents) - len(rows)
		db.Close()

		// The next start: reconcile, then resume from what is stored.
		x, err := Open(ctx, home, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
		if err != nil {
			t.Fatalf("run %d: next start: %v", run, err)
		}
		if len(rows) > 0 {
			row := rows[len(rows)-1]
			h, err := kv.ReadHeader(filepath.Join(x.dir, row.FilePath))
			if err != nil {
				t.Fatal(err)
			}
			prompt := append(slices.Clone(h.Tokens), 1, 2, 3)
			c, _ := kv.New(killGeometry(), 64)
			var logBuf bytes.Buffer
			r := &engine.Resumer{Store: x, Meta: killMeta, Log: slog.New(slog.NewTextHandler(&logBuf, nil))}
			if n := r.Restore(ctx, prompt, c); n != len(h.Tokens) {
				t.Fatalf("run %d: next start resumed %d of %d stored tokens: %s", run, n, len(h.Tokens), logBuf.String())
			}
		}
		// A start minutes later: what the killed writer left is old by
		// then, and its process is gone.
		if _, err := x.db.ReconcileMinAge(ctx, x.dir, 0); err != nil {
			t.Fatal(err)
		}
		if ents, _ := os.ReadDir(x.dir); true {
			left, _ := x.db.ListSnapshots(ctx)
			if len(ents) != len(left) {
				t.Fatalf("run %d: after reconcile %d files for %d rows", run, len(ents), len(left))
			}
		}
		x.Close()
	}
	t.Logf("50 kills: %d rows checked against their files, %d files without a row left by kills (removed at the next start)", rowsChecked, leftovers)
	if rowsChecked == 0 {
		t.Error("no row was ever checked: the helper never completed a save before its kill")
	}
}

// TestSnapshotIndex exercises the storage-backed index directly: replace by
// conversation, unowned inserts, bad keys, forget, eviction under the quota.
func TestSnapshotIndex(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	x, err := Open(ctx, home, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	conv, err := x.db.CreateConversation(ctx, storage.ConversationInput{Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	key := ConversationKey(conv.ID)
	r := &engine.Resumer{Store: x, Meta: killMeta}
	c1, ids1 := killCache(t, 200, 1)
	p1, err := r.Save(ctx, key, ids1, c1)
	if err != nil {
		t.Fatal(err)
	}
	c2, ids2 := killCache(t, 300, 2)
	p2, err := r.Save(ctx, key, ids2, c2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p1); !os.IsNotExist(err) {
		t.Errorf("replaced snapshot file still there: %v", err)
	}
	rows, _ := x.db.ListSnapshots(ctx)
	if len(rows) != 1 || filepath.Join(x.dir, rows[0].FilePath) != p2 || rows[0].ConversationID != conv.ID {
		t.Fatalf("rows after replace: %+v", rows)
	}
	for _, bad := range []string{"conversation", "conversation:x", "chat:1", "prompt:0"} {
		if _, err := x.Replace(ctx, bad, killMeta, ids2, engine.StoredSnapshot{Path: p2}); err == nil {
			t.Errorf("key %q accepted", bad)
		}
	}
	if _, err := x.Replace(ctx, "", killMeta, ids2, engine.StoredSnapshot{Path: "/elsewhere/x.kv"}); err == nil {
		t.Error("a file outside kv/ accepted")
	}
	// Longest prefix: a prompt sharing 150 tokens with snapshot 2.
	prompt := append(slices.Clone(ids2[:150]), 7, 7, 7)
	s, ok, err := x.LongestPrefix(ctx, killMeta, prompt)
	if err != nil || !ok || s.Path != p2 || s.Tokens != 300 {
		t.Fatalf("LongestPrefix: %+v %v %v", s, ok, err)
	}
	if _, ok, _ := x.LongestPrefix(ctx, kv.Meta{Model: "other", Tokenizer: killMeta.Tokenizer, Template: killMeta.Template}, prompt); ok {
		t.Error("a snapshot of another model offered")
	}
	if _, ok, _ := x.LongestPrefix(ctx, kv.Meta{Model: killMeta.Model, Tokenizer: killMeta.Tokenizer, Template: "other"}, prompt); ok {
		t.Error("a snapshot of another template offered")
	}
	// Eviction: with a quota below two snapshots, an unowned save evicts the
	// least recently used one, not itself.
	if err := x.db.SetSetting(ctx, storage.SettingKVQuotaBytes, rows[0].Bytes+1000); err != nil {
		t.Fatal(err)
	}
	c3, ids3 := killCache(t, 250, 3)
	p3, err := r.Save(ctx, "", ids3, c3)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ = x.db.ListSnapshots(ctx)
	if len(rows) != 1 || filepath.Join(x.dir, rows[0].FilePath) != p3 {
		t.Fatalf("rows after eviction: %+v", rows)
	}
	if _, err := os.Stat(p2); !os.IsNotExist(err) {
		t.Errorf("evicted snapshot file still there: %v", err)
	}
	// A row pointing at a missing file: Restore falls back (0 positions),
	// logs why and forgets the row.
	if err := os.Remove(p3); err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	r.Log = slog.New(slog.NewTextHandler(&logBuf, nil))
	c, _ := kv.New(killGeometry(), 64)
	if n := r.Restore(ctx, append(slices.Clone(ids3), 9), c); n != 0 || c.Len() != 0 {
		t.Errorf("restored %d positions from a missing file", n)
	}
	if !strings.Contains(logBuf.String(), "no such file") {
		t.Errorf("missing file not logged: %q", logBuf.String())
	}
	if rows, _ = x.db.ListSnapshots(ctx); len(rows) != 0 {
		t.Errorf("rows after a missing file: %+v", rows)
	}
	if err := x.Forget(ctx, "/elsewhere/x.kv"); err == nil {
		t.Error("Forget of a file outside kv/ accepted")
	}
}
