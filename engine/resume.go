package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"anechat/engine/kv"
)

// StoredSnapshot is one KV snapshot file known to a SnapshotStore.
type StoredSnapshot struct {
	// Path is the snapshot file (in the store's Dir).
	Path string
	// Tokens is the number of positions the snapshot holds.
	Tokens int
	// Bytes is the file size.
	Bytes int64
	// Unowned: no conversation or prompt owns the snapshot and nothing pins
	// it (it was saved under the empty key, by `anechat generate`), so
	// SaveRun may drop it when a new snapshot holds all its tokens. A store
	// that cannot tell leaves it false.
	Unowned bool
}

// SnapshotStore is the index of KV snapshot files that a Session resumes
// from (DESIGN.md invariant 5). The app implements it over storage (the
// kv_snapshots table): the engine never imports storage.
type SnapshotStore interface {
	// Dir is the directory that snapshot files are written to (the data
	// dir's kv/).
	Dir() string
	// LongestPrefix returns the stored snapshot bound to meta that shares
	// the most whole kv.BlockSize-token blocks with the start of ids, and
	// marks it used; ok is false when none shares a block. It reads no
	// snapshot file.
	LongestPrefix(ctx context.Context, meta kv.Meta, ids []int32) (s StoredSnapshot, ok bool, err error)
	// Replace records the complete snapshot file s, holding ids under meta,
	// as the snapshot of key (e.g. a conversation), and drops the record of
	// key's previous snapshot in the same transaction. It returns the files
	// that no record points at any more; the caller deletes them. An empty
	// key replaces nothing.
	Replace(ctx context.Context, key string, meta kv.Meta, ids []int32, s StoredSnapshot) (orphans []string, err error)
	// Forget drops the record of a snapshot that failed to load (damaged,
	// missing, of another model): it is not offered again. The caller
	// deletes the file.
	Forget(ctx context.Context, path string) error
}

// Resumer restores a KV cache from the longest stored prefix of a prompt and
// saves snapshots after each turn. Everything it does fails closed
// (DESIGN.md invariant 4): a snapshot it cannot use is logged, forgotten and
// the caller prefills normally.
type Resumer struct {
	// Store is the snapshot index.
	Store SnapshotStore
	// Meta binds snapshots to the model, tokenizer and chat template.
	Meta kv.Meta
	// Log receives why a snapshot was not used; nil means slog.Default().
	Log *slog.Logger
}

func (r *Resumer) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.Default()
}

// Restore loads into c the longest stored prefix of ids and returns how many
// positions c now holds committed (ids[:n]); the caller prefills ids[n:] from
// offset n in batched calls. It always leaves at least the last token of ids
// to prefill, since its logits choose the next token. It returns 0 with c
// empty when nothing usable is stored, the reason logged: it never fails.
func (r *Resumer) Restore(ctx context.Context, ids []int32, c *kv.Cache) int {
	c.Reset()
	if len(ids) <= kv.BlockSize {
		return 0
	}
	snap, ok, err := r.Store.LongestPrefix(ctx, r.Meta, ids)
	if err != nil {
		r.log().Warn("kv resume: snapshot lookup failed; prefilling normally", "err", err)
		return 0
	}
	if !ok {
		return 0
	}
	h, err := kv.Load(ctx, snap.Path, r.Meta, c)
	if err != nil {
		if ctx.Err() == nil {
			r.drop(ctx, snap.Path, err)
		}
		return 0
	}
	n := 0
	for n < len(h.Tokens) && n < len(ids)-1 && h.Tokens[n] == ids[n] {
		n++
	}
	if n < kv.BlockSize {
		// The index matched blocks the file does not hold: its record is
		// wrong.
		c.Reset()
		r.drop(ctx, snap.Path, fmt.Errorf("its tokens do not match its index record: they share %d positions with the prompt, the record at least %d", n, kv.BlockSize))
		return 0
	}
	if err := c.Truncate(n); err != nil {
		// A sliding layer keeps only its last Window rows: the snapshot
		// serves prompts that leave it at most one position before its end.
		// Nothing is wrong with it, and it stays.
		r.log().Info("kv resume: stored prefix ends too far past the prompt's; prefilling normally", "path", snap.Path, "shared", n, "stored", len(h.Tokens), "reason", err)
		c.Reset()
		return 0
	}
	return n
}

