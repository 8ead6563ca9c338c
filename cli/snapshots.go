package cli

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

// snapshotIndex is engine.SnapshotStore over the storage database: the
// kv_snapshots rows index the files of the data dir's kv/ by prefix block
// hashes (kv.BlockHashes), with LRU eviction to the byte quota.
//
// Keys name the owner whose snapshot Replace swaps: "conversation:ID",
// "prompt:ID", or "" for none.
type snapshotIndex struct {
	db  *storage.DB
	dir string // the kv/ directory
	log *slog.Logger
}

var _ engine.SnapshotStore = (*snapshotIndex)(nil)

// openSnapshotIndex opens the database of dataDir and makes it agree with
// the files in kv/ (rows of missing or incomplete files and files without a
// row, e.g. left by a crashed write, are removed). The caller closes db.
func openSnapshotIndex(ctx context.Context, dataDir string, log *slog.Logger) (*snapshotIndex, error) {
	db, err := storage.Open(ctx, storage.DBPath(dataDir))
	if err != nil {
		return nil, err
	}
	x := &snapshotIndex{db: db, dir: storage.KVPath(dataDir), log: log}
	rep, err := db.Reconcile(ctx, x.dir)
	if err != nil {
		db.Close()
		return nil, err
	}
	if len(rep.RowsDeleted)+len(rep.FilesDeleted) > 0 {
		log.Info("kv snapshots reconciled", "rows_without_file", len(rep.RowsDeleted), "files_without_row", len(rep.FilesDeleted))
	}
	return x, nil
}

func (x *snapshotIndex) Close() error { return x.db.Close() }

// Dir implements engine.SnapshotStore.
func (x *snapshotIndex) Dir() string { return x.dir }

// LongestPrefix implements engine.SnapshotStore.
func (x *snapshotIndex) LongestPrefix(ctx context.Context, meta kv.Meta, ids []int32) (engine.StoredSnapshot, bool, error) {
	m, ok, err := x.db.LongestPrefix(ctx, meta.Model, meta.Tokenizer, kv.BlockHashes(meta, ids))
	if err != nil || !ok {
		return engine.StoredSnapshot{}, false, err
	}
	if err := x.db.TouchSnapshot(ctx, m.Snapshot.ID); err != nil {
		return engine.StoredSnapshot{}, false, err
	}
	return engine.StoredSnapshot{Path: filepath.Join(x.dir, filepath.FromSlash(m.Snapshot.FilePath)),
		Tokens: m.Snapshot.TokenCount, Bytes: m.Snapshot.Bytes}, true, nil
}

// Replace implements engine.SnapshotStore: it swaps the owner's row and then
// evicts least recently used snapshots beyond the quota (never the new one,
// never pinned ones), returning every file whose row is gone.
func (x *snapshotIndex) Replace(ctx context.Context, key string, meta kv.Meta, ids []int32, s engine.StoredSnapshot) ([]string, error) {
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
		return orphans, nil // the new row is in; eviction waits for the next save
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
func (x *snapshotIndex) Forget(ctx context.Context, path string) error {
	rel, err := filepath.Rel(x.dir, path)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("kv index: snapshot %s is not inside %s", path, x.dir)
	}
	return x.db.ForgetSnapshotFile(ctx, filepath.ToSlash(rel))
}

// openResumer sets up KV snapshot resume for a command: the snapshot index of
// the data dir (--data-dir > $ANECHAT_HOME > the OS default), bound to the
// model and to how the prompt's ids were made (mode: "ids", "raw", "chat").
// With noCache, or when the data dir or database cannot be used (logged),
// it returns a nil Resumer: prefill from scratch, save nothing. The returned
// func closes the database.
func openResumer(ctx context.Context, dataDirFlag string, noCache bool, m *loadedModel, mode string, log *slog.Logger) (*engine.Resumer, func()) {
	if noCache {
		return nil, func() {}
	}
	dir, err := storage.DataDir(dataDirFlag)
	if err == nil {
		var x *snapshotIndex
		if x, err = openSnapshotIndex(ctx, dir, log); err == nil {
			return &engine.Resumer{Store: x, Meta: snapshotMeta(m, mode), Log: log}, func() { x.Close() }
		}
	}
	log.Warn("kv cache off: the data directory cannot be used", "err", err)
	return nil, func() {}
}

// snapshotMeta binds snapshots to the model and to the ids' making: the
// tokenizer and chat template when the model's codec tells them (a codec may
// implement tokenizerFingerprint() and templateHash()), else the mode alone
// (the model fingerprint covers a tokenizer stored with the weights).
func snapshotMeta(m *loadedModel, mode string) kv.Meta {
	meta := kv.Meta{Model: m.backend.Config().Fingerprint, Tokenizer: "none", Template: mode}
	if f, ok := m.codec.(interface{ tokenizerFingerprint() string }); ok && mode != "ids" {
		meta.Tokenizer = f.tokenizerFingerprint()
	}
	if h, ok := m.codec.(interface{ templateHash() string }); ok && mode == "chat" {
		meta.Template = "chat:" + h.templateHash()
	}
	return meta
}

// cliLogger logs warnings (why a snapshot was not used) to stderr.
func cliLogger(env *Env) *slog.Logger {
	return slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
