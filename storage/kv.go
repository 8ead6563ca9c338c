package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"anechat/storage/db"
)

// BlockSize is the number of tokens per prefix block of a KV snapshot
// (the same as engine/kv.BlockSize).
const BlockSize = 64

// Snapshot is the index row of one KV snapshot file.
type Snapshot struct {
	ID                   int64     `json:"id"`
	FilePath             string    `json:"filePath"` // relative to the kv/ directory
	ModelFingerprint     string    `json:"modelFingerprint"`
	TokenizerFingerprint string    `json:"tokenizerFingerprint"`
	TemplateHash         string    `json:"templateHash"`
	TokenCount           int       `json:"tokenCount"`
	Bytes                int64     `json:"bytes"` // size of the file
	CreatedAt            time.Time `json:"createdAt"`
	LastUsedAt           time.Time `json:"lastUsedAt"`
	Pinned               bool      `json:"pinned"`
	ConversationID       int64     `json:"conversationId"` // 0 if none
	PromptID             int64     `json:"promptId"`       // 0 if none
}

// SnapshotInput describes a complete snapshot file for InsertSnapshot.
type SnapshotInput struct {
	FilePath             string // relative to the kv/ directory, e.g. the content-hash file name
	ModelFingerprint     string
	TokenizerFingerprint string
	TemplateHash         string
	TokenCount           int
	Bytes                int64
	Pinned               bool
	ConversationID       int64 // 0 for none
	PromptID             int64 // 0 for none
	// BlockHashes are the chained prefix hashes of the snapshot's token ids,
	// one per full BlockSize-token block (engine/kv.BlockHashes): hash i
	// must stand for the whole prefix ids[:BlockSize*(i+1)]. Opaque to
	// storage; LongestPrefix must be given hashes made the same way.
	BlockHashes []string
}

// PrefixMatch is the result of LongestPrefix.
type PrefixMatch struct {
	Snapshot Snapshot
	// Blocks is how many leading blocks of the prompt the snapshot shares;
	// Tokens = Blocks*BlockSize. The snapshot's own token ids (in its file)
	// may agree beyond that, up to the next block boundary; compare them to
	// extend the match.
	Blocks int
	Tokens int
}

func snapshotOut(s db.KvSnapshot) Snapshot {
	return Snapshot{ID: s.ID, FilePath: s.FilePath, ModelFingerprint: s.ModelFingerprint,
		TokenizerFingerprint: s.TokenizerFingerprint, TemplateHash: s.TemplateHash, TokenCount: int(s.TokenCount),
		Bytes: s.Bytes, CreatedAt: fromMillis(s.CreatedAt), LastUsedAt: fromMillis(s.LastUsedAt), Pinned: s.Pinned != 0,
		ConversationID: idOut(s.ConversationID), PromptID: idOut(s.PromptID)}
}