// drop forgets a snapshot that cannot be used and deletes its file, and says
// so once, at Warn, with why (DESIGN.md invariant 4: fail closed, visibly).
func (r *Resumer) drop(ctx context.Context, path string, reason error) {
	var cleanup error
	if err := r.Store.Forget(ctx, path); err != nil {
		cleanup = fmt.Errorf("forgetting it failed: %w", err)
	} else if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		cleanup = fmt.Errorf("forgotten, but deleting the file failed: %w", err)
	}
	if cleanup != nil {
		r.log().Warn("kv resume: snapshot dropped; prefilling normally", "path", path, "reason", reason, "cleanup", cleanup)
		return
	}
	r.log().Warn("kv resume: snapshot dropped; prefilling normally", "path", path, "reason", reason)
}

// Save writes the committed rows of c, which hold ids, as the snapshot of key,
// replacing key's previous snapshot: write the new file, swap the record,
// delete the old file (DESIGN.md invariant 6: a record only ever points at a
// complete file). It returns the new file's path.
func (r *Resumer) Save(ctx context.Context, key string, ids []int32, c *kv.Cache) (string, error) {
	if len(ids) != c.Len() {
		return "", fmt.Errorf("kv save: %d ids for %d cached positions", len(ids), c.Len())
	}
	path, created, err := kv.Create(ctx, r.Store.Dir(), r.Meta, ids, c)
	if err != nil {
		r.discard(path, created)
		return "", err
	}
	st, err := os.Stat(path)
	if err != nil {
		r.discard(path, created)
		return "", fmt.Errorf("kv save: %w", err)
	}
	orphans, err := r.Store.Replace(ctx, key, r.Meta, ids, StoredSnapshot{Path: path, Tokens: len(ids), Bytes: st.Size()})
	if err != nil {
		// A file no record points at must not stay: on a full disk it
		// would keep the disk full. One that was there already may be
		// another record's (same contents, same name), so it stays.
		r.discard(path, created)
		return "", fmt.Errorf("kv save: recording %s: %w", path, err)
	}
	for _, o := range orphans {
		if o == path {
			continue
		}
		if err := os.Remove(o); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log().Warn("kv save: could not delete a replaced snapshot", "path", o, "err", err)
		}
	}
	return path, nil
}

// discard removes the file of a save that failed, if the save created it.
func (r *Resumer) discard(path string, created bool) {
	if path == "" || !created {
		return
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log().Warn("kv save: could not delete the snapshot file of a failed save", "path", path, "err", err)
	}
}

// Prefill makes s hold the prompt ids and prefills what is not cached, in
// batched calls from the first uncached offset (DESIGN.md invariant 5).
//
// When everything s holds in its cache is a prefix of ids (the next turn of
// the same conversation), it continues from there; when most of ids is a
// prefix of what s holds (a regenerated or edited last message), it
// truncates the cache to the shared part if the sliding windows allow;
// otherwise it restores the longest stored prefix of ids, or starts empty.
// A nil Resumer or Store (caching off) never reads the store. The session's
// next Stats report the reused or restored positions as ResumedTokens and
// the rest as PrefillTokens.
func (r *Resumer) Prefill(ctx context.Context, s *Session, ids []int32, progress func(done, total int)) error {
	c := s.Cache()
	if k := s.Reusable(ids); k > 0 {
		if k < c.Len() {
			if err := c.Truncate(k); err != nil {
				return err
			}
		}
		if err := s.Restored(ids[:k]); err != nil {
			return err
		}
		return s.Prefill(ctx, ids[k:], progress)
	}
	s.Reset()
	n := 0
	if r != nil && r.Store != nil {
		n = r.Restore(ctx, ids, c)
	}
	if err := s.Restored(ids[:n]); err != nil {
		return err
	}
	return s.Prefill(ctx, ids[n:], progress)
}

