// Package kvindex is the index of KV snapshot files that a Session resumes
// from: engine.SnapshotStore over the storage database (the kv_snapshots rows
// with their prefix block hashes) and the files in the data dir's kv/. The app
// and the CLI both wire it into engine.Resumer; engine itself never imports
// storage.
package kvindex

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"anechat/engine"
	"anechat/engine/kv"
	"anechat/storage"
)

// Index is engine.SnapshotStore over the storage database: the kv_snapshots
// rows index the files of the data dir's kv/ by prefix block hashes
// (kv.BlockHashes), with LRU eviction to the byte quota (storage setting
// kv.quota_bytes, default 2 GiB).
//
// Keys name the owner whose snapshot Replace swaps: ConversationKey(id),
// PromptKey(id), or "" for none.
type Index struct {
	db  *storage.DB
	dir string // the kv/ directory
	log *slog.Logger
}

var _ engine.SnapshotStore = (*Index)(nil)

// ConversationKey is the Replace key of a conversation's snapshot.
func ConversationKey(id int64) string { return fmt.Sprintf("conversation:%d", id) }

// PromptKey is the Replace key of a library prompt's snapshot.
func PromptKey(id int64) string { return fmt.Sprintf("prompt:%d", id) }

// Open opens the database of the data directory dataDir (storage.DataDir)
// and makes it agree with the files in its kv/ (New). log receives what was
// dropped and why, and eviction trouble; nil means slog.Default(). Close it
// when done.
func Open(ctx context.Context, dataDir string, log *slog.Logger) (*Index, error) {
	db, err := storage.Open(ctx, storage.DBPath(dataDir))
	if err != nil {
		return nil, err
	}
	return New(ctx, db, storage.KVPath(dataDir), log)
}

// New is Open over a database the caller already holds (the app's); Close
// then closes db too. It reconciles the index with kvDir
// (storage.Reconcile): rows of missing or incomplete files are dropped, and
// so are files without a row once they are old enough not to be another
// process's save in flight. Each dropped snapshot, and each entry that could
// not be checked or removed (left as it is: the cache stays on), is logged
// once at Warn with its path and why.
func New(ctx context.Context, db *storage.DB, kvDir string, log *slog.Logger) (*Index, error) {
	if log == nil {
		log = slog.Default()
	}
	x := &Index{db: db, dir: kvDir, log: log}
	rep, err := db.Reconcile(ctx, x.dir)
	if err != nil {
		db.Close()
		return nil, err
	}
	rep.Log(log, kvDir)
	return x, nil
}

// Close closes the database.
func (x *Index) Close() error { return x.db.Close() }

// DB is the database the index lives in.
func (x *Index) DB() *storage.DB { return x.db }

// Dir implements engine.SnapshotStore.
func (x *Index) Dir() string { return x.dir }

// LongestPrefix implements engine.SnapshotStore.
func (x *Index) LongestPrefix(ctx context.Context, meta kv.Meta, ids []int32) (engine.StoredSnapshot, bool, error) {
	m, ok, err := x.db.LongestPrefix(ctx, meta.Model, meta.Tokenizer, kv.BlockHashes(meta, ids))
	if err != nil || !ok {
		return engine.StoredSnapshot{}, false, err
	}
	if err := x.db.TouchSnapshot(ctx, m.Snapshot.ID); err != nil {
		return engine.StoredSnapshot{}, false, err
	}
	return engine.StoredSnapshot{Path: filepath.Join(x.dir, filepath.FromSlash(m.Snapshot.FilePath)),
		Tokens: m.Snapshot.TokenCount, Bytes: m.Snapshot.Bytes, Unowned: x.unowned(ctx, m.Snapshot)}, true, nil
}

// unowned reports whether nothing owns or pins s: no conversation or prompt
// key, not pinned, and no library prompt pins it (engine.StoredSnapshot.Unowned).
// When the prompts cannot be read it says owned: the snapshot is then kept.
func (x *Index) unowned(ctx context.Context, s storage.Snapshot) bool {
	if s.Pinned || s.ConversationID != 0 || s.PromptID != 0 {
		return false
	}
	ps, err := x.db.ListPrompts(ctx, "")
	if err != nil {
		x.log.Warn("kv index: listing prompts failed; keeping the snapshot as owned", "err", err)
		return false
	}
	for _, p := range ps {
		if p.PinnedSnapshotID == s.ID {
			return false
		}
	}
	return true
}

// Replace implements engine.SnapshotStore: it swaps the owner's row and then
// evicts least recently used snapshots beyond the quota (never the new one,
// never pinned ones), returning every file whose row is gone.
func (x *Index) Replace(ctx context.Context, key string, meta kv.Meta, ids []int32, s engine.StoredSnapshot) ([]string, error) {
	rel, err := filepath.Rel(x.dir, s.Path)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("kv index: snapshot %s is not inside %s", s.Path, x.dir)
	}
	in := storage.SnapshotInput{FilePath: filepath.ToSlash(rel), ModelFingerprint: meta.Model,
		TokenizerFingerprint: meta.Tokenizer, TemplateHash: meta.Template, TokenCount: len(ids), Bytes: s.Bytes,
		BlockHashes: kv.BlockHashes(meta, ids)}
	if key != "" {
		kind, id, ok := strings.Cut(key, ":")
		n, err := strconv.ParseInt(id, 10, 64)
		switch {
		case !ok || err != nil || n <= 0:
			return nil, fmt.Errorf("kv index: snapshot key %q: want conversation:ID or prompt:ID", key)
		case kind == "conversation":
			in.ConversationID = n
		case kind == "prompt":
			in.PromptID = n
		default:
			return nil, fmt.Errorf("kv index: snapshot key %q: want conversation:ID or prompt:ID", key)
		}
	}
	row, old, err := x.db.ReplaceSnapshot(ctx, in)
	if err != nil {
		return nil, err
	}
	var orphans []string
	for _, o := range old {
		orphans = append(orphans, filepath.Join(x.dir, filepath.FromSlash(o.FilePath)))
	}
	quota, err := x.db.KVQuota(ctx)
	if err != nil {
		// The new row is in; eviction waits for the next save.
		x.log.Warn("kv index: reading the snapshot quota failed; not evicting", "err", err)
		return orphans, nil
	}
	evict, err := x.db.EvictionCandidates(ctx, quota)
	if err != nil {
		x.log.Warn("kv index: choosing snapshots to evict failed", "err", err)
		return orphans, nil
	}
	for _, e := range evict {
		if e.ID == row.ID {
			continue
		}
		if err := x.db.DeleteSnapshot(ctx, e.ID); err != nil {
			x.log.Warn("kv index: evicting a snapshot failed", "path", e.FilePath, "err", err)
			continue
		}
		orphans = append(orphans, filepath.Join(x.dir, filepath.FromSlash(e.FilePath)))
	}
	return orphans, nil
}

// Forget implements engine.SnapshotStore.
func (x *Index) Forget(ctx context.Context, path string) error {
	rel, err := filepath.Rel(x.dir, path)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("kv index: snapshot %s is not inside %s", path, x.dir)
	}
	return x.db.ForgetSnapshotFile(ctx, filepath.ToSlash(rel))
}