func snapshotsOut(ss []db.KvSnapshot) []Snapshot {
	out := make([]Snapshot, len(ss))
	for i, s := range ss {
		out[i] = snapshotOut(s)
	}
	return out
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// validate checks what the schema cannot.
func (in SnapshotInput) validate(op string) error {
	switch {
	case in.FilePath == "" || !filepath.IsLocal(in.FilePath):
		return invalid(op, "file path %q must be a non-empty path inside the kv directory", in.FilePath)
	case in.ModelFingerprint == "" || in.TokenizerFingerprint == "":
		return invalid(op, "model and tokenizer fingerprints are required")
	case in.TokenCount < 0 || in.Bytes < 0:
		return invalid(op, "negative token count or size")
	case slices.Contains(in.BlockHashes, ""):
		return invalid(op, "empty block hash")
	case len(in.BlockHashes) > in.TokenCount/BlockSize:
		return invalid(op, "%d block hashes for %d tokens (at most one per full %d-token block)", len(in.BlockHashes), in.TokenCount, BlockSize)
	}
	return nil
}

func insertSnapshot(ctx context.Context, q *db.Queries, in SnapshotInput, now int64) (db.KvSnapshot, error) {
	s, err := q.InsertSnapshot(ctx, db.InsertSnapshotParams{FilePath: filepath.ToSlash(in.FilePath),
		ModelFingerprint: in.ModelFingerprint, TokenizerFingerprint: in.TokenizerFingerprint, TemplateHash: in.TemplateHash,
		TokenCount: int64(in.TokenCount), Bytes: in.Bytes, CreatedAt: now, LastUsedAt: now, Pinned: boolInt(in.Pinned),
		ConversationID: idIn(in.ConversationID), PromptID: idIn(in.PromptID)})
	if err != nil {
		return s, err
	}
	for i, h := range in.BlockHashes {
		if err := q.InsertSnapshotBlock(ctx, db.InsertSnapshotBlockParams{SnapshotID: s.ID, BlockIndex: int64(i), PrefixHash: h}); err != nil {
			return s, err
		}
	}
	return s, nil
}

// InsertSnapshot indexes a complete snapshot file with its prefix block
// hashes, in one transaction. Write the file first (DESIGN.md invariant 6).
func (d *DB) InsertSnapshot(ctx context.Context, in SnapshotInput) (Snapshot, error) {
	op := "index KV snapshot " + in.FilePath
	if err := in.validate(op); err != nil {
		return Snapshot{}, err
	}
	var out Snapshot
	err := d.tx(ctx, op, func(q *db.Queries) error {
		s, err := insertSnapshot(ctx, q, in, millis(d.now()))
		out = snapshotOut(s)
		return err
	})
	return out, err
}

// ReplaceSnapshot indexes a new snapshot as the current one of its owner
// and, in the same transaction, removes the rows of the owner's previous
// unpinned snapshots, returning them: delete their files afterwards (a crash
// in between leaves only files without rows, which Reconcile removes). The
// owner is in.ConversationID if set, else in.PromptID; with neither it only
// inserts. A row already pointing at in.FilePath (same content, same name)
// is re-pointed rather than duplicated, and is not returned; when another
// prompt pins it (two prompts with the same opening), it is returned as it
// is, owner and all, for the new owner to pin too. Rows another prompt pins
// are never removed here.
func (d *DB) ReplaceSnapshot(ctx context.Context, in SnapshotInput) (Snapshot, []Snapshot, error) {
	op := "replace KV snapshot with " + in.FilePath
	if err := in.validate(op); err != nil {
		return Snapshot{}, nil, err
	}
	path := filepath.ToSlash(in.FilePath)
	var out Snapshot
	old := []Snapshot{}
	err := d.tx(ctx, op, func(q *db.Queries) error {
		var prev []db.KvSnapshot
		var err error
		switch {
		case in.ConversationID != 0:
			prev, err = q.ListConversationSnapshots(ctx, idIn(in.ConversationID))
		case in.PromptID != 0:
			prev, err = q.ListPromptSnapshots(ctx, idIn(in.PromptID))
		}
		if err != nil {
			return err
		}
		// pinnedByOther reports whether a prompt other than the new
		// owner pins row id: prompts with the same opening share one
		// file, and one prompt's new snapshot must not unprepare another.
		pinnedByOther := func(id int64) (bool, error) {
			ps, err := q.ListPromptsPinning(ctx, idIn(id))
			if err != nil {
				return false, err
			}
			return slices.ContainsFunc(ps, func(p int64) bool { return p != in.PromptID }), nil
		}
		for _, p := range prev {
			if p.Pinned != 0 || p.FilePath == path {
				continue // a pinned one stays; the same file is re-indexed below
			}
			if other, err := pinnedByOther(p.ID); err != nil {
				return err
			} else if other {
				continue
			}
			if _, err := q.DeleteSnapshot(ctx, p.ID); err != nil {
				return err
			}
			old = append(old, snapshotOut(p))
		}
		switch same, err := q.GetSnapshotByPath(ctx, path); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			if other, err := pinnedByOther(same.ID); err != nil {
				return err
			} else if other {
				// Another prompt's snapshot of the same tokens: the row
				// stays as it is (its owner too), and the caller pins it.
				out = snapshotOut(same)
				return nil
			}
			if _, err := q.DeleteSnapshot(ctx, same.ID); err != nil {
				return err
			}
		}
		s, err := insertSnapshot(ctx, q, in, millis(d.now()))
		out = snapshotOut(s)
		return err
	})
	if err != nil {
		return Snapshot{}, nil, err
	}
	return out, old, nil
}

// ForgetSnapshotFile removes the row pointing at filePath (relative to the
// kv/ directory), e.g. after the file failed to load. No error if none does.
func (d *DB) ForgetSnapshotFile(ctx context.Context, filePath string) error {
	_, err := d.q.DeleteSnapshotByPath(ctx, filepath.ToSlash(filePath))
	return d.fail("forget KV snapshot "+filePath, err)
}

// maxHashesPerQuery keeps LongestPrefix under SQLite's bound-parameter limit.
const maxHashesPerQuery = 4096