// Reusable is how many positions of the prompt ids Resume keeps from what s
// holds, changing nothing: all of its cache when that is a prefix of ids
// (the next turn), the shared part when that is most of ids and the sliding
// windows allow cutting back to it (a regenerated or edited message); 0 when
// Resume would start over. The last token of ids is never kept: its logits
// choose the next token. A caller keeping several sessions (package
// sessions) asks each which one holds most of a prompt.
func (s *Session) Reusable(ids []int32) int {
	c := s.cache
	if c.Len() == 0 || c.Pending() != 0 || len(ids) == 0 {
		return 0
	}
	k, lim := 0, min(c.Len(), len(ids)-1, len(s.tokens))
	for k < lim && s.tokens[k] == ids[k] {
		k++
	}
	if k > 0 && (k == c.Len() || 2*k > len(ids) && c.CanTruncate(k) == nil) {
		return k
	}
	return 0
}

// SaveSession writes the committed part of s's sequence as the snapshot of
// key (see Save); call it after each assistant turn. A nil Resumer or Store
// saves nothing, and neither does a sequence shorter than one block.
func (r *Resumer) SaveSession(ctx context.Context, key string, s *Session) (string, error) {
	if r == nil || r.Store == nil {
		return "", nil
	}
	n := s.Cache().Len()
	if n < kv.BlockSize {
		return "", nil // shorter than a block: the index could never match it
	}
	return r.Save(ctx, key, s.Tokens()[:n], s.Cache())
}

// SaveRun is SaveSession for a run that no conversation or prompt owns
// (`anechat generate`): its snapshot has no owner whose earlier one Replace
// would swap, so every rerun of a prompt that changed the sequence (fewer or
// more tokens generated) would add a snapshot. Instead it looks up the stored
// snapshot sharing most of s's sequence (the one the run resumed from) and
// saves nothing when that one already holds the whole sequence; otherwise it
// saves, then drops that snapshot when it is Unowned and its tokens are a
// prefix of the new ones (the new snapshot serves every prompt it served).
// With sliding-window layers nothing is dropped: their snapshot keeps only
// the last Window rows, so a longer one cannot serve the prompts that end
// where the shorter one ends. It returns the path of the snapshot that holds
// the sequence ("" when nothing was saved for being shorter than a block).
func (r *Resumer) SaveRun(ctx context.Context, s *Session) (string, error) {
	if r == nil || r.Store == nil {
		return "", nil
	}
	c := s.Cache()
	n := c.Len()
	if n < kv.BlockSize {
		return "", nil
	}
	ids := s.Tokens()[:n]
	var prev []int32
	old, ok, err := r.Store.LongestPrefix(ctx, r.Meta, ids)
	if err != nil {
		r.log().Warn("kv save: snapshot lookup failed; saving without looking for a duplicate", "err", err)
	}
	if err == nil && ok {
		if h, err := kv.ReadHeader(old.Path); err == nil && h.Meta == r.Meta {
			prev = h.Tokens
		}
	}
	if len(prev) >= n && slices.Equal(prev[:n], ids) {
		return old.Path, nil // already stored: a second copy would hold nothing new
	}
	path, err := r.Save(ctx, "", ids, c)
	if err != nil {
		return "", err
	}
	sliding := false
	for _, l := range c.Geometry().Layers {
		sliding = sliding || l.Window > 0
	}
	if old.Unowned && !sliding && prev != nil && old.Path != path && len(prev) < n && slices.Equal(ids[:len(prev)], prev) {
		if err := r.Store.Forget(ctx, old.Path); err != nil {
			r.log().Warn("kv save: could not drop a snapshot the new one holds", "path", old.Path, "err", err)
		} else if err := os.Remove(old.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			r.log().Warn("kv save: could not delete a snapshot the new one holds", "path", old.Path, "err", err)
		}
	}
	return path, nil
}