// LongestPrefix finds the snapshot of this model and tokenizer sharing the
// most leading blocks with a prompt whose BlockHashes are hashes. Among
// equally long matches it prefers the snapshot with the fewest tokens (the
// least to truncate), then the most recently used. ok is false if none
// shares even one block.
func (d *DB) LongestPrefix(ctx context.Context, modelFP, tokenizerFP string, hashes []string) (m PrefixMatch, ok bool, err error) {
	// Chained hashes make a match at block i imply matches at every block
	// before it, so the deepest chunk with any match holds the answer.
	for end := len(hashes); end > 0; end -= maxHashesPerQuery {
		start := max(0, end-maxHashesPerQuery)
		params := db.PrefixCandidatesParams{Hashes: hashes[start:end], ModelFingerprint: modelFP, TokenizerFingerprint: tokenizerFP}
		rows, err := d.q.PrefixCandidates(ctx, params)
		if err != nil {
			return PrefixMatch{}, false, d.fail("look up KV snapshot prefix", err)
		}
		for _, r := range rows {
			// A hash counts only at the block index it has in the prompt.
			if r.BlockIndex < int64(start) || r.BlockIndex >= int64(end) || hashes[r.BlockIndex] != r.PrefixHash {
				continue
			}
			s := snapshotOut(db.KvSnapshot{ID: r.ID, FilePath: r.FilePath, ModelFingerprint: r.ModelFingerprint,
				TokenizerFingerprint: r.TokenizerFingerprint, TemplateHash: r.TemplateHash, TokenCount: r.TokenCount,
				Bytes: r.Bytes, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, Pinned: r.Pinned,
				ConversationID: r.ConversationID, PromptID: r.PromptID})
			blocks := int(r.BlockIndex) + 1
			return PrefixMatch{Snapshot: s, Blocks: blocks, Tokens: blocks * BlockSize}, true, nil
		}
	}
	return PrefixMatch{}, false, nil
}

// GetSnapshot returns the snapshot row with id, or ErrNotFound.
func (d *DB) GetSnapshot(ctx context.Context, id int64) (Snapshot, error) {
	s, err := d.q.GetSnapshot(ctx, id)
	if err != nil {
		return Snapshot{}, d.fail(fmt.Sprintf("get KV snapshot %d", id), err)
	}
	return snapshotOut(s), nil
}

// ListSnapshots returns every snapshot row, by id.
func (d *DB) ListSnapshots(ctx context.Context) ([]Snapshot, error) {
	ss, err := d.q.ListSnapshots(ctx)
	if err != nil {
		return nil, d.fail("list KV snapshots", err)
	}
	return snapshotsOut(ss), nil
}

// SnapshotBlockHashes returns the stored block hashes of a snapshot.
func (d *DB) SnapshotBlockHashes(ctx context.Context, id int64) ([]string, error) {
	hs, err := d.q.ListSnapshotBlocks(ctx, id)
	if err != nil {
		return nil, d.fail(fmt.Sprintf("list blocks of KV snapshot %d", id), err)
	}
	return hs, nil
}

// TouchSnapshot records that the snapshot was just used (LRU order).
func (d *DB) TouchSnapshot(ctx context.Context, id int64) error {
	op := fmt.Sprintf("touch KV snapshot %d", id)
	n, err := d.q.TouchSnapshot(ctx, db.TouchSnapshotParams{LastUsedAt: millis(d.now()), ID: id})
	return d.fail(op, oneRow(op, n, err))
}

// SetSnapshotPinned pins or unpins a snapshot; pinned ones are never evicted.
func (d *DB) SetSnapshotPinned(ctx context.Context, id int64, pinned bool) error {
	op := fmt.Sprintf("pin KV snapshot %d", id)
	n, err := d.q.SetSnapshotPinned(ctx, db.SetSnapshotPinnedParams{Pinned: boolInt(pinned), ID: id})
	return d.fail(op, oneRow(op, n, err))
}

// TotalSnapshotBytes is the sum of Bytes over all snapshot rows.
func (d *DB) TotalSnapshotBytes(ctx context.Context) (int64, error) {
	n, err := d.q.TotalSnapshotBytes(ctx)
	if err != nil {
		return 0, d.fail("sum KV snapshot sizes", err)
	}
	return n, nil
}

// EvictionCandidates returns the snapshots to delete, least recently used
// first, so that the rest fit in quota bytes. Pinned snapshots and those a
// prompt pins are never candidates, so the rest may still exceed quota.
func (d *DB) EvictionCandidates(ctx context.Context, quota int64) ([]Snapshot, error) {
	const op = "choose KV snapshots to evict"
	var out []Snapshot
	err := d.tx(ctx, op, func(q *db.Queries) error {
		total, err := q.TotalSnapshotBytes(ctx)
		if err != nil || total <= quota {
			return err
		}
		ss, err := q.EvictableSnapshots(ctx)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if total <= quota {
				break
			}
			out = append(out, snapshotOut(s))
			total -= s.Bytes
		}
		return nil
	})
	if out == nil {
		out = []Snapshot{}
	}
	return out, err
}

// DeleteSnapshot removes a snapshot row (and its blocks); delete the file
// after. Prompts pinning it lose the pin.
func (d *DB) DeleteSnapshot(ctx context.Context, id int64) error {
	op := fmt.Sprintf("delete KV snapshot %d", id)
	n, err := d.q.DeleteSnapshot(ctx, id)
	return d.fail(op, oneRow(op, n, err))
}
